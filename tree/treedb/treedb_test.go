package treedb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/goleak"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/tree"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func setup(t *testing.T) (context.Context, *mongo.Database, *embeddedtest.Store) {
	t.Helper()
	store := embeddedtest.Start(t)
	return testctx.Context(t), store.Database(t, store.Client(t)), store
}

var t0 = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

func TestImportLoadVersionAt(t *testing.T) {
	ctx, db, _ := setup(t)
	s := New(db)
	s.now = func() time.Time { return t0 }
	v1nodes := tree.Generate("demo", 2, 3, 2)
	v2nodes := append(tree.Generate("demo", 2, 3, 2), tree.Node{ID: "g03", Type: tree.TypeGroup, Parent: "demo"})
	e1, e2 := t0.Add(time.Hour), t0.Add(3*time.Hour)

	if v, err := s.Import(ctx, "demo", v1nodes, e1); err != nil || v != 1 {
		t.Fatalf("first import = %d, %v", v, err)
	}
	if v, err := s.Import(ctx, "demo", v2nodes, e2.In(time.FixedZone("X", 3600))); err != nil || v != 2 {
		t.Fatalf("second import = %d, %v", v, err)
	}
	if _, err := s.Import(ctx, "other", []tree.Node{{ID: "o-root", Type: "project"}}, e1); err != nil {
		t.Fatal(err)
	}

	vs, err := s.Versions(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	want := []Version{
		{Project: "demo", Version: 1, EffectiveFrom: e1, Nodes: 1 + 2 + 6 + 12, Leaves: 12, CreatedAt: t0},
		{Project: "demo", Version: 2, EffectiveFrom: e2, Nodes: 1 + 2 + 6 + 12 + 1, Leaves: 13, CreatedAt: t0},
	}
	if !slices.Equal(vs, want) {
		t.Fatalf("Versions = %+v\nwant %+v", vs, want)
	}
	if ps, err := s.Projects(ctx); err != nil || !slices.Equal(ps, []string{"demo", "other"}) {
		t.Fatalf("Projects = %v, %v", ps, err)
	}

	at := []struct {
		tick    time.Time
		version int
		eff     time.Time
	}{
		{t0, 0, time.Time{}},
		{e1.Add(-time.Nanosecond), 0, time.Time{}},
		{e1, 1, e1},
		{e1.Add(5 * time.Minute), 1, e1},
		{e2.Add(-5 * time.Minute), 1, e1},
		{e2, 2, e2},
		{e2.Add(24 * time.Hour), 2, e2},
	}
	for _, c := range at {
		v, eff, ok, err := s.VersionAt(ctx, "demo", c.tick)
		if err != nil || v != c.version || ok != (c.version != 0) || !eff.Equal(c.eff) {
			t.Errorf("VersionAt(%s) = %d %s %v %v, want %d %s", c.tick, v, eff, ok, err, c.version, c.eff)
		}
	}
	if _, _, ok, err := s.VersionAt(ctx, "nobody", e2); ok || err != nil {
		t.Fatalf("VersionAt(nobody) = %v, %v", ok, err)
	}

	// Load through a fresh store (no cache) returns the nodes as imported, in order.
	fresh := New(db)
	for v, nodes := range map[int][]tree.Node{1: v1nodes, 2: v2nodes} {
		tr, err := fresh.Load(ctx, "demo", v)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Project() != "demo" || !slices.Equal(tr.Nodes(), nodes) {
			t.Fatalf("Load(%d) = %v, want %v", v, tr.Nodes(), nodes)
		}
		cached, err := fresh.Load(ctx, "demo", v)
		if err != nil || cached != tr {
			t.Fatalf("second Load(%d) not served from the cache: %p %p %v", v, cached, tr, err)
		}
	}
	if _, err := fresh.Load(ctx, "demo", 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Load(3) = %v, want ErrNotFound", err)
	}

	// An equal effective time is allowed: it replaces version 2 from that tick on.
	if v, err := s.Import(ctx, "demo", v1nodes, e2); err != nil || v != 3 {
		t.Fatalf("third import = %d, %v", v, err)
	}
	if v, _, _, _ := s.VersionAt(ctx, "demo", e2); v != 3 {
		t.Fatalf("VersionAt(e2) after a tie = %d, want 3", v)
	}
}

func TestImportRejects(t *testing.T) {
	ctx, db, _ := setup(t)
	s := New(db)
	if _, err := s.Import(ctx, "a", []tree.Node{{ID: "a-root", Type: "project"}, {ID: "shared", Type: "group", Parent: "a-root"}}, t0); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		project string
		nodes   []tree.Node
		eff     time.Time
		want    string
	}{
		{"invalid tree", "b", []tree.Node{{ID: "x", Type: "t", Parent: "ghost"}}, t0, `missing parent`},
		{"unaligned", "b", []tree.Node{{ID: "b-root", Type: "t"}}, t0.Add(time.Minute), "not a tick start"},
		{"before latest", "a", []tree.Node{{ID: "a-root", Type: "project"}}, t0.Add(-5 * time.Minute), "trees change forward only"},
		{"foreign ids", "b", []tree.Node{{ID: "b-root", Type: "t"}, {ID: "shared", Type: "t", Parent: "b-root"}}, t0, `used by project "a"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Import(ctx, tc.project, tc.nodes, tc.eff)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	var ve *tree.ValidationError
	if _, err := s.Import(ctx, "b", nil, t0); !errors.As(err, &ve) {
		t.Fatalf("empty tree: %v, want *tree.ValidationError", err)
	}
	if ps, err := s.Projects(ctx); err != nil || !slices.Equal(ps, []string{"a"}) {
		t.Fatalf("Projects = %v, %v: a rejected import left a version", ps, err)
	}
	if n, err := db.Collection(NodesCollection).CountDocuments(ctx, bson.D{{Key: FieldProject, Value: "b"}}); err != nil || n != 0 {
		t.Fatalf("rejected imports wrote %d nodes (%v)", n, err)
	}
}

// TestImportCrashLeavesNoVersion makes the commit (the third insert: claim, nodes, trees) fail
// and checks that the written nodes are invisible, and that the next import works.
func TestImportCrashLeavesNoVersion(t *testing.T) {
	ctx, db, store := setup(t)
	store.SkipIfReal(t)
	client := db.Client()
	s := New(db)
	nodes := tree.Generate("demo", 2, 2, 2)
	store.FailPoint(t, client, bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "skip", Value: 2}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "errorCode", Value: 2}}},
	})
	if _, err := s.Import(ctx, "demo", nodes, t0); err == nil || !strings.Contains(err.Error(), "commit version 1") {
		t.Fatalf("import with a failing commit = %v", err)
	}
	failPointOff(t, db.Client())
	if n, err := db.Collection(NodesCollection).CountDocuments(ctx, bson.D{{Key: FieldProject, Value: "demo"}, {Key: FieldVersion, Value: 1}}); err != nil || n != int64(len(nodes)) {
		t.Fatalf("%d nodes written before the failed commit (%v), want %d (the test must fail the commit, not the nodes)", n, err, len(nodes))
	}
	assertNoVersion := func() {
		t.Helper()
		if vs, err := s.Versions(ctx, "demo"); err != nil || len(vs) != 0 {
			t.Fatalf("Versions = %v, %v", vs, err)
		}
		if _, _, ok, err := s.VersionAt(ctx, "demo", t0.Add(time.Hour)); ok || err != nil {
			t.Fatalf("VersionAt found a version (%v)", err)
		}
		if _, err := New(db).Load(ctx, "demo", 1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Load(1) = %v, want ErrNotFound", err)
		}
		if ps, err := s.Projects(ctx); err != nil || len(ps) != 0 {
			t.Fatalf("Projects = %v, %v", ps, err)
		}
	}
	assertNoVersion()

	// A crash between claim and nodes: claim version 2 by hand, write half the nodes.
	if v, err := s.claim(ctx, "demo", 1); err != nil || v != 2 {
		t.Fatalf("claim = %d, %v", v, err)
	}
	half, _ := tree.Build("demo", nodes[:3])
	if err := s.writeNodes(ctx, "demo", 2, half); err != nil {
		t.Fatal(err)
	}
	assertNoVersion()

	v, err := s.Import(ctx, "demo", nodes, t0)
	if err != nil || v != 3 {
		t.Fatalf("import after the crashes = %d, %v; want 3 (1 and 2 are taken by the crashed imports)", v, err)
	}
	tr, err := New(db).Load(ctx, "demo", 3)
	if err != nil || !slices.Equal(tr.Nodes(), nodes) {
		t.Fatalf("Load(3) = %v, %v", tr, err)
	}
}

// TestImportNodesFailureCleansUp makes the node insert fail: the claim and nodes are removed,
// so the version number is reused.
func TestImportNodesFailureCleansUp(t *testing.T) {
	ctx, db, store := setup(t)
	store.SkipIfReal(t)
	s := New(db)
	store.FailPoint(t, db.Client(), bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "skip", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"insert"}}, {Key: "errorCode", Value: 2}}},
	})
	nodes := tree.Generate("demo", 1, 1, 1)
	if _, err := s.Import(ctx, "demo", nodes, t0); err == nil || !strings.Contains(err.Error(), "write nodes") {
		t.Fatalf("import = %v", err)
	}
	failPointOff(t, db.Client())
	if n, err := db.Collection(NodesCollection).CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
		t.Fatalf("%d tree_nodes documents left (%v)", n, err)
	}
	if v, err := s.Import(ctx, "demo", nodes, t0); err != nil || v != 1 {
		t.Fatalf("retry = %d, %v", v, err)
	}
}

// failPointOff switches failCommand off (mode {skip: n} stays on after the skipped commands).
func failPointOff(t *testing.T, c *mongo.Client) {
	t.Helper()
	off := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}
	if err := c.Database("admin").RunCommand(context.Background(), off).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentImports(t *testing.T) {
	ctx, db, _ := setup(t)
	const n = 4
	var wg sync.WaitGroup
	got := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes := tree.Generate("demo", 1, 1, i+1) // each import its own size
			got[i], errs[i] = New(db).Import(ctx, "demo", nodes, t0)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("import %d: %v", i, err)
		}
	}
	if sorted := slices.Sorted(slices.Values(got)); !slices.Equal(sorted, []int{1, 2, 3, 4}) {
		t.Fatalf("versions = %v, want 1..4", got)
	}
	s := New(db)
	for i, v := range got {
		tr, err := s.Load(ctx, "demo", v)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Len() != 3+i+1 {
			t.Fatalf("version %d has %d nodes, import %d wrote %d", v, tr.Len(), i, 3+i+1)
		}
	}
}

func TestLoadDetectsMissingNodes(t *testing.T) {
	ctx, db, _ := setup(t)
	s := New(db)
	if _, err := s.Import(ctx, "demo", tree.Generate("demo", 1, 2, 0), t0); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection(NodesCollection).DeleteOne(ctx, bson.D{{Key: "_id", Value: "demo/1/g01-s0002"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(db).Load(ctx, "demo", 1); err == nil || !strings.Contains(err.Error(), "3 nodes stored") {
		t.Fatalf("Load = %v", err)
	}
}

// TestCacheBounded: the cache keeps at most its budget of nodes, dropping the oldest trees
// first, and a tree larger than the budget alone.
func TestCacheBounded(t *testing.T) {
	s := New(nil)
	s.budget = 10
	two := func(i int) *tree.Tree { // a tree of 2 nodes
		tr, err := tree.Build("p", []tree.Node{{ID: fmt.Sprint("r", i), Type: "t"}, {ID: fmt.Sprint("l", i), Type: "t", Parent: fmt.Sprint("r", i)}})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	for i := range 8 {
		s.put(cacheKey{"p", i}, two(i))
		if s.cached > s.budget || s.cached != 2*len(s.cache) {
			t.Fatalf("after %d puts: %d nodes cached in %d trees, budget %d", i+1, s.cached, len(s.cache), s.budget)
		}
	}
	if len(s.cache) != 5 || s.get(cacheKey{"p", 2}) != nil || s.get(cacheKey{"p", 3}) == nil || s.get(cacheKey{"p", 7}) == nil {
		t.Fatalf("cache holds %d trees, want the newest 5", len(s.cache))
	}
	nodes := []tree.Node{{ID: "big", Type: "t"}}
	for i := range 11 {
		nodes = append(nodes, tree.Node{ID: fmt.Sprint("b", i), Type: "t", Parent: "big"})
	}
	big, err := tree.Build("p", nodes)
	if err != nil {
		t.Fatal(err)
	}
	s.put(cacheKey{"p", 100}, big)
	if len(s.cache) != 1 || s.get(cacheKey{"p", 100}) != big {
		t.Fatalf("after a tree over the budget the cache holds %d trees", len(s.cache))
	}
}

// importTies imports root-only trees: project a at e1 and twice at e2 (a tie of effective
// times), b at e2 and c at e1, with e1 and e2 one and three hours after t0.
func importTies(t *testing.T) (context.Context, *mongo.Database, *Store, time.Time, time.Time) {
	t.Helper()
	ctx, db, _ := setup(t)
	s := New(db)
	e1, e2 := t0.Add(time.Hour), t0.Add(3*time.Hour)
	imports := []struct {
		project string
		eff     time.Time
	}{{"a", e1}, {"a", e2}, {"a", e2}, {"b", e2}, {"c", e1}}
	for _, im := range imports {
		if _, err := s.Import(ctx, im.project, []tree.Node{{ID: im.project + "-root", Type: "project"}}, im.eff); err != nil {
			t.Fatal(err)
		}
	}
	return ctx, db, s, e1, e2
}

// TestVersionsAt checks VersionsAt against VersionAt, the one-project rule, for several
// projects and ticks (ties included), and that projects without a version are absent.
func TestVersionsAt(t *testing.T) {
	ctx, _, s, e1, e2 := importTies(t)
	projects := []string{"a", "b", "c", "nobody"}
	for _, tick := range []time.Time{t0, e1, e1.Add(5 * time.Minute), e2, e2.Add(time.Hour)} {
		got, err := s.VersionsAt(ctx, projects, tick)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range projects {
			v, eff, ok, err := s.VersionAt(ctx, p, tick)
			if err != nil {
				t.Fatal(err)
			}
			g, gok := got[p]
			if gok != ok || ok && (g.Version != v || !g.EffectiveFrom.Equal(eff) || g.Project != p || g.Leaves != 1) {
				t.Errorf("VersionsAt(%s)[%s] = %+v %v, VersionAt = %d %s %v", tick.Format(time.RFC3339), p, g, gok, v, eff, ok)
			}
		}
		if len(got) > 3 {
			t.Errorf("VersionsAt(%s) = %v: more projects than have trees", tick, got)
		}
	}
	if got, err := s.VersionsAt(ctx, nil, e2); err != nil || len(got) != 0 {
		t.Fatalf("VersionsAt(no projects) = %v, %v", got, err)
	}
	if got, _ := s.VersionsAt(ctx, []string{"a"}, e2); got["a"].Version != 3 {
		t.Fatalf("VersionsAt at a tie = %+v, want version 3", got["a"])
	}
}

// TestTreesAt checks Cache.TreesAt against TreeAt, per project and tick (ties of effective
// times included), over a Store (one VersionsAt query) and over a Versions that cannot batch
// (TreeAt per project): the same trees, the same versions, and no project without one.
func TestTreesAt(t *testing.T) {
	ctx, db, _, e1, e2 := importTies(t)
	projects := []string{"a", "b", "c", "nobody"}
	for name, cache := range map[string]*Cache{"store": NewCache(New(db)), "no batch": NewCache(struct{ Versions }{New(db)})} {
		for _, tick := range []time.Time{t0, e1, e1.Add(5 * time.Minute), e2, e2.Add(time.Hour)} {
			got, err := cache.TreesAt(ctx, tick, projects)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range projects {
				tr, v, err := cache.TreeAt(ctx, p, tick)
				if err != nil {
					t.Fatal(err)
				}
				g, ok := got[p]
				if ok != (tr != nil) || g.Tree != tr || g.Version != v {
					t.Errorf("%s: TreesAt(%s)[%s] = %+v %v, TreeAt = version %d %v", name, tick.Format(time.RFC3339), p, g, ok, v, tr != nil)
				}
			}
		}
	}
}
