package bulk

import (
	"testing"
	"time"

	"github.com/gameops/rollup/internal/testctx"
)

// TestInFlightShared: the budget (the store's when known, else Workers) divided by the
// instances, at least 1, at most the larger of Workers and the largest default.
func TestInFlightShared(t *testing.T) {
	for _, tc := range []struct{ workers, budget, share, want int }{
		{2, 0, 0, 2}, {2, 0, 1, 2}, {2, 0, 2, 1}, {2, 0, 4, 1},
		{8, 0, 1, 8}, {8, 0, 2, 4}, {8, 0, 3, 3}, {8, 0, 4, 2}, {8, 0, 16, 1}, {1, 0, 3, 1},
		// The store's budget replaces Workers: a store on 8 cores (budget 4) shared by 2
		// instances on 3 cores each (Workers 2) gives each 2, not 1.
		{2, 4, 2, 2}, {2, 4, 1, 4}, {2, 4, 4, 1}, {2, 2, 4, 1},
		{2, 8, 1, 8}, {8, 2, 1, 2}, {2, 8, 3, 3},
		{2, 100, 1, 8}, {16, 100, 1, 16}, // never past max(Workers, MaxDefaultWritesInFlight)
	} {
		w := New(nil, Options{Workers: tc.workers}, nil)
		w.SetStoreBudget(tc.budget)
		w.ShareInFlight(tc.share)
		if got := w.inFlight(); got != tc.want {
			t.Errorf("Workers %d, store's budget %d, shared by %d: %d in flight, want %d", tc.workers, tc.budget, tc.share, got, tc.want)
		}
	}
}

// TestStoreBudgetBatches: a writer of 2 workers told the store takes 6 keeps 6 batches in
// flight alone and 3 once shared by 2 (so Run's pool is larger than Workers).
func TestStoreBudgetBatches(t *testing.T) {
	w, _, rec := fakeWriter(t, Options{MaxBatch: 10, MaxDelay: time.Hour, Workers: 2}, true)
	w.SetStoreBudget(6)
	wait := submitAsync(t, w, ids("p", 100)...)
	testctx.WaitFor(t, "6 batches sent", func() bool { return len(rec.sent()) >= 6 })
	if n := w.pendingLen(); n != 40 {
		t.Fatalf("%d items pending with 6 batches in flight, want 40 (no seventh batch cut)", n)
	}
	w.ShareInFlight(2)
	rec.release(0)
	rec.release(1)
	rec.release(2)
	rec.release(3)
	testctx.WaitFor(t, "a third batch in flight once shared by 2", func() bool { return len(rec.sent()) >= 7 })
	if n := w.pendingLen(); n != 30 {
		t.Fatalf("%d items pending with 2 left in flight and a share of 3, want 30 (one batch cut)", n)
	}
	rec.releaseAll()
	for i, r := range wait() {
		if r.Err != nil {
			t.Fatalf("item %d: %v", i, r.Err)
		}
	}
}

// TestShareInFlightBoundsBatches: a writer of 4 workers shared by 2 instances keeps 2 batches
// in flight (the third waits, uncut, until one finishes); alone again, it sends 4.
func TestShareInFlightBoundsBatches(t *testing.T) {
	w, _, rec := fakeWriter(t, Options{MaxBatch: 10, MaxDelay: time.Hour, Workers: 4}, true)
	w.ShareInFlight(2)
	wait := submitAsync(t, w, ids("p", 100)...)
	testctx.WaitFor(t, "2 batches sent", func() bool { return len(rec.sent()) >= 2 })
	if n := w.pendingLen(); n != 80 {
		t.Fatalf("%d items pending with 2 batches in flight, want 80 (no third batch cut)", n)
	}
	rec.release(0)
	testctx.WaitFor(t, "a third batch once one finished", func() bool { return len(rec.sent()) >= 3 })
	if n := w.pendingLen(); n != 70 {
		t.Fatalf("%d items pending after one batch finished, want 70 (2 in flight)", n)
	}
	w.ShareInFlight(1)
	testctx.WaitFor(t, "4 in flight once alone", func() bool { return len(rec.sent()) == 5 && w.pendingLen() == 50 })
	rec.releaseAll()
	for i, r := range wait() {
		if r.Err != nil {
			t.Fatalf("item %d: %v", i, r.Err)
		}
	}
}
