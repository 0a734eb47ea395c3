package recompute

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
	"github.com/gameops/rollup/tree/treedb/treedbtest"
)

// batchTrees is a BatchTreeSource over treedbtest.Trees that counts its calls.
type batchTrees struct {
	*treedbtest.Trees
	single, batch atomic.Int64
}

func (b *batchTrees) TreeAt(ctx context.Context, project string, at time.Time) (*tree.Tree, int, error) {
	b.single.Add(1)
	return b.Trees.TreeAt(ctx, project, at)
}

func (b *batchTrees) TreesAt(ctx context.Context, at time.Time, projects []string) (map[string]treedb.TreeVersion, error) {
	b.batch.Add(1)
	out := map[string]treedb.TreeVersion{}
	for _, p := range projects {
		if tr, v, _ := b.Trees.TreeAt(ctx, p, at); tr != nil {
			out[p] = treedb.TreeVersion{Tree: tr, Version: v}
		}
	}
	return out, nil
}

// TestLeavesBatchTrees: a burst of several projects' leaves asks a BatchTreeSource for its
// trees once per tick, not once per project, and rolls every project up correctly; the
// leaves of a project without a tree are orphans. (Parents only: TestSummariesOfManyProjects
// has the summaries'.)
func TestLeavesBatchTrees(t *testing.T) {
	e := newEnv(t)
	t0 := baseTick()
	src := &batchTrees{Trees: e.trees}
	projects := []string{"pa", "pb", "pc"}
	var leaves []store.Leaf
	for i, p := range projects {
		nodes := []tree.Node{{ID: p, Type: tree.TypeProject}}
		for s := range 3 {
			sid := fmt.Sprintf("%s-s%d", p, s)
			nodes = append(nodes, tree.Node{ID: sid, Type: tree.TypeServer, Parent: p})
			for l := range 4 {
				nodes = append(nodes, tree.Node{ID: fmt.Sprintf("%s-p%d", sid, l), Type: tree.TypeProcess, Parent: sid})
			}
		}
		tr, _ := e.trees.Add(t, p, t0.Add(-time.Hour), nodes)
		for _, at := range []time.Time{t0, t0.Add(tick)} {
			e.fill(p, tr, at, int64(i+1), 10)
			for j, l := range tr.Leaves() {
				leaves = append(leaves, store.Leaf{Project: p, ID: l.ID, Type: l.Type, Tick: at, Online: int64(i+1)*1000 + int64(j), Version: 10})
			}
		}
	}
	leaves = append(leaves, store.Leaf{Project: "nobody", ID: "x", Type: tree.TypeProcess, Tick: t0, Online: 1, Version: 1})
	eng := New(e.db, src, Options{}, nil)
	if err := eng.Parents(e.ctx, leaves, NewDirty()); err != nil {
		t.Fatal(err)
	}
	if src.batch.Load() != 2 || src.single.Load() != 0 {
		t.Fatalf("trees asked %d times in batches and %d times one by one; want 2 batches (one per tick), none alone", src.batch.Load(), src.single.Load())
	}
	for _, p := range projects {
		if m := e.mismatch(p, t0, t0.Add(2*tick)); m != "" {
			t.Fatalf("%s: %s", p, m)
		}
	}
	if got := eng.Stats().Orphans; got != 1 {
		t.Fatalf("orphans = %d, want 1", got)
	}
}
