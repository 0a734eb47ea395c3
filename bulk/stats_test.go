package bulk

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/internal/hist"
	"github.com/gameops/rollup/store"
)

// TestStats drives a writer through the store (and fail points) and checks its counters.
func TestStats(t *testing.T) {
	wce := bson.D{{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}, {Key: "errmsg", Value: "waiting for replication timed out"}}}}
	nwp := bson.D{{Key: "errorCode", Value: 10107}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}}
	cases := []struct {
		name     string
		seed     []Item
		failMode any
		failData bson.D
		items    []Item
		want     Stats // BatchOps: only Count and Sum are compared
	}{
		{
			name:  "all applied",
			items: []Item{item("a", 1, 1), item("b", 2, 1), item("c", 3, 1)},
			want: Stats{Batches: 1, Items: map[Outcome]int64{OutcomeApplied: 3},
				BatchOps: batchOps(1, 3)},
		},
		{
			name:  "a stale item is resolved by reading its document, not re-issued",
			seed:  []Item{item("b", 9, 5)},
			items: []Item{item("a", 1, 1), item("b", 2, 1), item("c", 3, 1)},
			want: Stats{Batches: 1, Items: map[Outcome]int64{OutcomeApplied: 2, OutcomeStale: 1},
				BatchOps: batchOps(1, 3), Conflicts: 1},
		},
		{
			name:  "a duplicate key in the batch is one op",
			items: []Item{item("a", 1, 1), item("a", 2, 2)},
			want: Stats{Batches: 1, Items: map[Outcome]int64{OutcomeApplied: 1, OutcomeStale: 1},
				BatchOps: batchOps(1, 1)},
		},
		{
			name:     "writeConcernError once: one retry of class write_concern",
			failMode: bson.D{{Key: "times", Value: 1}}, failData: wce,
			items: []Item{item("a", 1, 1), item("b", 2, 1)},
			want: Stats{Batches: 1, Items: map[Outcome]int64{OutcomeStale: 2},
				BatchOps: batchOps(1, 2), Conflicts: 2, Retries: map[store.Class]int64{store.ClassWriteConcern: 1}},
		},
		{
			name:     "NotWritablePrimary always: a failed probe, no resend, a failure of class unknown_outcome",
			failMode: "alwaysOn", failData: nwp,
			items: []Item{item("a", 1, 1), item("b", 2, 1)},
			want: Stats{Batches: 1, Items: map[Outcome]int64{OutcomeUnknown: 2},
				BatchOps: batchOps(1, 2), Failures: map[store.Class]int64{store.ClassUnknownOutcome: 1}, StoreDown: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if len(tc.seed) > 0 {
				e.seed(t, tc.seed...)
			}
			if tc.failMode != nil {
				e.failPoint(t, tc.failMode, tc.failData)
			}
			w := startWriter(t, e.coll, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := w.Submit(ctx, tc.items)
			if err != nil && !errors.Is(err, ErrUnavailable) {
				t.Fatalf("submit: %v", err)
			}
			got := w.Stats()
			if got.Batches != tc.want.Batches || got.Reissued != tc.want.Reissued || got.Conflicts != tc.want.Conflicts {
				t.Errorf("batches %d reissued %d conflicts %d, want %d %d %d", got.Batches, got.Reissued, got.Conflicts,
					tc.want.Batches, tc.want.Reissued, tc.want.Conflicts)
			}
			for o := OutcomeUnknown; o <= OutcomeRejected; o++ {
				if got.Items[o] != tc.want.Items[o] {
					t.Errorf("items %s = %d, want %d", o, got.Items[o], tc.want.Items[o])
				}
			}
			if len(got.Items) != numOutcomes {
				t.Errorf("items has %d keys, want every outcome", len(got.Items))
			}
			if got.BatchOps.Count != tc.want.BatchOps.Count || got.BatchOps.Sum != tc.want.BatchOps.Sum {
				t.Errorf("batch ops count %d sum %v, want %d %v", got.BatchOps.Count, got.BatchOps.Sum, tc.want.BatchOps.Count, tc.want.BatchOps.Sum)
			}
			if got.StoreDown != tc.want.StoreDown || got.StoreDown == got.DownSince.IsZero() {
				t.Errorf("store down %v since %v, want down %v", got.StoreDown, got.DownSince, tc.want.StoreDown)
			}
			if tc.want.StoreDown && got.ProbesFailed == 0 {
				t.Errorf("no failed probe counted while the store is down")
			}
			if !maps.Equal(got.Retries, nonNil(tc.want.Retries)) || !maps.Equal(got.Failures, nonNil(tc.want.Failures)) {
				t.Errorf("retries %v failures %v, want %v %v", got.Retries, got.Failures, tc.want.Retries, tc.want.Failures)
			}
		})
	}
}

func batchOps(count uint64, sum float64) (s hist.Snapshot) {
	s.Count, s.Sum = count, sum
	return s
}

func nonNil(m map[store.Class]int64) map[store.Class]int64 {
	if m == nil {
		return map[store.Class]int64{}
	}
	return m
}

func TestClassIndex(t *testing.T) {
	for _, tc := range []struct {
		in   store.Class
		want int
	}{{store.ClassNone, 0}, {store.ClassContext, int(store.ClassContext)}, {store.Class(-1), int(store.ClassUnknownOutcome)}, {store.Class(99), int(store.ClassUnknownOutcome)}} {
		if got := classIndex(tc.in); got != tc.want {
			t.Errorf("classIndex(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
