package retention_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/retention"
	"github.com/gameops/rollup/store"
)

// TestPassDeletesWhatThePolicyNoLongerKeeps: a pass deletes, tier by tier, exactly the
// documents before each tier's horizon (now − period, aligned to the tier's bucket) and
// advances the stored horizons there; a project keeping everything forever, and one whose
// override does not read, are left alone. A second pass an hour later deletes only what
// expired meanwhile. Checked against the seeded documents.
func TestPassDeletesWhatThePolicyNoLongerKeeps(t *testing.T) {
	t.Parallel() // its own store and clock: nothing shared
	e := newEnv(t)
	from := t0.Add(-7 * day)
	for _, p := range []string{"a", "forever", "broken"} {
		// Leaves and parents over the last day (their periods are 6 and 12 hours), summaries
		// over the week (theirs are 3 and 5 days).
		e.seed(t, p, from, t0, shape{leaves: 3, parents: 2, countsFrom: t0.Add(-day)})
	}
	overrides := retention.NewStore(e.db)
	if err := overrides.Save(e.ctx, retention.DefaultScope, short(), t0); err != nil {
		t.Fatal(err)
	}
	keepAll := retention.Override{store.TierLeaves: retention.Forever, store.Tier5m: retention.Forever, store.Tier1h: retention.Forever, store.Tier1d: retention.Forever}
	if err := overrides.Save(e.ctx, "forever", keepAll, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Collection(retention.Collection).InsertOne(e.ctx, bson.D{{Key: "_id", Value: "broken"}, {Key: "leaves", Value: "a fortnight"}}); err != nil {
		t.Fatal(err)
	}
	seeded := map[string]map[store.Tier][]time.Time{}
	for _, p := range []string{"a", "forever", "broken"} {
		seeded[p] = e.stored(t, p)
	}

	now := t0
	core, logs := observer.New(zap.InfoLevel)
	enf := retention.New(e.db, retention.Options{Limits: limits, Now: func() time.Time { return now }, Rate: retention.Unlimited, Batch: 250}, zap.New(core))
	for pass, at := range []time.Time{t0, t0.Add(time.Hour + 2*time.Minute)} {
		now = at
		before := e.stored(t, "a")
		rep, err := enf.Pass(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Projects != 2 || rep.Invalid != 1 || len(rep.Blocked) != 0 {
			t.Errorf("pass %d: %+v", pass, rep)
		}
		got := e.stored(t, "a")
		hz, err := store.NewHorizons(e.db).Get(e.ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		pol := retention.Policy{}
		for tier, p := range short() {
			pol = pol.With(tier, p)
		}
		for _, tier := range store.Tiers() {
			h := retention.Horizon(tier, pol.Of(tier), now)
			want := keptFrom(seeded["a"][tier], h)
			if !slices.Equal(got[tier], want) {
				t.Errorf("pass %d, tier %s: %d documents left, want the %d from %s", pass, tier, len(got[tier]), len(want), h)
			}
			if !hz.Of(tier).Equal(h) {
				t.Errorf("pass %d, tier %s: horizon %s, want %s", pass, tier, hz.Of(tier), h)
			}
			if n := int64(len(before[tier]) - len(want)); rep.Deleted[tier] != n {
				t.Errorf("pass %d, tier %s: reported %d deleted, want %d", pass, tier, rep.Deleted[tier], n)
			}
		}
		for _, p := range []string{"forever", "broken"} {
			if got := e.stored(t, p); fmt.Sprint(got) != fmt.Sprint(seeded[p]) {
				t.Errorf("pass %d: project %s lost documents", pass, p)
			}
		}
	}
	st := enf.Stats()
	if st.Passes != 2 || st.InvalidPolicies != 1 || st.Tiers[store.TierLeaves].Projects != 1 || st.Tiers[store.Tier5m].Lag != 0 ||
		!st.Tiers[store.TierLeaves].Horizon.Equal(retention.Horizon(store.TierLeaves, retention.Period(6*time.Hour), now)) {
		t.Errorf("stats %+v", st)
	}
	if n := logs.FilterMessage("retention leaves a project alone: its policy is refused").Len(); n != 1 {
		t.Errorf("the refused policy was logged %d times, want once", n)
	}
}

// TestPassHeldBackUntilSummariesExist: 5-minute parents are not deleted from the first hour
// that has no hourly summary on, nor hourly summaries from the first day without a daily one
// (history from before the summaries existed); the horizon stops there, the pass says so,
// and once the summary is built the next pass goes on.
func TestPassHeldBackUntilSummariesExist(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	from := t0.Add(-6 * day)
	missingHour := from.Add(30 * time.Hour)
	missingDay := from.Add(2 * day) // no hourly summary at its first hour either
	e.seed(t, "a", from, t0, shape{leaves: 1, parents: 2}, missingHour, missingDay)
	if err := retention.NewStore(e.db).Save(e.ctx, retention.DefaultScope, short(), t0); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	enf := retention.New(e.db, retention.Options{Limits: limits, Now: func() time.Time { return t0 }, Rate: retention.Unlimited}, zap.New(core))
	rep, err := enf.Pass(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a/5m", "a/1h"}; !slices.Equal(rep.Blocked, want) {
		t.Errorf("blocked %v, want %v", rep.Blocked, want)
	}
	got := e.stored(t, "a")
	hz, _ := store.NewHorizons(e.db).Get(e.ctx, "a")
	if got[store.Tier5m][0] != missingHour || !hz.FiveMin.Equal(missingHour) {
		t.Errorf("5m: oldest kept %s, horizon %s; want both at the hour without a summary, %s", got[store.Tier5m][0], hz.FiveMin, missingHour)
	}
	if got[store.Tier1h][0] != missingDay.Add(time.Hour) || !hz.Hour.Equal(missingDay) {
		// The day without a daily summary starts with the skipped hour (no hourly summary at
		// missingDay either); its other hours are kept.
		t.Errorf("1h: oldest kept %s, horizon %s; want the day without a summary, %s", got[store.Tier1h][0], hz.Hour, missingDay)
	}
	if st := enf.Stats().Tiers; st[store.Tier5m].Blocked != 1 || st[store.Tier1h].Blocked != 1 || st[store.Tier5m].Lag <= 0 {
		t.Errorf("stats %+v", st)
	}
	if logs.FilterMessageSnippet("retention held back").Len() != 2 {
		t.Errorf("held back logs: %v", logs.All())
	}

	// The summaries are built (as 'rollup replay' would): the next pass goes on.
	for _, doc := range []struct {
		coll string
		at   time.Time
	}{{store.HourlyCollection, missingHour}, {store.HourlyCollection, missingDay}, {store.DailyCollection, missingDay}} {
		if _, err := e.db.Collection(doc.coll).InsertOne(e.ctx, summary("a", "a-p0", doc.at)); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err = enf.Pass(e.ctx); err != nil || len(rep.Blocked) != 0 {
		t.Fatalf("second pass: %+v, %v", rep, err)
	}
	got = e.stored(t, "a")
	if h := retention.Horizon(store.Tier5m, retention.Period(12*time.Hour), t0); !got[store.Tier5m][0].Equal(h) {
		t.Errorf("5m after the summary: oldest %s, want %s", got[store.Tier5m][0], h)
	}
	if st := enf.Stats().Tiers; st[store.Tier5m].Blocked != 0 || st[store.Tier1h].Blocked != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestHorizonAdvancedBeforeDeleting: when the first delete fails, the horizon is already
// stored and nothing was deleted; a fresh enforcer (a restart, which knows nothing of what
// was deleted) finishes the job.
func TestHorizonAdvancedBeforeDeleting(t *testing.T) {
	embeddedtest.ParallelWithFailPoints(t)
	e := newEnv(t)
	e.seed(t, "a", t0.Add(-2*day), t0, shape{leaves: 2, parents: 1})
	if err := retention.NewStore(e.db).Save(e.ctx, retention.DefaultScope, short(), t0); err != nil {
		t.Fatal(err)
	}
	e.store.FailPoint(t, e.c, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"delete"}}, {Key: "errorCode", Value: 2}}}})
	before := e.stored(t, "a")
	opts := retention.Options{Limits: limits, Now: func() time.Time { return t0 }, Rate: retention.Unlimited}
	if _, err := retention.New(e.db, opts, zaptest.NewLogger(t)).Pass(e.ctx); err == nil {
		t.Fatal("the pass succeeded through a failed delete")
	}
	hz, err := store.NewHorizons(e.db).Get(e.ctx, "a")
	if err != nil || hz.Leaves.IsZero() {
		t.Fatalf("horizon after the failed delete: %+v, %v", hz, err)
	}
	if got := e.stored(t, "a"); len(got[store.TierLeaves]) != len(before[store.TierLeaves]) {
		t.Fatalf("leaves deleted before the failure: %d of %d left", len(got[store.TierLeaves]), len(before[store.TierLeaves]))
	}
	if _, err := retention.New(e.db, opts, zaptest.NewLogger(t)).Pass(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.stored(t, "a"); !got[store.TierLeaves][0].Equal(hz.Leaves) {
		t.Fatalf("after the restart: oldest leaf %s, want %s", got[store.TierLeaves][0], hz.Leaves)
	}
}

// TestPassInvalidHorizonDocument: a horizons document that does not read fails the pass with
// an error naming it (retried by Run), and deletes nothing.
func TestPassInvalidHorizonDocument(t *testing.T) {
	e := newEnv(t)
	e.seed(t, "a", t0.Add(-day), t0, shape{leaves: 1, parents: 1})
	if _, err := e.db.Collection(store.HorizonsCollection).InsertOne(e.ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "leaves", Value: int64(3)}}); err != nil {
		t.Fatal(err)
	}
	_, err := retention.New(e.db, retention.Options{Limits: limits}, zaptest.NewLogger(t)).Pass(e.ctx)
	var ie *store.InvalidDocError
	if !errors.As(err, &ie) || ie.Field != "leaves" {
		t.Fatalf("pass: %v", err)
	}
}
