package bulk

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gameops/rollup/internal/testctx"
)

func TestPolicyCut(t *testing.T) {
	const ms = time.Millisecond
	p := policy{maxBatch: 10, maxDelay: 10 * ms, idleGap: 2 * ms}
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	cases := []struct {
		name      string
		now       time.Duration
		idleSince time.Duration
		inFlight  int
		set       pendingSet
		drain     bool
		wantN     int
		wantWait  time.Duration
	}{
		{name: "nothing pending", now: 50 * ms, wantN: 0, wantWait: 0},
		{name: "nothing pending, draining", now: 50 * ms, drain: true, wantN: 0, wantWait: 0},
		{
			name: "a full batch goes at once", now: 1 * ms, inFlight: 1,
			set: pendingSet{n: 10, oldest: at(1 * ms), newest: at(1 * ms)}, wantN: 10,
		},
		{
			name: "more than a batch: a full batch goes", now: 1 * ms,
			set: pendingSet{n: 25, oldest: at(0), newest: at(1 * ms)}, wantN: 10,
		},
		{
			name: "partial while a batch is in flight: held however old, no deadline", now: 500 * ms, inFlight: 1,
			set: pendingSet{n: 9, oldest: at(0), newest: at(1 * ms)}, wantN: 0, wantWait: 0,
		},
		{
			name: "draining sends a partial batch even while a batch is in flight", now: 1 * ms, inFlight: 1, drain: true,
			set: pendingSet{n: 3, oldest: at(1 * ms), newest: at(1 * ms)}, wantN: 3,
		},
		{
			name: "lone item on an idle writer waits for the idle gap", now: 1 * ms,
			set: pendingSet{n: 1, oldest: at(0), newest: at(0)}, wantN: 0, wantWait: 1 * ms,
		},
		{
			name: "lone item goes once the idle gap passed", now: 2 * ms,
			set: pendingSet{n: 1, oldest: at(0), newest: at(0)}, wantN: 1,
		},
		{
			name: "steady trickle: the idle deadline moves with the newest arrival", now: 5 * ms,
			set: pendingSet{n: 5, oldest: at(0), newest: at(4500 * time.Microsecond)}, wantN: 0, wantWait: 1500 * time.Microsecond,
		},
		{
			name: "steady trickle: capped by MaxDelay since the oldest arrival", now: 9 * ms,
			set: pendingSet{n: 9, oldest: at(0), newest: at(9 * ms)}, wantN: 0, wantWait: 1 * ms,
		},
		{
			name: "steady trickle: MaxDelay reached", now: 10 * ms,
			set: pendingSet{n: 9, oldest: at(0), newest: at(10 * ms)}, wantN: 9,
		},
		{
			name: "store just went idle: old items are not sent at once", now: 100 * ms, idleSince: 100 * ms,
			set: pendingSet{n: 5, oldest: at(0), newest: at(50 * ms)}, wantN: 0, wantWait: 2 * ms,
		},
		{
			name: "store went idle: the idle gap counts from then", now: 102 * ms, idleSince: 100 * ms,
			set: pendingSet{n: 5, oldest: at(0), newest: at(50 * ms)}, wantN: 5,
		},
		{
			name: "store went idle: arrivals since then keep it open", now: 102 * ms, idleSince: 100 * ms,
			set: pendingSet{n: 6, oldest: at(0), newest: at(101 * ms)}, wantN: 0, wantWait: 1 * ms,
		},
		{
			name: "store went idle: MaxDelay counts from then too", now: 109 * ms, idleSince: 100 * ms,
			set: pendingSet{n: 9, oldest: at(0), newest: at(109 * ms)}, wantN: 0, wantWait: 1 * ms,
		},
		{
			name: "store went idle: MaxDelay reached", now: 110 * ms, idleSince: 100 * ms,
			set: pendingSet{n: 9, oldest: at(0), newest: at(110 * ms)}, wantN: 9,
		},
		{
			name: "idle long before the oldest arrival: clocks start at the arrival", now: 105 * ms, idleSince: 0,
			set: pendingSet{n: 2, oldest: at(100 * ms), newest: at(104 * ms)}, wantN: 0, wantWait: 1 * ms,
		},
		{
			name: "deadline overdue (late wake-up): sent, never a negative wait", now: time.Second,
			set: pendingSet{n: 2, oldest: at(0), newest: at(1 * ms)}, wantN: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, wait := p.cut(at(tc.now), at(tc.idleSince), tc.inFlight, tc.set, tc.drain)
			if n != tc.wantN || wait != tc.wantWait {
				t.Fatalf("cut = (%d, %v), want (%d, %v)", n, wait, tc.wantN, tc.wantWait)
			}
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	cases := []struct {
		in                Options
		maxDelay, idleGap time.Duration
	}{
		{Options{}, DefaultMaxDelay, DefaultMaxDelay / DefaultIdleGapDivisor},
		{Options{MaxDelay: time.Hour}, time.Hour, time.Hour / DefaultIdleGapDivisor},
		{Options{MaxDelay: 2 * time.Millisecond}, 2 * time.Millisecond, 400 * time.Microsecond},
		{Options{IdleGap: time.Millisecond}, DefaultMaxDelay, time.Millisecond},
		{Options{MaxDelay: time.Second, IdleGap: 3 * time.Millisecond}, time.Second, 3 * time.Millisecond},
	}
	for _, tc := range cases {
		o := tc.in.withDefaults()
		if o.MaxDelay != tc.maxDelay || o.IdleGap != tc.idleGap || o.MaxBatch != DefaultMaxBatch || o.Workers != DefaultWorkers() {
			t.Errorf("%+v.withDefaults() = %+v, want MaxDelay %v IdleGap %v", tc.in, o, tc.maxDelay, tc.idleGap)
		}
	}
	if got := (Options{}).withDefaults().IdleGap; got != 20*time.Millisecond {
		t.Errorf("default IdleGap %v, want 20ms", got)
	}
}

// fakeClock is a clock that moves only when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: tick0} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) after(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ft := &fakeTimer{at: c.t.Add(d), c: make(chan time.Time, 1)}
	c.timers = append(c.timers, ft)
	return ft.c, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.timers = slices.DeleteFunc(c.timers, func(x *fakeTimer) bool { return x == ft })
	}
}

// advance moves the clock and fires the timers that are due.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	c.timers = slices.DeleteFunc(c.timers, func(ft *fakeTimer) bool {
		if ft.at.After(c.t) {
			return false
		}
		ft.c <- c.t
		return true
	})
}

// armed returns the deadlines of the pending timers.
func (c *fakeClock) armed() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, ft := range c.timers {
		out = append(out, ft.at.Sub(tick0))
	}
	return out
}

// waitArmed waits until Run has armed exactly one timer, for tick0+at.
func (c *fakeClock) waitArmed(t *testing.T, at time.Duration) {
	t.Helper()
	testctx.WaitFor(t, "the batch timer to be armed", func() bool { return slices.Equal(c.armed(), []time.Duration{at}) })
}

// sentBatch is one batch the recording writer was asked to write.
type sentBatch struct {
	at  time.Duration // fake time since tick0
	ids []string
}

// recorder replaces the store: it records every batch and, when hold is set, blocks each
// write until the test releases it.
type recorder struct {
	clock    *fakeClock
	hold     bool
	mu       sync.Mutex
	batches  []sentBatch
	releases []chan struct{} // per batch
	freed    bool            // releaseAll was called: writes no longer block
}

func newRecorder(c *fakeClock, hold bool) *recorder { return &recorder{clock: c, hold: hold} }

func (r *recorder) write(_ context.Context, items []Item, _ *batch) []Result {
	b := sentBatch{at: r.clock.now().Sub(tick0)}
	for _, it := range items {
		b.ids = append(b.ids, it.ID)
	}
	release := make(chan struct{})
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.releases = append(r.releases, release)
	if r.freed || !r.hold {
		close(release)
	}
	r.mu.Unlock()
	<-release
	res := make([]Result, len(items))
	for i := range res {
		res[i] = Result{Outcome: OutcomeApplied}
	}
	return res
}

// release lets the write of batch i (0-based, in sending order) finish.
func (r *recorder) release(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.releases[i])
}

// releaseAll lets every write finish, now and later.
func (r *recorder) releaseAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.freed {
		return
	}
	r.freed = true
	for _, ch := range r.releases {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
}

func (r *recorder) sent() []sentBatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

func (r *recorder) sizes() []int {
	var out []int
	for _, b := range r.sent() {
		out = append(out, len(b.ids))
	}
	return out
}

// fakeWriter runs a Writer on a fake clock with a recording store until the test ends.
func fakeWriter(t *testing.T, opts Options, hold bool) (*Writer, *fakeClock, *recorder) {
	t.Helper()
	c := newFakeClock()
	rec := newRecorder(c, hold)
	w := New(nil, opts, nil)
	w.clock = c
	w.writeBatch = rec.write
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		rec.releaseAll()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return w, c, rec
}

// submitAsync submits items in the background; wait returns the outcome.
func submitAsync(t *testing.T, w *Writer, items ...Item) (wait func() []Result) {
	t.Helper()
	type answer struct {
		res []Result
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		res, err := w.Submit(context.Background(), items)
		ch <- answer{res, err}
	}()
	return func() []Result {
		t.Helper()
		a := <-ch
		if a.err != nil {
			t.Fatalf("submit: %v", a.err)
		}
		return a.res
	}
}

func (w *Writer) waitPending(t *testing.T, n int) {
	t.Helper()
	testctx.WaitFor(t, "n pending items", func() bool { return w.pendingLen() == n })
}

func ids(prefix string, n int) []Item {
	out := make([]Item, n)
	for i := range out {
		out[i] = item(fmt.Sprintf("%s%02d", prefix, i), 1, 1)
	}
	return out
}

// TestBatchingLoneSubmit: on an idle writer a lone Submit goes after IdleGap, not before.
func TestBatchingLoneSubmit(t *testing.T) {
	w, c, rec := fakeWriter(t, Options{MaxBatch: 10, MaxDelay: 10 * time.Millisecond, IdleGap: 2 * time.Millisecond, Workers: 1}, false)
	wait := submitAsync(t, w, ids("a", 3)...)
	c.waitArmed(t, 2*time.Millisecond)
	c.advance(time.Millisecond) // before the deadline: nothing wakes Run
	if got := rec.sent(); len(got) != 0 {
		t.Fatalf("sent %v before the idle gap", got)
	}
	c.advance(time.Millisecond)
	if res := wait(); !slices.Equal(outcomes(res), []Outcome{OutcomeApplied, OutcomeApplied, OutcomeApplied}) {
		t.Fatalf("results %v", res)
	}
	if got := rec.sent(); len(got) != 1 || got[0].at != 2*time.Millisecond || len(got[0].ids) != 3 {
		t.Fatalf("sent %v, want one batch of 3 at 2ms", got)
	}
	if a := c.armed(); len(a) != 0 {
		t.Fatalf("timers %v left armed with nothing pending", a)
	}
}

// TestBatchingTrickle: an item every millisecond never leaves an idle gap of 2ms, so the
// batch is held until MaxDelay (10ms) after its oldest item, and holds the 10 items that
// arrived by then.
func TestBatchingTrickle(t *testing.T) {
	const ms = time.Millisecond
	w, c, rec := fakeWriter(t, Options{MaxBatch: 100, MaxDelay: 10 * ms, IdleGap: 2 * ms, Workers: 1}, false)
	var waits []func() []Result
	for i := range 10 {
		if i >= 2 {
			// The timer for the previous deadline fired; Run re-armed it for 2ms after the
			// newest arrival, capped at MaxDelay.
			c.waitArmed(t, min(time.Duration(i+1)*ms, 10*ms))
		}
		waits = append(waits, submitAsync(t, w, item(fmt.Sprintf("t%02d", i), 1, 1)))
		w.waitPending(t, i+1)
		if i == 0 {
			c.waitArmed(t, 2*ms)
		}
		if got := rec.sent(); len(got) != 0 {
			t.Fatalf("after %d items: sent %v before MaxDelay", i+1, got)
		}
		c.advance(ms)
	}
	// The clock is at 10ms now: the MaxDelay deadline fired.
	for _, wait := range waits {
		wait()
	}
	got := rec.sent()
	if len(got) != 1 || got[0].at != 10*ms || len(got[0].ids) != 10 {
		t.Fatalf("sent %v, want one batch of the 10 items at 10ms", got)
	}
}

// TestBatchingFillsWhileBusy: with a batch in flight, a free worker sends only full batches;
// partial ones wait for the store to go idle, however long that takes, and then the idle gap
// counts from that moment.
func TestBatchingFillsWhileBusy(t *testing.T) {
	const ms = time.Millisecond
	w, c, rec := fakeWriter(t, Options{MaxBatch: 10, MaxDelay: 10 * ms, IdleGap: 2 * ms, Workers: 2}, true)

	first := submitAsync(t, w, ids("a", 10)...) // full: sent at once, held in the store
	testctx.WaitFor(t, "one batch sent", func() bool { return len(rec.sent()) == 1 })

	// Trickling singles while the first batch is in flight: a worker is free, yet nothing
	// goes, and no deadline is armed, however much time passes.
	var singles []func() []Result
	for i := range 5 {
		singles = append(singles, submitAsync(t, w, item(fmt.Sprintf("b%02d", i), 1, 1)))
		w.waitPending(t, i+1)
	}
	c.advance(50 * ms)
	if a := c.armed(); len(a) != 0 {
		t.Fatalf("deadline %v armed while a batch is in flight", a)
	}
	// The tenth pending item fills a batch: the free worker sends it while the first is
	// still in flight.
	for i := 5; i < 10; i++ {
		singles = append(singles, submitAsync(t, w, item(fmt.Sprintf("b%02d", i), 1, 1)))
		if i < 9 {
			w.waitPending(t, i+1)
		}
	}
	testctx.WaitFor(t, "the condition", func() bool { return len(rec.sent()) == 2 })
	third := submitAsync(t, w, ids("c", 3)...)
	w.waitPending(t, 3)

	c.advance(50 * ms) // 100ms: the store finishes the first batch; the second is in flight
	rec.release(0)
	first()
	c.advance(50 * ms)
	if got := rec.sizes(); !slices.Equal(got, []int{10, 10}) {
		t.Fatalf("sent %v while a batch was in flight, want [10 10]", got)
	}
	if a := c.armed(); len(a) != 0 {
		t.Fatalf("deadline %v armed while a batch is in flight", a)
	}
	rec.release(1) // at 150ms the store goes idle
	for _, s := range singles {
		s()
	}
	// The three c items are 100ms old, yet they get the idle gap from 150ms.
	c.waitArmed(t, 152*ms)
	c.advance(2 * ms)
	testctx.WaitFor(t, "the condition", func() bool { return len(rec.sent()) == 3 })
	rec.release(2)
	third()
	got := rec.sent()
	want := []sentBatch{
		{0, []string{"a00", "a01", "a02", "a03", "a04", "a05", "a06", "a07", "a08", "a09"}},
		{50 * ms, []string{"b00", "b01", "b02", "b03", "b04", "b05", "b06", "b07", "b08", "b09"}},
		{152 * ms, []string{"c00", "c01", "c02"}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
}

// TestBatchingDrain: when Run's context ends, pending partial batches go at once, even with a
// batch in flight and deadlines far away.
func TestBatchingDrain(t *testing.T) {
	c := newFakeClock()
	rec := newRecorder(c, true)
	w := New(nil, Options{MaxBatch: 4, MaxDelay: time.Hour, Workers: 2}, nil)
	w.clock = c
	w.writeBatch = rec.write
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	full := submitAsync(t, w, ids("a", 4)...)
	testctx.WaitFor(t, "one batch sent", func() bool { return len(rec.sent()) == 1 })
	partial := submitAsync(t, w, ids("b", 3)...)
	w.waitPending(t, 3)
	cancel()
	testctx.WaitFor(t, "the condition", func() bool { return len(rec.sent()) == 2 })
	rec.releaseAll()
	full()
	partial()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := rec.sizes(); !slices.Equal(got, []int{4, 3}) {
		t.Fatalf("sent %v, want [4 3]", got)
	}
	if got := rec.sent()[1].at; got != 0 {
		t.Fatalf("drained at %v of fake time, want at once", got)
	}
}
