package watcher

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

func TestBasic(t *testing.T) {
	e := newEnv(t)
	const project = "proj"
	t0 := baseTick()
	nodes := tree.Generate(project, 2, 3, 4) // 2 groups, 6 servers, 24 processes
	e.trees.Add(t, project, t0.Add(-24*time.Hour), nodes)
	tr, _, _ := e.trees.TreeAt(context.Background(), project, t0)
	leaves := tr.Leaves()

	r := e.start(e.newWatcher(Options{CheckpointInterval: time.Millisecond}))
	var items []bulk.Item
	for i, l := range leaves {
		items = append(items, item(project, l.ID, l.Type, t0, int64(i+1), 100))
	}
	e.submit(items...)
	e.waitCorrect(project)
	root, ok := e.parentDoc(project, tree.TypeProject, t0)
	if want := int64(len(leaves) * (len(leaves) + 1) / 2); !ok || root.Online != want || root.Reported != int64(len(leaves)) || root.Expected != int64(len(leaves)) {
		t.Fatalf("root = %+v, want online %d reported/expected %d", root, want, len(leaves))
	}

	t.Run("late leaf for an old tick", func(t *testing.T) {
		old := t0.Add(-3 * tick)
		e.submit(item(project, leaves[0].ID, leaves[0].Type, old, 7, 50))
		e.waitCorrect(project)
		if p, ok := e.parentDoc(project, tree.TypeProject, old); !ok || p.Online != 7 || p.Reported != 1 {
			t.Fatalf("old root = %+v (found %v), want online 7 reported 1", p, ok)
		}
	})

	t.Run("newer version replaces, duplicate and older are ignored", func(t *testing.T) {
		l := leaves[1]
		e.submit(item(project, l.ID, l.Type, t0, 1000, 200))
		e.waitCorrect(project)
		before, _ := e.parentDoc(project, tree.TypeProject, t0)
		e.submit(item(project, l.ID, l.Type, t0, 1000, 200)) // duplicate: stale, no write
		e.submit(item(project, l.ID, l.Type, t0, 5, 150))    // older: stale, no write
		// Bypass the bulk writer's guard: the watcher must still ignore the older version.
		events := r.w.Stats().Events
		ctx := context.Background()
		_, err := e.counts.UpdateOne(ctx, bson.D{
			{Key: store.FieldID, Value: l.ID}, {Key: store.FieldType, Value: l.Type}, {Key: store.FieldTimestamp, Value: t0},
		}, bson.D{{Key: "$set", Value: bson.D{{Key: store.FieldOnline, Value: int64(5)}, {Key: store.FieldVersion, Value: int64(150)}}}})
		if err != nil {
			t.Fatal(err)
		}
		testctx.WaitFor(t, "the older version's event", func() bool { return r.w.Stats().Events > events })
		after, _ := e.parentDoc(project, tree.TypeProject, t0)
		if after.Online != before.Online || after.Rev != before.Rev {
			t.Fatalf("root changed by an older version: %+v → %+v", before, after)
		}
		server, _ := tr.Parent(l.ID)
		sp, _ := e.parentDoc(server.ID, server.Type, t0)
		if c := sp.Children[l.ID]; c.Version != 200 || c.Online != 1000 {
			t.Fatalf("child state = %+v, want version 200 online 1000", c)
		}
		// Restore the leaf to its newest value so the invariant check below holds.
		e.submit(item(project, l.ID, l.Type, t0, 1000, 300))
		e.waitCorrect(project)
	})

	t.Run("orphan kept, excluded and counted", func(t *testing.T) {
		orphans := r.w.Stats().Orphans
		e.submit(item(project, "not-in-tree", tree.TypeProcess, t0, 99, 1))
		testctx.WaitFor(t, "the orphan counted", func() bool { return r.w.Stats().Orphans > orphans })
		e.waitCorrect(project)
		n, err := e.counts.CountDocuments(context.Background(), bson.D{{Key: store.FieldID, Value: "not-in-tree"}})
		if err != nil || n != 1 {
			t.Fatalf("orphan leaf count = %d, %v; want kept", n, err)
		}
	})

	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := r.w.Stats()
	if st.Events == 0 || st.Batches == 0 || st.ParentWrites == 0 || st.LastEventTime.IsZero() {
		t.Fatalf("stats = %+v", st)
	}
	// Graceful shutdown saved the last safe token.
	cp, ok, err := newCheckpoints(e.db, DefaultName).load(context.Background())
	if err != nil || !ok || cp.ClusterTime.T == 0 {
		t.Fatalf("checkpoint = %+v %v %v", cp, ok, err)
	}
}
