package api_test

import (
	"fmt"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/recompute"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// TestOrphansAgree stores, beside a tick's tree leaves, three leaf documents counted nowhere:
// an unknown id, a tree leaf's id under another type (written before ingest refused it, #28)
// and an interior node's id under the leaves' type. The read API's tree, verify and replay
// must all name the same three orphans.
func TestOrphansAgree(t *testing.T) {
	s := newReadStack(t, zaptest.NewLogger(t))
	const project = "proj-m"
	w := newWorld(project)
	w.importTree(t, s, tree.Generate(project, 1, 1, 2), rt0)
	tk := rt0.Add(10 * rtick)
	for i, l := range w.at(tk).tree.Leaves() {
		w.set(tk, l.ID, int64(5+i))
	}
	w.write(t, s)
	strays := []apiv1.Orphan{
		{ID: "g01-s0001", Type: tree.TypeProcess, Online: 4},
		{ID: "g01-s0001-p01", Type: tree.TypeServer, Online: 3},
		{ID: "zz-ghost", Type: tree.TypeProcess, Online: 2},
	}
	for _, o := range strays {
		if _, err := s.db.Collection(store.CountsCollection).UpdateOne(s.ctx,
			bson.D{{Key: "id", Value: o.ID}, {Key: "type", Value: o.Type}, {Key: "timestamp", Value: tk}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "project", Value: project}, {Key: "online", Value: o.Online},
				{Key: "version", Value: int64(1)}, {Key: "submission_id", Value: "old"}, {Key: "written_at", Value: tk}}}},
			options.UpdateOne().SetUpsert(true)); err != nil {
			t.Fatal(err)
		}
	}
	key := func(id, typ string) string { return fmt.Sprintf("%s/%s", id, typ) }
	want := make([]string, 0, len(strays))
	for _, o := range strays {
		want = append(want, key(o.ID, o.Type))
	}

	var tr apiv1.TreeResponse
	s.getOK(t, s.token(t, project, true), apiv1.ProjectsPath+"/"+project+apiv1.TreePath, tickValues(tk), &tr)
	if !slices.Equal(tr.Orphans, strays) {
		t.Errorf("tree API orphans = %+v, want %+v", tr.Orphans, strays)
	}

	cache := treedb.NewCache(s.trees)
	rep, err := recompute.Verify(s.ctx, s.db, cache, project, tk, tk.Add(rtick), recompute.VerifyOptions{Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, 0, len(rep.OrphanLeaves))
	for _, o := range rep.OrphanLeaves {
		got = append(got, key(o.ID, o.Type))
	}
	if rep.Orphans != len(strays) || !slices.Equal(got, want) {
		t.Errorf("verify: %d orphans %v, want %v", rep.Orphans, got, want)
	}

	st, err := recompute.Replay(s.ctx, s.db, cache, project, tk, tk.Add(rtick), recompute.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Orphans != int64(len(strays)) {
		t.Errorf("replay: %d orphans, want %d", st.Orphans, len(strays))
	}
}
