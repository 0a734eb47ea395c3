package bulk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/internal/testctx"
)

// fakeProbe answers the health's probes with err, optionally holding each until released.
type fakeProbe struct {
	mu    sync.Mutex
	err   error
	calls atomic.Int64
	hold  chan struct{} // when set, a probe waits for it to be closed
}

func (f *fakeProbe) probe() error {
	f.calls.Add(1)
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *fakeProbe) set(err error, hold chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.hold = err, hold
}

func newTestHealth(t *testing.T, p *fakeProbe, gap time.Duration) *health {
	h := newHealth(p.probe, status.New("bulk", "starting"), gap, zaptest.NewLogger(t))
	t.Cleanup(func() {
		h.mu.Lock()
		h.closed = true
		h.mu.Unlock()
		h.probing.Wait()
	})
	return h
}

var errStore = errors.New("server selection error")

// TestHealthCheck: up answers at once without probing; down probes (one probe for many
// concurrent callers), refuses with a *StoreDownError while the probe fails, and opens as soon
// as one succeeds.
func TestHealthCheck(t *testing.T) {
	p := &fakeProbe{}
	h := newTestHealth(t, p, 20*time.Millisecond)
	ctx := context.Background()
	if err := h.check(ctx); err != nil || p.calls.Load() != 0 {
		t.Fatalf("up: check = %v after %d probes", err, p.calls.Load())
	}

	h.failed(errStore)
	if h.up() || h.tracker.State().Ready {
		t.Fatal("failed: still up")
	}
	p.set(errStore, nil)
	start := time.Now()
	err := h.check(ctx)
	var down *StoreDownError
	if !errors.As(err, &down) || !errors.Is(err, ErrUnavailable) || down.Since.IsZero() {
		t.Fatalf("down: check = %v, want a *StoreDownError wrapping ErrUnavailable", err)
	}
	if p.calls.Load() != 1 {
		t.Fatalf("%d probes, want 1", p.calls.Load())
	}
	// The next check waits for the probe slot (gap after the last probe), then probes again.
	if err := h.check(ctx); err == nil {
		t.Fatal("down: second check succeeded")
	}
	if took := time.Since(start); p.calls.Load() != 2 || took < h.gap {
		t.Fatalf("%d probes in %v, want 2 at least %v apart", p.calls.Load(), took, h.gap)
	}

	// Concurrent checks share one probe.
	hold := make(chan struct{})
	p.set(nil, hold)
	before := p.calls.Load()
	const callers = 8
	errs := make(chan error, callers)
	for range callers {
		go func() { errs <- h.check(ctx) }()
	}
	testctx.WaitFor(t, "another probe", func() bool { return p.calls.Load() > before })
	close(hold)
	for range callers {
		if err := <-errs; err != nil {
			t.Fatalf("check after a successful probe: %v", err)
		}
	}
	if n := p.calls.Load() - before; n != 1 {
		t.Fatalf("%d probes for %d concurrent checks, want 1", n, callers)
	}
	if !h.up() || !h.tracker.State().Ready {
		t.Fatal("a successful probe did not open the gate")
	}
	if got := [2]int64{h.probes[0].Load(), h.probes[1].Load()}; got != [2]int64{1, 2} {
		t.Fatalf("probes ok/failed = %v, want [1 2]", got)
	}
}

// TestHealthCheckCanceled: a caller whose context ends while it waits gets the store-down
// error at once.
func TestHealthCheckCanceled(t *testing.T) {
	p := &fakeProbe{}
	h := newTestHealth(t, p, time.Hour)
	h.failed(errStore)
	h.lastProbe = time.Now() // the next slot is an hour away
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.check(ctx); !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("check = %v, want unavailable and canceled", err)
	}
	if p.calls.Load() != 0 {
		t.Fatalf("%d probes", p.calls.Load())
	}
}

// TestRetryAfter: 0 while up; during an outage half its length so far, from 1s to 20s, plus a
// jitter of up to half that.
func TestRetryAfter(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	now := t0
	jitter := 0.0
	h := newTestHealth(t, &fakeProbe{}, time.Millisecond)
	h.now = func() time.Time { return now }
	h.jitter = func() float64 { return jitter }
	if got := h.retryAfter(); got != 0 {
		t.Fatalf("up: %v", got)
	}
	h.failed(errStore)
	cases := []struct {
		outage time.Duration
		jitter float64
		want   time.Duration
	}{
		{0, 0, time.Second},
		{0, 0.999, 1499500 * time.Microsecond},
		{time.Second, 0, time.Second},
		{4 * time.Second, 0, 2 * time.Second},
		{10 * time.Second, 0.5, 6250 * time.Millisecond},
		{40 * time.Second, 0, 20 * time.Second},
		{time.Hour, 0.999, 29990 * time.Millisecond},
	}
	for _, c := range cases {
		now, jitter = t0.Add(c.outage), c.jitter
		if got := h.retryAfter(); got != c.want {
			t.Errorf("outage %v jitter %v: %v, want %v", c.outage, c.jitter, got, c.want)
		}
	}
	h.succeeded()
	if got := h.retryAfter(); got != 0 {
		t.Fatalf("up again: %v", got)
	}
}

// TestHealthRun: the background prober probes while the store is down, at growing intervals,
// until a probe succeeds, and returns when its context ends.
func TestHealthRun(t *testing.T) {
	p := &fakeProbe{}
	p.set(errStore, nil)
	h := newTestHealth(t, p, 5*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.run(ctx)
	}()
	h.failed(errStore)
	testctx.WaitFor(t, "four probes", func() bool { return p.calls.Load() >= 4 })
	p.set(nil, nil)
	testctx.WaitFor(t, "the store to be up", h.up)
	n := p.calls.Load()
	cancel()
	<-done
	if p.calls.Load() != n {
		t.Fatalf("probed after the store was up: %d, then %d", n, p.calls.Load())
	}
}

// TestHealthFreshProbe: a check does not wait for a probe that began more than maxJoinAge
// ago (it may have begun before the store came back and run out its timeout waiting): it
// starts its own, which finds the store; the old probe's failure, ending after that success,
// does not mark the store down again.
func TestHealthFreshProbe(t *testing.T) {
	p := &fakeProbe{}
	h := newTestHealth(t, p, time.Millisecond)
	h.failed(errStore)
	stuck := make(chan struct{})
	p.set(errStore, stuck) // the first probe hangs, then fails
	h.mu.Lock()
	old := h.startLocked()
	h.mu.Unlock()
	testctx.WaitFor(t, "the first probe", func() bool { return p.calls.Load() == 1 })
	h.mu.Lock()
	old.started = old.started.Add(-2 * maxJoinAge) // it began a while ago
	h.mu.Unlock()
	p.set(nil, nil) // the store is back: new probes succeed at once
	if err := h.check(context.Background()); err != nil {
		t.Fatalf("check with an old probe running: %v", err)
	}
	if p.calls.Load() != 2 || !h.up() {
		t.Fatalf("%d probes, up %v; want a second probe and the store up", p.calls.Load(), h.up())
	}
	p.set(errStore, nil)
	close(stuck) // the old probe fails now
	<-old.done
	if old.err == nil || !h.up() {
		t.Fatalf("old probe %v; up %v: a stale failure marked the store down", old.err, h.up())
	}
}

// TestHealthProbePanics: a probe that panics still answers the check waiting for it (the
// store stays down, with errProbePanicked as the reason), and the panic is raised again where
// the prober waits for its probes, instead of leaving the check to hang.
func TestHealthProbePanics(t *testing.T) {
	h := newHealth(func() error { panic("probe bug") }, status.New("bulk", "starting"), time.Millisecond, zaptest.NewLogger(t))
	h.failed(errStore)
	var down *StoreDownError
	if err := h.check(context.Background()); !errors.As(err, &down) {
		t.Fatalf("check = %v, want a *StoreDownError", err)
	}
	if h.up() || !strings.Contains(down.Reason, errProbePanicked.Error()) {
		t.Fatalf("up %v, reason %q; want down because the probe panicked", h.up(), down.Reason)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "probe bug") {
			t.Fatalf("recovered %v, want the probe's panic", r)
		}
	}()
	h.run(ctx) // returns at once (ctx is done) and waits for the probes
	t.Fatal("run returned without raising the probe's panic")
}

// TestHealthBackBeforeOutage: a writable report that arrives while the store is up (a write
// already found it) says nothing about the next outage: that outage waits for its probe slot.
func TestHealthBackBeforeOutage(t *testing.T) {
	h := newTestHealth(t, &fakeProbe{}, time.Hour)
	h.topology(true, "")
	h.failed(errStore)
	if h.backHint.Load() || len(h.back) != 0 {
		t.Fatalf("hint %v, %d signals: a report from before the outage counts for it", h.backHint.Load(), len(h.back))
	}
	h.topology(true, "")
	if !h.backHint.Load() || len(h.back) != 1 {
		t.Fatalf("hint %v, %d signals after a report during the outage", h.backHint.Load(), len(h.back))
	}
}
