package treedb

import (
	"context"
	"testing"
	"time"

	"github.com/gameops/rollup/tree"
)

// countingStore counts the loads a Cache asks of the store.
type countingStore struct {
	*Store
	loads int
}

func (c *countingStore) Load(ctx context.Context, project string, version int) (*tree.Tree, error) {
	c.loads++
	return c.Store.Load(ctx, project, version)
}

func TestCache(t *testing.T) {
	ctx, db, _ := setup(t)
	store := &countingStore{Store: New(db)}
	cache := NewCache(store)
	const tick = tree.DefaultTick

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
