package bulk

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/internal/testctx"
)

// TestStoreDownGate: a batch that meets NotWritablePrimary on every update ends unavailable
// after the driver's one retry and a failed probe (no resend); from then on the writer knows
// the store is down: Submits, whatever their size, are refused after one probe without any
// batch reaching the store, the tracker and the stats say so, and the first Submit after the
// fault ends is written.
func TestStoreDownGate(t *testing.T) {
	e := newEnv(t)
	w := startWriter(t, e.coll, Options{Workers: 1})
	testctx.WaitFor(t, "the writer to be ready", func() bool { return w.Tracker().State().Ready }) // once Run started
	if st := w.Tracker().State(); st.Component != "bulk" {
		t.Fatalf("tracker of a running writer: %+v", st)
	}
	nwp := bson.D{{Key: "errorCode", Value: 10107}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}}
	e.failPoint(t, "alwaysOn", nwp)
	e.proxy.ResetStats()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	batch := func(prefix string, n int, version int64) []Item {
		out := make([]Item, n)
		for i := range out {
			out[i] = item(fmt.Sprintf("%s%05d", prefix, i), int64(i), version)
		}
		return out
	}
	if _, err := w.Submit(ctx, batch("a", 20, 1)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("first submit: %v, want ErrUnavailable", err)
	}
	if writes, probes := updateCounts(t, e.proxy); writes != 2 || probes < 1 {
		t.Fatalf("first submit: %d update commands and %d probes, want 2 (attempt, driver retry) and a probe", writes, probes)
	}
	st := w.Tracker().State()
	if st.Ready || st.Reason == "" {
		t.Fatalf("tracker during the outage: %+v", st)
	}
	if s := w.Stats(); !s.StoreDown || s.DownSince.IsZero() {
		t.Fatalf("stats during the outage: down %v since %v", s.StoreDown, s.DownSince)
	}
	if ra := w.RetryAfter(); ra < time.Second || ra > 1500*time.Millisecond {
		t.Fatalf("RetryAfter at the start of the outage = %v, want 1s–1.5s", ra)
	}

	for _, n := range []int{20, 3000, 10_000} {
		start := time.Now()
		res, err := w.Submit(ctx, batch("b", n, 2))
		var down *StoreDownError
		if !errors.As(err, &down) || !errors.Is(err, ErrUnavailable) || res != nil {
			t.Fatalf("%d items during the outage: %v (%d results), want a *StoreDownError", n, err, len(res))
		}
		t.Logf("%d items refused after %v: %v", n, time.Since(start), err)
	}
	if writes, _ := updateCounts(t, e.proxy); writes != 2 {
		t.Fatalf("%d batch updates reached the store, want only the first batch's 2", writes)
	}
	if s := w.Stats(); s.Refused != 13_020 || s.ProbesFailed < 4 {
		t.Fatalf("refused %d items after %d failed probes, want 13020 after at least 4", s.Refused, s.ProbesFailed)
	}

	e.failPoint(t, "off", nil)
	res := submit(t, w, batch("c", 20, 3))
	for i, r := range res {
		if r.Outcome != OutcomeApplied {
			t.Fatalf("after the outage: item %d %v (%v)", i, r.Outcome, r.Err)
		}
	}
	if st := w.Tracker().State(); !st.Ready {
		t.Fatalf("tracker after the outage: %+v", st)
	}
	if s := w.Stats(); s.StoreDown || s.ProbesOK < 1 || w.RetryAfter() != 0 {
		t.Fatalf("stats after the outage: down %v, %d probes ok, RetryAfter %v", s.StoreDown, s.ProbesOK, w.RetryAfter())
	}
}
