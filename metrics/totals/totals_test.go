package totals_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gameops/rollup/metrics/totals"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// naive is a node's numbers computed from the leaves reported under it.
func naive(tr *tree.Tree, reported map[string]int64, id string) totals.Counts {
	var c totals.Counts
	var walk func(string)
	walk = func(id string) {
		if tr.IsLeaf(id) {
			c.Expected++
			if v, ok := reported[id]; ok {
				c.Online += v
				c.Reported++
			}
			return
		}
		for _, ch := range tr.Children(id) {
			walk(ch.ID)
		}
	}
	walk(id)
	return c
}

// naiveProject is the Project a Reader must export for tr with reported at the tick.
func naiveProject(tr *tree.Tree, reported map[string]int64, groups bool) totals.Project {
	root := tr.Root().ID
	p := totals.Project{Name: tr.Project(), Counts: naive(tr, reported, root)}
	if groups {
		p.Groups = []totals.Group{}
		for _, ch := range tr.Children(root) {
			p.Groups = append(p.Groups, totals.Group{ID: ch.ID, Counts: naive(tr, reported, ch.ID)})
		}
		slices.SortFunc(p.Groups, func(a, b totals.Group) int {
			if a.ID < b.ID {
				return -1
			}
			return 1
		})
	}
	return p
}

func leafCounts(tr *tree.Tree, value func(i int) (int64, bool)) map[string]int64 {
	out := map[string]int64{}
	for i, l := range tr.Leaves() {
		if v, ok := value(i); ok {
			out[l.ID] = v
		}
	}
	return out
}

func refresh(t *testing.T, p *pipeline, opts totals.Options) totals.Snapshot {
	t.Helper()
	r := totals.New(p.db, opts, zaptest.NewLogger(t))
	if err := r.Refresh(p.ctx); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	return r.Snapshot()
}

// TestSnapshotScenario writes counts through the bulk writer and the watcher and checks the
// numbers of the last complete tick: a complete project, one with missing leaves (and a group
// none of whose leaves reported), one whose tick has no leaf at all, one whose tree starts
// later, and a tree that is its root alone.
func TestSnapshotScenario(t *testing.T) {
	p := newPipeline(t)
	eff := t0.Add(-time.Hour)
	alpha := p.importTree(t, "alpha", prefixed("alpha", 2, 2, 3), eff)
	beta := p.importTree(t, "beta", prefixed("beta", 3, 2, 2), eff)
	gamma := p.importTree(t, "gamma", prefixed("gamma", 1, 1, 2), eff)
	delta := p.importTree(t, "delta", prefixed("delta", 1, 1, 1), t0.Add(tick))
	solo := p.importTree(t, "solo", []tree.Node{{ID: "solo", Type: tree.TypeProject}}, eff)

	before := t0.Add(-tick)
	after := t0.Add(tick)
	reports := map[time.Time]map[*tree.Tree]map[string]int64{
		before: {
			alpha: leafCounts(alpha, func(i int) (int64, bool) { return int64(100 + i), true }),
			gamma: leafCounts(gamma, func(i int) (int64, bool) { return 7, true }),
			solo:  {"solo": 40},
		},
		t0: {
			alpha: leafCounts(alpha, func(i int) (int64, bool) { return int64(i + 1), true }),
			// beta: g01 has 3 of its 4 leaves, g02 all 4, g03 none.
			beta: leafCounts(beta, func(i int) (int64, bool) { return int64(10 * (i + 1)), i != 1 && i < 8 }),
			solo: {"solo": 42},
		},
		after: { // not complete yet at nowAt(t0)
			alpha: leafCounts(alpha, func(i int) (int64, bool) { return 1000, true }),
			beta:  leafCounts(beta, func(i int) (int64, bool) { return 1000, true }),
			gamma: leafCounts(gamma, func(i int) (int64, bool) { return 1000, true }),
			delta: leafCounts(delta, func(i int) (int64, bool) { return 1000, true }),
		},
	}
	for at, byTree := range reports {
		for tr, counts := range byTree {
			p.report(t, tr.Project(), at, counts, tr, 1)
		}
	}

	s := refresh(t, p, totals.Options{GroupProjects: []string{"beta"}, Now: func() time.Time { return nowAt(t0) }})
	want := []totals.Project{
		naiveProject(alpha, reports[t0][alpha], false),
		naiveProject(beta, reports[t0][beta], true),
		naiveProject(gamma, nil, false),
		naiveProject(solo, reports[t0][solo], false),
	}
	if !s.Tick.Equal(t0) || s.Stale || s.Refreshes != 1 || s.Failures != 0 || s.LastError != "" || s.Invalid != 0 {
		t.Errorf("snapshot tick %s stale %v refreshes %d failures %d error %q invalid %d", s.Tick, s.Stale, s.Refreshes, s.Failures, s.LastError, s.Invalid)
	}
	if !reflect.DeepEqual(s.Projects, want) {
		t.Fatalf("projects:\n got %+v\nwant %+v", s.Projects, want)
	}
	// The naive numbers are what this test means, spelled out.
	b := s.Projects[1]
	if b.Online != 10+30+40+50+60+70+80 || b.Reported != 7 || b.Expected != 12 || b.Completeness() != 7.0/12 {
		t.Errorf("beta = %+v, completeness %v", b.Counts, b.Completeness())
	}
	if g := b.Groups[2]; g.ID != "beta-g03" || g.Online != 0 || g.Reported != 0 || g.Expected != 4 {
		t.Errorf("beta's silent group = %+v", g)
	}
	if g := s.Projects[2]; g.Online != 0 || g.Reported != 0 || g.Expected != 2 || g.Completeness() != 0 {
		t.Errorf("gamma (no leaf at the tick) = %+v", g)
	}
	if so := s.Projects[3]; so.Online != 42 || so.Reported != 1 || so.Expected != 1 {
		t.Errorf("solo = %+v", so)
	}

	// The grace period decides which tick is complete.
	grace := 2 * time.Minute
	for _, c := range []struct {
		now  time.Time
		tick time.Time
	}{
		{t0.Add(tick + grace), t0},
		{t0.Add(tick + grace - time.Second), before},
		{t0.Add(2*tick + grace - time.Nanosecond), t0},
	} {
		s := refresh(t, p, totals.Options{Now: func() time.Time { return c.now }})
		if !s.Tick.Equal(c.tick) {
			t.Errorf("at %s: tick %s, want %s", c.now.Format(time.TimeOnly), s.Tick.Format(time.TimeOnly), c.tick.Format(time.TimeOnly))
		}
	}
	s = refresh(t, p, totals.Options{Now: func() time.Time { return nowAt(before) }})
	if got, want := s.Projects[0].Counts, naive(alpha, reports[before][alpha], "alpha"); got != want {
		t.Errorf("alpha at the tick before = %+v, want %+v", got, want)
	}
}

// TestSnapshotRandom cross-checks the numbers of random trees with random missing leaves
// against the naive sums, every group exported.
func TestSnapshotRandom(t *testing.T) {
	p := newPipeline(t)
	rng := rand.New(rand.NewPCG(16, 3))
	var trees []*tree.Tree
	reported := map[*tree.Tree]map[string]int64{}
	for i := range 4 {
		name := fmt.Sprintf("r%d", i)
		tr := p.importTree(t, name, prefixed(name, 1+rng.IntN(4), 1+rng.IntN(3), 1+rng.IntN(4)), t0.Add(-time.Hour))
		share := rng.Float64()
		reported[tr] = leafCounts(tr, func(int) (int64, bool) { return rng.Int64N(500), rng.Float64() < share })
		// Noise at the neighbouring ticks, which must not leak into t0's numbers.
		for _, at := range []time.Time{t0.Add(-tick), t0.Add(tick)} {
			p.report(t, name, at, leafCounts(tr, func(int) (int64, bool) { return rng.Int64N(500), rng.IntN(2) == 0 }), tr, 1)
		}
		// A first value, then a newer one for some leaves: the last observation counts.
		first := leafCounts(tr, func(int) (int64, bool) { return rng.Int64N(500), true })
		for id := range first {
			if _, ok := reported[tr][id]; !ok {
				delete(first, id)
			}
		}
		p.report(t, name, t0, first, tr, 1)
		p.report(t, name, t0, reported[tr], tr, 2)
		trees = append(trees, tr)
	}
	s := refresh(t, p, totals.Options{GroupProjects: []string{totals.AllProjects}, Now: func() time.Time { return nowAt(t0) }})
	var want []totals.Project
	for _, tr := range trees {
		want = append(want, naiveProject(tr, reported[tr], true))
	}
	if !reflect.DeepEqual(s.Projects, want) {
		t.Fatalf("projects:\n got %+v\nwant %+v", s.Projects, want)
	}
}

// TestSnapshotCaps: past MaxProjects the last projects by name are left out, past MaxGroups
// the last groups by id, and both are counted.
func TestSnapshotCaps(t *testing.T) {
	p := newPipeline(t)
	var names []string
	for i := range 5 {
		name := fmt.Sprintf("cap%d", i)
		names = append(names, name)
		p.importTree(t, name, prefixed(name, 4, 1, 1), t0.Add(-time.Hour))
	}
	s := refresh(t, p, totals.Options{MaxProjects: 3, MaxGroups: 2, GroupProjects: []string{"cap0", "cap2", "cap4"},
		Now: func() time.Time { return nowAt(t0) }})
	var got []string
	for _, pr := range s.Projects {
		got = append(got, pr.Name)
		wantGroups := 0
		if pr.Name == "cap0" || pr.Name == "cap2" {
			wantGroups = 2
		}
		if len(pr.Groups) != wantGroups {
			t.Errorf("%s: %d groups, want %d", pr.Name, len(pr.Groups), wantGroups)
		}
		for i, g := range pr.Groups {
			if want := fmt.Sprintf("%s-g%02d", pr.Name, i+1); g.ID != want || g.Expected != 1 {
				t.Errorf("%s group %d = %+v, want %s", pr.Name, i, g, want)
			}
		}
	}
	if !slices.Equal(got, names[:3]) || s.DroppedProjects != 2 || s.DroppedGroups != 4 {
		t.Fatalf("projects %v dropped %d projects and %d groups, want %v, 2 and 4", got, s.DroppedProjects, s.DroppedGroups, names[:3])
	}
}

// TestSnapshotInvalidRoot: a root document the decoder refuses leaves its project out (and
// counted), never the others, and is logged once, not at every refresh.
func TestSnapshotInvalidRoot(t *testing.T) {
	p := newPipeline(t)
	good := p.importTree(t, "good", prefixed("good", 1, 1, 2), t0.Add(-time.Hour))
	p.importTree(t, "broken", prefixed("broken", 1, 1, 2), t0.Add(-time.Hour))
	p.report(t, "good", t0, leafCounts(good, func(i int) (int64, bool) { return 3, true }), good, 1)
	// A document at the root's key that is no parent document (online is a string).
	if _, err := p.db.Collection(store.CountsCollection).InsertOne(p.ctx, bson.D{
		{Key: store.FieldID, Value: "broken"}, {Key: store.FieldType, Value: tree.TypeProject},
		{Key: store.FieldTimestamp, Value: t0}, {Key: store.FieldProject, Value: "broken"},
		{Key: store.FieldOnline, Value: "many"}, {Key: store.FieldRollup, Value: true},
	}); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	r := totals.New(p.db, totals.Options{Now: func() time.Time { return nowAt(t0) }}, zap.New(core))
	for range 2 {
		if err := r.Refresh(p.ctx); err != nil {
			t.Fatal(err)
		}
	}
	s := r.Snapshot()
	if s.Invalid != 1 || len(s.Projects) != 1 || s.Projects[0].Name != "good" || s.Projects[0].Online != 6 || s.Stale {
		t.Fatalf("snapshot = %+v", s)
	}
	if n := logs.FilterMessage("root document not exported").Len(); n != 1 {
		t.Errorf("logged the invalid root %d times in two refreshes, want once", n)
	}
}

// TestSharedTrees: a Reader given Options.Trees loads its trees through that Store (serve's,
// which the API and the watcher already loaded every tree into), not from the store again:
// with tree_nodes emptied after the import, it still exports the project, and a Reader with a
// Store of its own cannot.
func TestSharedTrees(t *testing.T) {
	p := newPipeline(t)
	tr := p.importTree(t, "shared", prefixed("shared", 2, 2, 2), t0.Add(-time.Hour))
	reported := leafCounts(tr, func(i int) (int64, bool) { return int64(i + 1), true })
	p.report(t, "shared", t0, reported, tr, 1)
	if _, err := p.db.Collection(treedb.NodesCollection).DeleteMany(p.ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return nowAt(t0) }
	s := refresh(t, p, totals.Options{Now: now, Trees: p.trees})
	if want := naiveProject(tr, reported, false); len(s.Projects) != 1 || !reflect.DeepEqual(s.Projects[0], want) {
		t.Fatalf("with the shared Store: %+v, want %+v", s.Projects, want)
	}
	own := totals.New(p.db, totals.Options{Now: now}, zaptest.NewLogger(t))
	if err := own.Refresh(p.ctx); err == nil && len(own.Snapshot().Projects) == 1 {
		t.Fatal("a Reader with its own Store exported the project without its nodes: the test proves nothing")
	}
}
