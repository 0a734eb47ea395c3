package recompute

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

func TestReplay(t *testing.T) {
	e := newEnv(t)
	const project = "proj"
	t0 := baseTick()
	tr, tv := e.trees.Add(t, project, t0.Add(-24*time.Hour), tree.Generate(project, 2, 2, 3))
	ticks := []time.Time{t0.Add(-2 * tick), t0.Add(-tick), t0}
	for i, at := range ticks {
		e.fill(project, tr, at, int64(i+1), 1) // no watcher: no parents yet
	}
	// A wrong stored server document: a stale total and a child that has no leaf document.
	server := tr.Levels()[1][0]
	kids := tr.Children(server.ID)
	bad := rollup.Parent{
		ID: server.ID, Type: server.Type, Project: project, Timestamp: t0, Online: 999, Rev: 5, Reported: 1, Expected: 3,
		TreeVersion: tv, Children: map[string]rollup.ChildState{"ghost": {Type: tree.TypeProcess, Online: 999, Version: 1, Reported: 1, Expected: 1}},
	}
	e.storeParent(bad)
	// A leaf deleted behind the rollups' back (a cleanup): replay drops it from its parent.
	if _, err := e.counts.DeleteOne(context.Background(), bson.D{
		{Key: store.FieldID, Value: kids[0].ID}, {Key: store.FieldTimestamp, Value: t0},
	}); err != nil {
		t.Fatal(err)
	}

	var progress []ReplayProgress
	st, err := Replay(context.Background(), e.db, e.trees, project, ticks[0], t0.Add(tick), ReplayOptions{
		Progress: func(p ReplayProgress) { progress = append(progress, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if msg := e.mismatch(project, ticks[0], t0.Add(tick)); msg != "" {
		t.Fatal(msg)
	}
	leaves := int64(len(tr.Leaves()))
	if st.Ticks != 3 || st.Leaves != 3*leaves-1 || !st.LastTick.Equal(t0) || st.ParentWrites != 3*(1+2+4) {
		t.Fatalf("stats = %+v", st)
	}
	if len(progress) != 3 || progress[2].Done != 3 || progress[2].Total != 3 || !progress[0].Tick.Equal(ticks[0]) {
		t.Fatalf("progress = %+v", progress)
	}
	p, _ := e.parentDoc(server.ID, server.Type, t0)
	if _, ghost := p.Children["ghost"]; ghost || p.Rev != 6 || p.Reported != int64(len(kids)-1) {
		t.Fatalf("rebuilt server = %+v", p)
	}

	t.Run("idempotent", func(t *testing.T) {
		st, err := Replay(context.Background(), e.db, e.trees, project, ticks[0], t0.Add(tick), ReplayOptions{})
		if err != nil || st.ParentWrites != 0 || st.Ticks != 3 {
			t.Fatalf("second replay: %+v, %v", st, err)
		}
	})
	t.Run("resume after the last tick", func(t *testing.T) {
		st, err := Replay(context.Background(), e.db, e.trees, project, t0.Add(tick), t0.Add(10*tick), ReplayOptions{})
		if err != nil || st.Ticks != 0 {
			t.Fatalf("replay after the window: %+v, %v", st, err)
		}
	})
}
