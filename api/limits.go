package api

import (
	"math"
	"sync"
	"time"
)

// Per-token limits (Config.TokenRPS, Config.TokenLeavesPerSecond).
const (
	// DefaultTokenRPS is the requests per second one token may make (ingest and reads
	// together): an agent on a 5-minute cadence makes one per 300 s, so a token shared by
	// thousands of agents stays far below it.
	DefaultTokenRPS = 50
	// DefaultTokenLeavesPerSecond is the counts per second one token may submit.
	DefaultTokenLeavesPerSecond = 50_000
	// LimitBurst is the default of Config.TokenBurst: how many seconds of its rate a token may
	// spend at once (a full bucket), the burst of a tick boundary. The leaves' burst is at
	// least Config.MaxItems, so a request of the largest size always fits an idle token's
	// bucket.
	LimitBurst = 10 * time.Second
	// maxLimitedTokens bounds the tokens with limiter state; a token beyond it while all are
	// active is not limited (state is evicted once a token's buckets are full again).
	maxLimitedTokens = 100_000
	// maxHoldBack bounds how long a 429 is held back, and maxHeldBack how many are at once.
	maxHoldBack = time.Second
	maxHeldBack = 1024
)

// bucket is a token bucket: tokens refill at rate per second up to burst.
type bucket struct {
	tokens float64
	last   time.Time
}

// take takes n tokens at now if the bucket holds them; otherwise it takes nothing and says
// how long until it would. n above burst counts as burst (a full bucket admits it).
func (b *bucket) take(n, rate, burst float64, now time.Time) (bool, time.Duration) {
	if b.last.IsZero() {
		b.tokens = burst
	} else if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(burst, b.tokens+el*rate)
	}
	if now.After(b.last) {
		b.last = now
	}
	n = math.Min(n, burst)
	if b.tokens >= n {
		b.tokens -= n
		return true, 0
	}
	return false, time.Duration((n - b.tokens) / rate * float64(time.Second))
}

// rateLimit is a rate and its burst; a zero rate is no limit.
type rateLimit struct{ rate, burst float64 }

// newRateLimit is perSecond with a burst of burst of it, at least minBurst (and 1).
func newRateLimit(perSecond float64, burst time.Duration, minBurst int) rateLimit {
	if perSecond <= 0 {
		return rateLimit{}
	}
	return rateLimit{rate: perSecond, burst: math.Max(perSecond*burst.Seconds(), math.Max(1, float64(minBurst)))}
}

// refill is how long an empty bucket takes to fill: state idle that long is a fresh bucket.
func (l rateLimit) refill() time.Duration {
	if l.rate == 0 {
		return 0
	}
	return time.Duration(l.burst / l.rate * float64(time.Second))
}

// tokenLimits holds each token's buckets, by token hash, with idle eviction.
type tokenLimits struct {
	requests, leaves rateLimit

	mu     sync.Mutex
	tokens map[string]*tokenBuckets
}

type tokenBuckets struct {
	requests, leaves bucket
	seen             time.Time
}

func newTokenLimits(requests, leaves rateLimit) *tokenLimits {
	return &tokenLimits{requests: requests, leaves: leaves, tokens: make(map[string]*tokenBuckets)}
}

// allowRequest takes one request of the token of hash at now, or says how long until one
// would be allowed.
func (l *tokenLimits) allowRequest(hash string, now time.Time) (bool, time.Duration) {
	if l.requests.rate == 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketsLocked(hash, now)
	if b == nil {
		return true, 0
	}
	return b.requests.take(1, l.requests.rate, l.requests.burst, now)
}

// allowLeaves takes n leaves of the token of hash at now, or says how long until they would
// be allowed.
func (l *tokenLimits) allowLeaves(hash string, n int, now time.Time) (bool, time.Duration) {
	if l.leaves.rate == 0 || n == 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketsLocked(hash, now)
	if b == nil {
		return true, 0
	}
	return b.leaves.take(float64(n), l.leaves.rate, l.leaves.burst, now)
}

// bucketsLocked returns the token's buckets, created when missing; nil when the table is full
// of active tokens.
func (l *tokenLimits) bucketsLocked(hash string, now time.Time) *tokenBuckets {
	b, ok := l.tokens[hash]
	if !ok {
		if len(l.tokens) >= maxLimitedTokens {
			l.evictLocked(now)
			if len(l.tokens) >= maxLimitedTokens {
				return nil
			}
		}
		b = &tokenBuckets{}
		l.tokens[hash] = b
	}
	b.seen = now
	return b
}

// evictIdle forgets the tokens idle long enough for their buckets to be full again (their
// state is then that of a fresh token), bounding memory to the recently active tokens.
func (l *tokenLimits) evictIdle(now time.Time) {
	l.mu.Lock()
	l.evictLocked(now)
	l.mu.Unlock()
}

func (l *tokenLimits) evictLocked(now time.Time) {
	idle := max(l.requests.refill(), l.leaves.refill())
	for h, b := range l.tokens {
		if now.Sub(b.seen) >= idle {
			delete(l.tokens, h)
		}
	}
}

// size is the number of tokens with state.
func (l *tokenLimits) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.tokens)
}

// retryAfterSecondsOf rounds a wait up to whole seconds, at least 1.
func retryAfterSecondsOf(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}
