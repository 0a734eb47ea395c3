package watcher

import (
	"context"
	"testing"

	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

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
	e.trees.Add(t, project, t0.Add(-tick), nodes) // the reference for the check
	r := e.start(New(e.db, treedb.NewCache(treedb.New(e.db)), Options{}, nil))
	tr, _, _ := e.trees.TreeAt(ctx, project, t0)
	e.fill(project, tr, t0, 1, 1)
	e.fill(project, tr, t0.Add(-2*tick), 1, 1) // before the tree: orphans
	e.waitCorrect(project)
	testctx.WaitFor(t, "orphans counted", func() bool { return r.w.Stats().Orphans == int64(len(tr.Leaves())) })
}
