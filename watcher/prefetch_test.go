package watcher

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/recompute"
	"github.com/gameops/rollup/tree"
)

// TestBurstEnds: when a burst is written, by the batch, the stream's state and the reader's.
func TestBurstEnds(t *testing.T) {
	w := &Watcher{opts: Options{MinBurstDelay: 50 * time.Millisecond, MaxBurstDelay: 300 * time.Millisecond, MaxBurst: 1000}}
	tests := []struct {
		name     string
		n        int
		complete bool
		end      bool
		leaves   int
		age      time.Duration
		last     time.Duration
		closing  bool
		ahead    bool
		want     bool
	}{
		{"quiet stream", 0, false, false, 10, time.Millisecond, 0, false, true, true},
		{"tick complete", 5, true, false, 10, time.Millisecond, time.Second, false, true, true},
		{"invalidate or shutdown", 5, false, true, 10, time.Millisecond, time.Second, false, true, true},
		{"too many leaves", 5, false, false, 1000, time.Millisecond, 0, false, true, true},
		{"too old while the reader stays ahead", 5, false, false, 10, 300 * time.Millisecond, time.Second, false, true, true},
		{"young, reader ahead", 5, false, false, 10, 60 * time.Millisecond, 0, false, true, false},
		{"young, caught up", 5, false, false, 10, 10 * time.Millisecond, 0, false, false, false},
		{"min age, caught up", 5, false, false, 10, 50 * time.Millisecond, 20 * time.Millisecond, false, false, true},
		{"min age, caught up, younger than the last writes", 5, false, false, 10, 100 * time.Millisecond, 200 * time.Millisecond, false, false, false},
		{"as old as the last writes, caught up", 5, false, false, 10, 200 * time.Millisecond, 200 * time.Millisecond, false, false, true},
		{"a tick closing: min age, caught up, younger than the last writes", 5, false, false, 10, 50 * time.Millisecond, 200 * time.Millisecond, true, false, true},
		{"a tick closing: young", 5, false, false, 10, 10 * time.Millisecond, 200 * time.Millisecond, true, false, false},
		{"a tick closing: reader ahead", 5, false, false, 10, 60 * time.Millisecond, 200 * time.Millisecond, true, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := w.burstEnds(tc.n, tc.complete, tc.end, tc.leaves, tc.age, tc.last, tc.closing, tc.ahead); got != tc.want {
				t.Fatalf("burstEnds = %v, want %v", got, tc.want)
			}
		})
	}
}

// holdFirst returns a recompute knob whose first call closes held and waits until release is
// closed (it never crashes), and the two channels.
func holdFirst() (hook func() bool, held, release chan struct{}) {
	held, release = make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	return func() bool {
		if first.CompareAndSwap(false, true) {
			close(held)
			<-release
		}
		return false
	}, held, release
}

// TestReadsAheadOfWrites: while a burst's parent writes are held, the stream's next batches
// are still read (the reader runs ahead of the writes), and once the writes go on every total
// is right.
func TestReadsAheadOfWrites(t *testing.T) {
	e := newEnv(t)
	t0 := baseTick()
	e.trees.Add(t, "p", t0.Add(-24*time.Hour), smallNodes("p", 2, 3))
	tr, _, _ := e.trees.TreeAt(t.Context(), "p", t0)
	hold, held, release := holdFirst()
	w := e.newWatcher(Options{Knobs: &Knobs{Recompute: recompute.Knobs{BeforeLevel: hold}}})
	r := e.start(w)
	l := tr.Leaves()
	e.submit(item("p", l[0].ID, l[0].Type, t0, 1, 1))
	<-held // the first burst's writes wait
	before := w.Stats().Batches
	for i, n := range l[1:] {
		e.submit(item("p", n.ID, n.Type, t0, int64(i+2), 1))
	}
	testctx.WaitFor(t, "the stream read while a burst's writes are held", func() bool {
		return w.Stats().Batches > before
	})
	close(release)
	e.waitCorrect("p")
	if root, _ := e.parentDoc("p", tree.TypeProject, t0); root.Reported != int64(len(l)) {
		t.Fatalf("root = %+v, want every leaf reported", root)
	}
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestSummariesBesideBursts: while a flush of the summaries is held, the next bursts' parents
// are still written (the flush runs beside them); once it goes on, the summaries of every
// burst are written too.
func TestSummariesBesideBursts(t *testing.T) {
	e := newEnv(t)
	t0 := baseTick()
	e.trees.Add(t, "p", t0.Add(-24*time.Hour), smallNodes("p", 2, 3))
	tr, _, _ := e.trees.TreeAt(t.Context(), "p", t0)
	hold, held, release := holdFirst()
	w := e.newWatcher(Options{Knobs: &Knobs{Recompute: recompute.Knobs{BeforeTiers: hold}}})
	r := e.start(w)
	l := tr.Leaves()
	e.submit(item("p", l[0].ID, l[0].Type, t0, 1, 1))
	<-held // the first flush of summaries waits
	for i, n := range l[1:] {
		e.submit(item("p", n.ID, n.Type, t0, int64(i+2), 1))
	}
	testctx.WaitFor(t, "every parent written while the summaries are held", func() bool {
		m, _ := e.parentMismatch("p")
		return m == ""
	})
	if _, parents := e.parentMismatch("p"); e.tierMismatch("p", parents) == "" {
		t.Fatal("the summaries are current although their flush is held")
	}
	close(release)
	e.waitCorrect("p")
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
