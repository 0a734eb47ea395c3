package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The load generator's agents resend a request whose outcome they do not know, as real agents
// do (api/agentclient): an answer 503 (the store busy or unreachable) or 429 after its
// Retry-After, any other 5xx and 408 likewise, and a transport failure (the connection refused,
// reset or cut before the whole answer) on a new connection after a backoff. Resending is safe:
// a submission carries absolute values under a unique (id, type, timestamp) index, so nothing
// is counted twice. Any other 4xx is a bug of the benchmark or of the server and ends the run.

// Bounds of the resends.
const (
	// resendBase is the first backoff when the server named no Retry-After; it doubles per
	// resend of the same request, up to resendMax.
	resendBase = 500 * time.Millisecond
	// resendMax caps one wait, a server's Retry-After included.
	resendMax = 30 * time.Second
	// resendGiveUp ends the run when one request has been resent this long without an
	// acknowledgement: the system under test makes no progress (a serve that died, a store
	// that is gone), and the run's context may have no deadline.
	resendGiveUp = 10 * time.Minute
)

// resendPolicy decides how long the load generator waits before a resend.
type resendPolicy struct {
	base, max, giveUp time.Duration
	// Test hooks: wait waits d or until ctx ends (nil: a timer); randN draws uniformly in
	// [0, n) (nil: math/rand/v2).
	wait  func(ctx context.Context, d time.Duration) error
	randN func(n int64) int64
}

func defaultResendPolicy() resendPolicy {
	return resendPolicy{base: resendBase, max: resendMax, giveUp: resendGiveUp}
}

// resendError is a failed attempt whose request may be resent.
type resendError struct {
	status        int           // the answer's status; 0: a transport failure
	retryAfter    time.Duration // the answer's Retry-After, when retryAfterSet
	retryAfterSet bool
	err           error // the failure: "HTTP 503: {...}" or the transport error
}

func (e *resendError) Error() string { return e.err.Error() }
func (e *resendError) Unwrap() error { return e.err }

// resendable reports whether an answer of status leaves the request's outcome unknown (or
// asks for it later), so the same request may be sent again: 5xx, 408 and 429.
func resendable(status int) bool {
	return status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
}

// transportFailure reports whether err is the connection failing (refused, reset, closed,
// timed out, cut short) rather than a malformed answer.
func transportFailure(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, net.ErrClosed) || errors.As(err, &ne)
}

// delay is the wait before resend number n (0-based) after failure e: the server's Retry-After
// plus up to a quarter of it as jitter (so the agents told the same do not all come back at
// once), else an exponential backoff with equal jitter: in [c/2, c) for c = min(max,
// base×2^n). Never more than max.
func (p resendPolicy) delay(n int, e *resendError) time.Duration {
	if e.retryAfterSet {
		d := min(e.retryAfter, p.max)
		return min(d+time.Duration(p.rand(int64(d/4)+1)), p.max)
	}
	c := p.max
	if n < 62 && p.base <= p.max>>uint(n) {
		c = p.base << uint(n)
	}
	return c/2 + time.Duration(p.rand(int64(c/2)+1))
}

func (p resendPolicy) rand(n int64) int64 {
	if p.randN != nil {
		return p.randN(n)
	}
	return rand.Int64N(n)
}

// sleep waits d or until ctx ends.
func (p resendPolicy) sleep(ctx context.Context, d time.Duration) error {
	if p.wait != nil {
		return p.wait(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// sendStats counts what the back-pressure of the server cost a Send: the resends, by cause,
// and the time the connections spent waiting before them.
type sendStats struct {
	resends int
	// byStatus counts resends per status of the answer that caused them; 0 is a transport
	// failure.
	byStatus map[int]int
	// mostResends is the most resends of one request.
	mostResends int
	// waited is the sum over connections of the waits before resends; busy the sum over
	// connections of their time in Send (waits included): waited/busy is the share of the
	// agents' time spent in back-pressure.
	waited, busy time.Duration
}

func (s *sendStats) add(o sendStats) {
	s.resends += o.resends
	s.mostResends = max(s.mostResends, o.mostResends)
	s.waited += o.waited
	s.busy += o.busy
	for k, v := range o.byStatus {
		if s.byStatus == nil {
			s.byStatus = map[int]int{}
		}
		s.byStatus[k] += v
	}
}

// waitShare is the share of the connections' time spent waiting to resend (0 to 1).
func (s sendStats) waitShare() float64 {
	if s.busy <= 0 {
		return 0
	}
	return float64(s.waited) / float64(s.busy)
}

// causes lists the resends by cause: "503 ×10, transport ×2" ("-" without resends).
func (s sendStats) causes() string {
	if s.resends == 0 {
		return "-"
	}
	keys := make([]int, 0, len(s.byStatus))
	for k := range s.byStatus {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		name := strconv.Itoa(k)
		if k == 0 {
			name = "transport"
		}
		parts = append(parts, fmt.Sprintf("%s ×%d", name, s.byStatus[k]))
	}
	return strings.Join(parts, ", ")
}

// String describes the resends for a progress line.
func (s sendStats) String() string {
	if s.resends == 0 {
		return "no resends"
	}
	return fmt.Sprintf("%d resends (%s; at most %d of one request), %.1f s of waiting before them summed over the connections (%.0f%% of their time)",
		s.resends, s.causes(), s.mostResends, s.waited.Seconds(), 100*s.waitShare())
}
