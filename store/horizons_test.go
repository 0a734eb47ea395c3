package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/store"
)

// TestHorizons: horizons start absent, only move forward per tier, are kept per project, and
// a concurrent race of advances leaves the greatest.
func TestHorizons(t *testing.T) {
	srv := embeddedtest.Start(t)
	db := srv.Database(t, srv.Client(t))
	ctx := testctx.Context(t)
	h := store.NewHorizons(db)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

	if got, err := h.Get(ctx, "p"); err != nil || got != (store.Horizon{}) {
		t.Fatalf("fresh horizon %+v, %v", got, err)
	}
	steps := []struct {
		tier store.Tier
		to   time.Time
		want store.Horizon
	}{
		{store.TierLeaves, t0, store.Horizon{Leaves: t0}},
		{store.Tier5m, t0.Add(-time.Hour), store.Horizon{Leaves: t0, FiveMin: t0.Add(-time.Hour)}},
		{store.TierLeaves, t0.Add(-time.Minute), store.Horizon{Leaves: t0, FiveMin: t0.Add(-time.Hour)}}, // never back
		{store.TierLeaves, t0.Add(5 * time.Minute), store.Horizon{Leaves: t0.Add(5 * time.Minute), FiveMin: t0.Add(-time.Hour)}},
		{store.Tier1h, t0.Add(-24 * time.Hour), store.Horizon{Leaves: t0.Add(5 * time.Minute), FiveMin: t0.Add(-time.Hour), Hour: t0.Add(-24 * time.Hour)}},
		{store.Tier1d, t0.Add(-48 * time.Hour), store.Horizon{Leaves: t0.Add(5 * time.Minute), FiveMin: t0.Add(-time.Hour), Hour: t0.Add(-24 * time.Hour), Day: t0.Add(-48 * time.Hour)}},
		{store.Tier1d, time.Time{}, store.Horizon{Leaves: t0.Add(5 * time.Minute), FiveMin: t0.Add(-time.Hour), Hour: t0.Add(-24 * time.Hour), Day: t0.Add(-48 * time.Hour)}},
	}
	for i, s := range steps {
		if err := h.Advance(ctx, "p", s.tier, s.to); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got, err := h.Get(ctx, "p")
		if err != nil || got != s.want {
			t.Fatalf("step %d: advance %s to %s: got %+v, %v; want %+v", i, s.tier, s.to, got, err, s.want)
		}
		for _, tier := range store.Tiers() {
			if got.Of(tier) != s.want.Of(tier) {
				t.Errorf("step %d: Of(%s) = %s", i, tier, got.Of(tier))
			}
		}
	}
	if err := h.Advance(ctx, "p", store.Tier("2h"), t0); err == nil {
		t.Error("an unknown tier was accepted")
	}

	// Racing advances of another project: the greatest wins, and nothing fails.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			if err := h.Advance(ctx, "q", store.TierLeaves, t0.Add(time.Duration(i)*time.Minute)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("racing advance: %v", err)
	}
	all, err := h.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all["q"] != (store.Horizon{Leaves: t0.Add(15 * time.Minute)}) || all["p"] != steps[len(steps)-1].want {
		t.Fatalf("all horizons %+v", all)
	}

	// A tier's field that is not a date makes the document invalid, not a zero horizon.
	if _, err := db.Collection(store.HorizonsCollection).InsertOne(ctx, bson.D{{Key: "_id", Value: "bad"}, {Key: "5m", Value: "yesterday"}}); err != nil {
		t.Fatal(err)
	}
	var ie *store.InvalidDocError
	if _, err := h.Get(ctx, "bad"); !errors.As(err, &ie) || ie.Field != "5m" {
		t.Fatalf("invalid horizon: %v", err)
	}
}
