package bulk

import (
	"testing"
	"time"

	"github.com/gameops/rollup/internal/testctx"
)

func TestInFlightShared(t *testing.T) {
	for _, tc := range []struct{ workers, share, want int }{
		{2, 0, 2}, {2, 1, 2}, {2, 2, 1}, {2, 4, 1},
		{8, 1, 8}, {8, 2, 4}, {8, 3, 3}, {8, 4, 2}, {8, 16, 1}, {1, 3, 1},
	} {
		w := New(nil, Options{Workers: tc.workers}, nil)
		w.ShareInFlight(tc.share)
		if got := w.inFlight(); got != tc.want {
			t.Errorf("Workers %d shared by %d: %d in flight, want %d", tc.workers, tc.share, got, tc.want)
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
