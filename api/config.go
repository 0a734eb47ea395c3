package api

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// Sink durably writes leaf counts; *bulk.Writer implements it. Submit returns one Result per
// item in order, or an error wrapping bulk.ErrUnavailable when the store is unreachable. It
// must keep no reference to items once it returns: the server reuses the slice for its next
// request (bulk.Writer copies what it queues).
type Sink interface {
	Submit(ctx context.Context, items []bulk.Item) ([]bulk.Result, error)
}

var _ Sink = (*bulk.Writer)(nil)

// StoreGate is implemented by a Sink that knows when the store is down (*bulk.Writer does).
// The server then refuses a submission during an outage at once, before any store work, and
// takes the 503's Retry-After from it.
type StoreGate interface {
	// Available returns nil unless the store is known to be down; then, within about a
	// second (after at most one probe of the store), an error wrapping bulk.ErrUnavailable.
	Available(ctx context.Context) error
	// RetryAfter is when an agent refused now should come back; 0 while the store is up.
	RetryAfter() time.Duration
}

var _ StoreGate = (*bulk.Writer)(nil)

// TreeIndex gives, from memory, the trees of every project that apply to recent ticks: which
// tree of the submitting project applies and which other project's tree holds a node id.
// *treedb.Directory implements it (one store query per refresh, not per request).
type TreeIndex interface {
	Snapshot(ctx context.Context) (*treedb.Snapshot, error)
}

var _ TreeIndex = (*treedb.Directory)(nil)

// Defaults of Config.
const (
	DefaultMaxBodyBytes  = 1 << 20
	DefaultMaxItems      = 10_000
	DefaultLateWindow    = 24 * time.Hour
	DefaultFutureSkew    = 5 * time.Minute
	DefaultMaxOnline     = 10_000_000
	DefaultRetryAfter    = 5 * time.Second
	DefaultSubmitTimeout = 30 * time.Second
	DefaultTokenCacheTTL = 3 * time.Second
	// DefaultTokenUsageInterval is how often token use is written (last_used_at): at most
	// once per token per interval and instance, never per request.
	DefaultTokenUsageInterval = time.Minute
	// DefaultBodyReadTimeout lets the largest default body (1 MiB) arrive at ~35 KB/s.
	DefaultBodyReadTimeout = 30 * time.Second
)

// Config configures a Server. Zero fields take their defaults.
type Config struct {
	// MaxBodyBytes bounds the request body (413 above it; default 1 MiB).
	MaxBodyBytes int64
	// BodyReadTimeout bounds how long an ingest request's body may take to arrive, from when
	// the server starts reading it: a stalled or trickling upload is answered 408 and its
	// connection closed (default 30s). It needs a ResponseWriter that supports read deadlines
	// (net/http's server does; see http.ResponseController).
	BodyReadTimeout time.Duration
	// MaxItems bounds the items of one request (413 above it; default 10,000).
	MaxItems int
	// LateWindow is how old a tick may be and still be accepted (422 otherwise; default 24h).
	LateWindow time.Duration
	// FutureSkew is how far ahead of the server clock a timestamp or observed_at may be
	// (422 otherwise; default 5m).
	FutureSkew time.Duration
	// Tick is the tick timestamps must be aligned to (default tree.DefaultTick).
	Tick time.Duration
	// MaxOnline is the largest accepted count (400 above it; default 10,000,000).
	MaxOnline int64
	// RetryAfter is the base of the 503 Retry-After when the Sink does not suggest one (see
	// StoreGate); the answer is jittered in [RetryAfter, 2×RetryAfter] so agents do not come
	// back in lockstep (default 5s).
	RetryAfter time.Duration
	// SubmitTimeout bounds how long a request waits for the Sink (503 after; default 30s).
	SubmitTimeout time.Duration
	// TokenCacheTTL is how long a token lookup is cached: a revoked token or deleted project
	// still works that long (default 3s, at most MaxTokenCacheTTL so that a revocation takes
	// effect on every instance within 5 s; an expiry is checked on each request).
	TokenCacheTTL time.Duration
	// TokenRPS is the requests per second one token may make, ingest and reads together, with
	// a burst of TokenBurst of it; past it, 429 with Retry-After and nothing written (default
	// DefaultTokenRPS; negative: no limit).
	TokenRPS float64
	// TokenLeavesPerSecond is the counts per second one token may submit, with a burst of
	// TokenBurst of it and at least MaxItems (default DefaultTokenLeavesPerSecond; negative:
	// no limit).
	TokenLeavesPerSecond float64
	// TokenBurst is how much of its rates a token may spend at once, as a time: a full
	// bucket holds TokenBurst of TokenRPS requests and of TokenLeavesPerSecond counts (default
	// LimitBurst).
	TokenBurst time.Duration
	// TokenUsageInterval is how often Run writes the tokens' last-used times (default 1m).
	TokenUsageInterval time.Duration
	// DB holds the tokens and projects collections.
	DB *mongo.Database
	// Sink writes the counts. When it is also a StoreGate, submissions during a store outage
	// are refused at once.
	Sink Sink
	// TreeStore is where the read API loads trees from (nil: a store over DB). Share the
	// process's store so a large tree is loaded and cached once.
	TreeStore *treedb.Store
	// Trees, when set, lets the API refuse counts whose id belongs to another project's tree
	// at that tick (403; node ids are unique per deployment) or is an interior node of the
	// project's own tree (400; its key is the watcher's parent document). Ids no tree holds
	// are accepted: orphans are kept and surfaced. A *treedb.Directory covering at least
	// LateWindow; share the process's one.
	Trees TreeIndex
	// Logger is named "api" by NewServer (default no-op).
	Logger *zap.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.BodyReadTimeout <= 0 {
		c.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if c.MaxItems <= 0 {
		c.MaxItems = DefaultMaxItems
	}
	if c.LateWindow <= 0 {
		c.LateWindow = DefaultLateWindow
	}
	if c.FutureSkew <= 0 {
		c.FutureSkew = DefaultFutureSkew
	}
	if c.Tick <= 0 {
		c.Tick = tree.DefaultTick
	}
	if c.MaxOnline <= 0 {
		c.MaxOnline = DefaultMaxOnline
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.SubmitTimeout <= 0 {
		c.SubmitTimeout = DefaultSubmitTimeout
	}
	if c.TokenCacheTTL <= 0 {
		c.TokenCacheTTL = DefaultTokenCacheTTL
	}
	c.TokenCacheTTL = min(c.TokenCacheTTL, MaxTokenCacheTTL)
	if c.TokenRPS == 0 {
		c.TokenRPS = DefaultTokenRPS
	}
	if c.TokenLeavesPerSecond == 0 {
		c.TokenLeavesPerSecond = DefaultTokenLeavesPerSecond
	}
	if c.TokenBurst <= 0 {
		c.TokenBurst = LimitBurst
	}
	if c.TokenUsageInterval <= 0 {
		c.TokenUsageInterval = DefaultTokenUsageInterval
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}
