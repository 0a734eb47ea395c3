package watcher

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourcegraph/conc"

	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/recompute"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// TestBurstEnds: when a burst is written, by the batch, the stream's state and the reader's.
func TestBurstEnds(t *testing.T) {
	w := &Watcher{opts: Options{MinBurstDelay: 50 * time.Millisecond, MaxBurstDelay: 300 * time.Millisecond, MaxBurst: 1000}}
	const ms = time.Millisecond
	tests := []struct {
		name string
		c    burstSignals
		want bool
	}{
		{"quiet stream", burstSignals{n: 0, leaves: 10, age: ms, ahead: true}, true},
		{"tick complete", burstSignals{n: 5, complete: true, leaves: 10, age: ms, lastWrite: time.Second, ahead: true}, true},
		{"invalidate or shutdown", burstSignals{n: 5, end: true, leaves: 10, age: ms, lastWrite: time.Second, ahead: true}, true},
		{"too many leaves", burstSignals{n: 5, leaves: 1000, age: ms, ahead: true}, true},
		{"too old while the reader stays ahead", burstSignals{n: 5, leaves: 10, age: 300 * ms, lastWrite: time.Second, ahead: true}, true},
		{"young, reader ahead", burstSignals{n: 5, leaves: 10, age: 60 * ms, ahead: true}, false},
		{"young, caught up", burstSignals{n: 5, leaves: 10, age: 10 * ms}, false},
		{"min age, caught up", burstSignals{n: 5, leaves: 10, age: 50 * ms, lastWrite: 20 * ms}, true},
		{"min age, caught up, younger than the last writes", burstSignals{n: 5, leaves: 10, age: 100 * ms, lastWrite: 200 * ms}, false},
		{"as old as the last writes, caught up", burstSignals{n: 5, leaves: 10, age: 200 * ms, lastWrite: 200 * ms}, true},
		{"a tick closing: min age, caught up, younger than the last writes", burstSignals{n: 5, leaves: 10, age: 50 * ms, lastWrite: 200 * ms, closing: true}, true},
		{"a tick closing: young", burstSignals{n: 5, leaves: 10, age: 10 * ms, lastWrite: 200 * ms, closing: true}, false},
		{"a tick closing: reader ahead", burstSignals{n: 5, leaves: 10, age: 60 * ms, lastWrite: 200 * ms, closing: true, ahead: true}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := w.burstEnds(tc.c); got != tc.want {
				t.Fatalf("burstEnds(%+v) = %v, want %v", tc.c, got, tc.want)
			}
		})
	}
}

// TestBurstClosing: a burst sees a tick closing once it holds as many of the tick's leaves as
// are still to come, counting each tick on its own across batches, and not for a tick whose
// count is unknown (-1) or complete (0); reset forgets the counts.
func TestBurstClosing(t *testing.T) {
	t0 := baseTick()
	a, b := tickKey{"a", t0}, tickKey{"b", t0}
	batch := func(ps ...tickProgress) streamBatch {
		return streamBatch{leaves: make([]store.Leaf, 1), progress: ps}
	}
	tests := []struct {
		name    string
		batches []streamBatch
		want    bool
	}{
		{"many leaves to come", []streamBatch{batch(tickProgress{a, 10, 500})}, false},
		{"as many held as to come", []streamBatch{batch(tickProgress{a, 10, 30}), batch(tickProgress{a, 20, 30})}, true},
		{"counted per tick", []streamBatch{batch(tickProgress{a, 20, 30}), batch(tickProgress{b, 20, 30})}, false},
		{"unknown", []streamBatch{batch(tickProgress{a, 20, -1})}, false},
		{"complete", []streamBatch{batch(tickProgress{a, 20, 0})}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			br := newBurst()
			for _, sb := range tc.batches {
				br.add(sb)
			}
			if br.closing != tc.want || len(br.leaves) != len(tc.batches) {
				t.Fatalf("closing = %v with %d leaves, want %v", br.closing, len(br.leaves), tc.want)
			}
			br.reset()
			br.add(batch(tickProgress{a, 1, 30}))
			if br.closing || len(br.leaves) != 1 {
				t.Fatalf("after reset: closing = %v with %d leaves", br.closing, len(br.leaves))
			}
		})
	}
}

// heldRun is a watcher on project "p" (2 groups × 3 leaves) whose first leaf's work is held
// by a recompute knob (see startHeld).
type heldRun struct {
	e       *env
	r       *running
	t0      time.Time
	leaves  []tree.Node
	release chan struct{} // close to let the held call go on
}

// startHeld starts a watcher whose recompute knobs, made by knobs from hold, hold the first
// call of hold until release is closed (hold never crashes), submits the project's first leaf
// and returns once that call is held.
func startHeld(t *testing.T, knobs func(hold func() bool) recompute.Knobs) heldRun {
	e := newEnv(t)
	t0 := baseTick()
	e.trees.Add(t, "p", t0.Add(-24*time.Hour), smallNodes("p", 2, 3))
	tr, _, _ := e.trees.TreeAt(t.Context(), "p", t0)
	held, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	hold := func() bool {
		if first.CompareAndSwap(false, true) {
			close(held)
			<-release
		}
		return false
	}
	tracker := status.New("watcher", "starting")
	r := e.start(e.newWatcher(Options{Status: tracker, Knobs: &Knobs{Recompute: knobs(hold)}}))
	// The stream is open before the first leaf is written, so the leaf comes through it (a
	// leaf written before would be replayed at start, with the reader not yet running).
	testctx.WaitFor(t, "the watcher ready", func() bool { return tracker.State().Ready })
	l := tr.Leaves()
	e.submit(item("p", l[0].ID, l[0].Type, t0, 1, 1))
	<-held
	return heldRun{e: e, r: r, t0: t0, leaves: l, release: release}
}

// submitRest submits the project's other leaves.
func (h heldRun) submitRest() {
	for i, n := range h.leaves[1:] {
		h.e.submit(item("p", n.ID, n.Type, h.t0, int64(i+2), 1))
	}
}

// TestReadsAheadOfWrites: while a burst's parent writes are held, the stream's next batches
// are still read (the reader runs ahead of the writes), and once the writes go on every total
// is right.
func TestReadsAheadOfWrites(t *testing.T) {
	h := startHeld(t, func(hold func() bool) recompute.Knobs { return recompute.Knobs{BeforeLevel: hold} })
	before := h.r.w.Stats().Batches // the first burst's writes wait
	h.submitRest()
	testctx.WaitFor(t, "the stream read while a burst's writes are held", func() bool {
		return h.r.w.Stats().Batches > before
	})
	close(h.release)
	h.e.waitCorrect("p")
	if root, _ := h.e.parentDoc("p", tree.TypeProject, h.t0); root.Reported != int64(len(h.leaves)) {
		t.Fatalf("root = %+v, want every leaf reported", root)
	}
	if err := h.r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestSummariesBesideBursts: while a flush of the summaries is held, the next bursts' parents
// are still written (the flush runs beside them); once it goes on, the summaries of every
// burst are written too.
func TestSummariesBesideBursts(t *testing.T) {
	h := startHeld(t, func(hold func() bool) recompute.Knobs { return recompute.Knobs{BeforeTiers: hold} })
	h.submitRest() // the first flush of summaries waits
	testctx.WaitFor(t, "every parent written while the summaries are held", func() bool {
		m, _ := h.e.parentMismatch("p")
		return m == ""
	})
	if _, parents := h.e.parentMismatch("p"); h.e.tierMismatch("p", parents) == "" {
		t.Fatal("the summaries are current although their flush is held")
	}
	close(h.release)
	h.e.waitCorrect("p")
	if err := h.r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestReaderPanics: a reader whose read panics ends the stream for the watcher waiting in
// next (errReaderPanicked, not a hang), and stop raises the panic again.
func TestReaderPanics(t *testing.T) {
	w := &Watcher{}
	r := w.read(context.Background(), nil) // reading a nil stream panics
	if b := r.next(); !errors.Is(b.err, errReaderPanicked) {
		t.Fatalf("next = %+v, want errReaderPanicked", b)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("stop did not raise the reader's panic")
		}
	}()
	r.stop()
}

// TestFlushPanics: a flush of summaries that panics fails with errFlushPanicked (the stream
// restarts from its last safe token), and the stream's wait for its flushes raises the panic.
func TestFlushPanics(t *testing.T) {
	w := &Watcher{}
	var flushes conc.WaitGroup
	f := w.flushTiers(context.Background(), nil, &flushes) // summarizing a nil set panics
	if err := f.wait(); !errors.Is(err, errFlushPanicked) {
		t.Fatalf("wait = %v, want errFlushPanicked", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Wait did not raise the flush's panic")
		}
	}()
	flushes.Wait()
}
