package recompute

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// expire does what retention does to project's leaves before h: advance the horizon, then
// delete them.
func (e *env) expire(project string, h time.Time) {
	e.t.Helper()
	if err := store.NewHorizons(e.db).Advance(e.ctx, project, store.TierLeaves, h); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.counts.DeleteMany(e.ctx, bson.D{{Key: "project", Value: project}, {Key: "timestamp", Value: bson.D{{Key: "$lt", Value: h}}},
		{Key: "rollup", Value: bson.D{{Key: "$ne", Value: true}}}}); err != nil {
		e.t.Fatal(err)
	}
}

// parents returns every parent document of project, raw, by key.
func (e *env) parents(project string) map[store.Key]string {
	e.t.Helper()
	cur, err := e.counts.Find(e.ctx, bson.D{{Key: "project", Value: project}, {Key: "rollup", Value: true}})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[store.Key]string{}
	for cur.Next(e.ctx) {
		k, _ := store.KeyOf(cur.Current)
		out[k] = cur.Current.String()
	}
	if err := cur.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// TestReplayRefusesPastTheHorizon: a replay (or its dry run) of a window that starts before
// the leaves' horizon fails with a *HorizonError naming the tier, its sources and the horizon,
// and writes nothing; from the horizon on it works. Without the horizon the same replay
// would overwrite the stored totals with totals computed from nothing — the pitfall.
func TestReplayRefusesPastTheHorizon(t *testing.T) {
	e := newEnv(t)
	const project = "proj"
	t0 := baseTick()
	tr, _ := e.trees.Add(t, project, t0.Add(-24*time.Hour), tree.Generate(project, 2, 2, 3))
	ticks := []time.Time{t0.Add(-3 * tick), t0.Add(-2 * tick), t0.Add(-tick), t0}
	for i, at := range ticks {
		e.fill(project, tr, at, int64(i+1), 1)
	}
	end := t0.Add(tick)
	if _, err := Replay(e.ctx, e.db, e.trees, project, ticks[0], end, ReplayOptions{}); err != nil {
		t.Fatal(err)
	}
	e.expire(project, ticks[2])
	before := e.parents(project)

	_, err := Replay(e.ctx, e.db, e.trees, project, ticks[0], end, ReplayOptions{})
	var he *HorizonError
	if !errors.As(err, &he) || he.Tier != store.Tier5m || he.Source != store.TierLeaves || !he.Horizon.Equal(ticks[2]) {
		t.Fatalf("replay past the horizon: %v", err)
	}
	for _, want := range []string{"5m tier", "from the leaves", ticks[2].Format(time.RFC3339), "nothing was written",
		"rollup replay --project proj --from " + ticks[2].Format(time.RFC3339)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if _, err := Plan(e.ctx, e.db, e.trees, project, ticks[1], end, func(rollup.Change) error { return nil }); !errors.As(err, &he) {
		t.Errorf("dry run past the horizon: %v", err)
	}
	if after := e.parents(project); len(after) != len(before) {
		t.Fatalf("parents changed: %d, were %d", len(after), len(before))
	} else {
		for k, doc := range before {
			if after[k] != doc {
				t.Fatalf("parent %v rewritten by a refused replay", k)
			}
		}
	}
	// A window entirely before the horizon says so.
	if _, err := Replay(e.ctx, e.db, e.trees, project, ticks[0], ticks[1], ReplayOptions{}); err == nil || !strings.Contains(err.Error(), "whole window is before the horizon") {
		t.Errorf("window before the horizon: %v", err)
	}
	// From the horizon on, replay works.
	if st, err := Replay(e.ctx, e.db, e.trees, project, ticks[2], end, ReplayOptions{}); err != nil || st.Ticks != 2 {
		t.Fatalf("replay from the horizon: %+v, %v", st, err)
	}

	// The pitfall the refusal prevents: with the horizon gone, the replay "rebuilds" the
	// expired ticks from no leaves and writes zero totals over the real ones.
	if _, err := e.db.Collection(store.HorizonsCollection).DeleteMany(e.ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Replay(e.ctx, e.db, e.trees, project, ticks[0], end, ReplayOptions{}); err != nil {
		t.Fatal(err)
	}
	root, _ := e.parentDoc(tr.Root().ID, tr.Root().Type, ticks[0])
	if root.Online != 0 || root.Reported != 0 {
		t.Fatalf("without the horizon the replay kept the root (%d online): the pitfall is not shown", root.Online)
	}
}

// TestReplayStopsWhereRetentionArrives: retention advances the horizon while a replay runs;
// the replay notices it after reading the next tick's leaves and stops there with a
// *HorizonError, leaving that tick as it was.
func TestReplayStopsWhereRetentionArrives(t *testing.T) {
	e := newEnv(t)
	const project = "proj"
	t0 := baseTick()
	tr, tv := e.trees.Add(t, project, t0.Add(-24*time.Hour), tree.Generate(project, 1, 2, 2))
	ticks := []time.Time{t0.Add(-2 * tick), t0.Add(-tick), t0}
	for i, at := range ticks {
		e.fill(project, tr, at, int64(i+1), 1)
	}
	// A stale root at the second tick: a replay that reached it would fix it.
	stale := rollup.Parent{ID: tr.Root().ID, Type: tr.Root().Type, Project: project, Timestamp: ticks[1], Online: 7, Rev: 1, Reported: 1,
		Expected: int64(len(tr.Leaves())), TreeVersion: tv}
	e.storeParent(stale)
	_, err := Replay(e.ctx, e.db, e.trees, project, ticks[0], t0.Add(tick), ReplayOptions{
		Progress: func(p ReplayProgress) {
			if p.Done == 1 { // retention moves past the next tick (before deleting its leaves)
				if err := store.NewHorizons(e.db).Advance(context.Background(), project, store.TierLeaves, ticks[2]); err != nil {
					t.Error(err)
				}
			}
		},
	})
	var he *HorizonError
	if !errors.As(err, &he) || !he.From.Equal(ticks[1]) {
		t.Fatalf("replay overtaken by retention: %v", err)
	}
	if root, _ := e.parentDoc(stale.ID, stale.Type, ticks[1]); root.Online != 7 || root.Rev != 1 {
		t.Fatalf("the tick retention reached was rewritten: %+v", root)
	}
}

// TestVerifyKnowsTheHorizons: ticks whose leaves expired are checked without them (no
// "recompute" or "missing" violations for the leaves that are gone, but a wrong sum is
// still found and said to be beyond repair), ticks before the 5-minute horizon are not
// checked, and the report names the horizons and what was checked.
func TestVerifyKnowsTheHorizons(t *testing.T) {
	e := newEnv(t)
	const project = "proj"
	t0 := baseTick()
	tr, _ := e.trees.Add(t, project, t0.Add(-24*time.Hour), tree.Generate(project, 2, 2, 3))
	var ticks []time.Time
	for i := range 6 {
		at := t0.Add(time.Duration(i-5) * tick)
		ticks = append(ticks, at)
		e.fill(project, tr, at, int64(i+1), 1)
	}
	from, to := ticks[0], t0.Add(tick)
	if _, err := Replay(e.ctx, e.db, e.trees, project, from, to, ReplayOptions{}); err != nil {
		t.Fatal(err)
	}
	// Retention: 5m parents before ticks[1] (partly deleted), leaves before ticks[3].
	if err := store.NewHorizons(e.db).Advance(e.ctx, project, store.Tier5m, ticks[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.counts.DeleteOne(e.ctx, bson.D{{Key: "project", Value: project}, {Key: "timestamp", Value: ticks[0]}, {Key: "rollup", Value: true}}); err != nil {
		t.Fatal(err)
	}
	e.expire(project, ticks[3])
	r, err := Verify(e.ctx, e.db, e.trees, project, from, to, VerifyOptions{Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || r.Ticks != 5 || r.LeavesExpired != 2 || r.PastHorizon != 1 {
		t.Fatalf("report %+v", r)
	}
	var b strings.Builder
	if err := r.Format(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"retention horizons", "leaves " + ticks[3].Format(time.RFC3339), "5m " + ticks[1].Format(time.RFC3339),
		"1h none", "3 ticks checked against their leaves", "2 ticks before the leaves' horizon checked without them",
		"1 ticks before the 5m horizon not checked", "no violations"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}

	// A wrong sum in the expired ticks is still a violation, beyond replay's reach; one after
	// the horizon is repaired by a replay from the horizon.
	for _, at := range []time.Time{ticks[1], ticks[4]} {
		root, _ := e.parentDoc(tr.Root().ID, tr.Root().Type, at)
		root.Online += 5
		e.storeParent(root)
	}
	if r, err = Verify(e.ctx, e.db, e.trees, project, from, to, VerifyOptions{Max: 10}); err != nil {
		t.Fatal(err)
	}
	if r.ByKind[rollup.KindSum] != 2 || r.Expired != 1 {
		t.Fatalf("report %+v", r)
	}
	reps := r.Repairs()
	if len(reps) != 2 || !strings.Contains(reps[0].Command, "--from "+ticks[3].Format(time.RFC3339)) || !strings.HasPrefix(reps[1].Command, "none for the 1 violations") {
		t.Fatalf("repairs %+v", reps)
	}
}
