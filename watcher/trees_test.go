package watcher

import (
	"context"
	"testing"
	"time"

	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

var _ TreeStore = (*treedb.Store)(nil)

// countingStore counts the loads TreeCache asks of the store.
type countingStore struct {
	*treedb.Store
	loads int
}

func (c *countingStore) Load(ctx context.Context, project string, version int) (*tree.Tree, error) {
	c.loads++
	return c.Store.Load(ctx, project, version)
}

func TestTreeCache(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	store := &countingStore{Store: treedb.New(e.db)}
	cache := NewTreeCache(store)
	t0 := baseTick()

	if tr, v, err := cache.TreeAt(ctx, "p", t0); tr != nil || v != 0 || err != nil {
		t.Fatalf("no tree yet: %v %d %v", tr, v, err)
	}
	if _, err := store.Import(ctx, "p", tree.Generate("p", 1, 1, 2), t0.Add(-tick)); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Import(ctx, "p", tree.Generate("p", 1, 1, 3), t0.Add(2*tick)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		at       time.Time
		version  int
		leaves   int
		hasTree  bool
		maxLoads int
	}{
		{t0.Add(-2 * tick), 0, 0, false, 0},
		{t0.Add(-tick), 1, 2, true, 1},
		{t0, 1, 2, true, 1},
		{t0.Add(tick), 1, 2, true, 1}, // cached
		{t0.Add(2 * tick), 2, 3, true, 2},
		{t0.Add(9 * tick), 2, 3, true, 2},
	}
	for _, tc := range tests {
		tr, v, err := cache.TreeAt(ctx, "p", tc.at)
		if err != nil {
			t.Fatal(err)
		}
		if (tr != nil) != tc.hasTree || v != tc.version || (tr != nil && len(tr.Leaves()) != tc.leaves) {
			t.Fatalf("TreeAt(%s) = version %d, tree %v; want version %d with %d leaves", tc.at, v, tr != nil, tc.version, tc.leaves)
		}
		if store.loads > tc.maxLoads {
			t.Fatalf("TreeAt(%s): %d loads, want at most %d", tc.at, store.loads, tc.maxLoads)
		}
	}
	// An import is seen by the next call (no invalidation needed).
	if _, err := store.Import(ctx, "p", tree.Generate("p", 1, 1, 4), t0.Add(3*tick)); err != nil {
		t.Fatal(err)
	}
	if _, v, _ := cache.TreeAt(ctx, "p", t0.Add(9*tick)); v != 3 {
		t.Fatalf("after an import: version %d, want 3", v)
	}
}

// TestWatcherWithTreeDB runs the watcher over trees stored by tree/treedb.
func TestWatcherWithTreeDB(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const project = "proj"
	t0 := baseTick()
	nodes := tree.Generate(project, 2, 2, 3)
	if _, err := treedb.New(e.db).Import(ctx, project, nodes, t0.Add(-tick)); err != nil {
		t.Fatal(err)
	}
	e.trees.add(t, project, t0.Add(-tick), nodes) // the reference for the check
	r := e.start(New(e.db, NewTreeCache(treedb.New(e.db)), Options{}, nil))
	tr, _, _ := e.trees.TreeAt(ctx, project, t0)
	e.fill(project, tr, t0, 1, 1)
	e.fill(project, tr, t0.Add(-2*tick), 1, 1) // before the tree: orphans
	e.waitCorrect(project)
	waitFor(t, "orphans counted", func() bool { return r.w.Stats().Orphans == int64(len(tr.Leaves())) })
}
