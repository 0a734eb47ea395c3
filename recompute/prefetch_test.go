package recompute

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// TestParentsReadOnce: a burst over a tree of three parent levels (project, groups, servers)
// reads the stored parents with one find, not one per level, and rolls up right, both when
// no parent exists yet and when every one does. Each level's writes wait for the store, behind
// the leaf batches of every serve instance on a busy one (issue 25), so a find per level was a
// wait per level; a parent changed by another writer between the find and its write fails the
// write's guard and is re-read (TestTermRefusesWrites, the watcher's randomized tests).
func TestParentsReadOnce(t *testing.T) {
	e := newEnv(t)
	t0 := baseTick()
	var finds atomic.Int64
	mon := &event.CommandMonitor{Started: func(_ context.Context, ev *event.CommandStartedEvent) {
		if ev.CommandName == "find" {
			if c, ok := ev.Command.Lookup("find").StringValueOK(); ok && c == store.CountsCollection {
				finds.Add(1)
			}
		}
	}}
	db := e.store.Client(t, options.Client().SetMonitor(mon)).Database(e.db.Name())
	nodes := []tree.Node{{ID: "p", Type: tree.TypeProject}}
	for g := range 2 {
		gid := fmt.Sprintf("g%d", g)
		nodes = append(nodes, tree.Node{ID: gid, Type: tree.TypeGroup, Parent: "p"})
		for s := range 2 {
			sid := fmt.Sprintf("%s-s%d", gid, s)
			nodes = append(nodes, tree.Node{ID: sid, Type: tree.TypeServer, Parent: gid})
			for l := range 3 {
				nodes = append(nodes, tree.Node{ID: fmt.Sprintf("%s-p%d", sid, l), Type: tree.TypeProcess, Parent: sid})
			}
		}
	}
	tr, _ := e.trees.Add(t, "p", t0.Add(-time.Hour), nodes)
	eng := New(db, e.trees, Options{}, nil)
	for v := int64(1); v <= 2; v++ {
		e.fill("p", tr, t0, v, v)
		var leaves []store.Leaf
		for i, l := range tr.Leaves() {
			leaves = append(leaves, store.Leaf{Project: "p", ID: l.ID, Type: l.Type, Tick: t0, Online: v*1000 + int64(i), Version: v})
		}
		before := finds.Load()
		if err := eng.Parents(e.ctx, leaves, NewDirty()); err != nil {
			t.Fatal(err)
		}
		if n := finds.Load() - before; n != 1 {
			t.Errorf("burst %d: %d finds of the parents for 3 levels, want 1", v, n)
		}
		if m := e.mismatch("p", t0, t0.Add(tick)); m != "" {
			t.Fatalf("burst %d: %s", v, m)
		}
	}
}
