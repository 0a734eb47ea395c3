package migrations

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// TestTreeNodesIDIndex: on a database migrated by a release with steps 1 to 9 and holding
// trees, Up applies step 10 alone and builds treedb.NodesIDIndex (step 4 does not claim it);
// imports keep their rule. Dropped or redefined, the index is drift of step 10, which Up
// repairs; a second Up does nothing.
func TestTreeNodesIDIndex(t *testing.T) {
	ctx := testCtx(t)
	db := newDB(t)
	old := newTestMigrator(t, db)
	old.steps = Steps()[:9]
	if _, err := old.Up(ctx, UpOptions{}); err != nil {
		t.Fatal(err)
	}
	trees := treedb.New(db)
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	if _, err := trees.Import(ctx, "a", tree.Generate("a", 1, 2, 2), t0); err != nil {
		t.Fatal(err)
	}
	// tree.Generate's ids but the root's are the same in every project.
	if _, err := trees.Import(ctx, "b", tree.Generate("b", 1, 2, 2), t0); err == nil || !strings.Contains(err.Error(), `used by project "a"`) {
		t.Fatalf("b reusing a's ids without the index: %v", err)
	}
	nodes := db.Collection(treedb.NodesCollection)
	if _, ok := indexSpecs(ctx, t, nodes)[treedb.NodesIDIndex]; ok {
		t.Fatalf("steps 1 to 9 built %s", treedb.NodesIDIndex)
	}

	m := newTestMigrator(t, db)
	m.steps = Steps()[:10] // step 10 alone on top of 1 to 9
	if n, err := m.Pending(ctx); err != nil || n != 1 {
		t.Fatalf("Pending = %d, %v; want step 10", n, err)
	}
	if d, err := m.Drift(ctx); err != nil || len(d) != 0 {
		t.Fatalf("Drift before step 10 = %v, %v: a step not applied yet has no drift", d, err)
	}
	r, err := m.Up(ctx, UpOptions{})
	if err != nil || len(r.Applied) != 1 || r.Applied[0].Version != 10 || len(r.Repaired) != 0 {
		t.Fatalf("Up = %+v, %v; want step 10 applied alone", r, err)
	}
	want := mustIndex(treedb.NodesCollection, treedb.NodesIDIndex)
	if spec, ok := indexSpecs(ctx, t, nodes)[treedb.NodesIDIndex]; !ok || !want.Matches(spec) {
		t.Fatalf("tree_nodes indexes after step 10: %v", indexSpecs(ctx, t, nodes))
	}
	for _, s := range Steps() {
		if has := slices.Contains(s.Indexes, treedb.NodesCollection+"."+treedb.NodesIDIndex); has != (s.Version == 10) {
			t.Errorf("step %d lists %s: %v", s.Version, treedb.NodesIDIndex, has)
		}
	}
	if _, err := trees.Import(ctx, "b", tree.Generate("b", 1, 2, 2), t0); err == nil || !strings.Contains(err.Error(), `used by project "a"`) {
		t.Fatalf("b reusing a's ids with the index: %v", err)
	}
	if _, err := trees.Import(ctx, "a", tree.Generate("a", 1, 3, 2), t0); err != nil {
		t.Fatalf("a's own ids with the index: %v", err)
	}

	m.steps = Steps() // the later steps too, so that the Catalog's drift check below is about step 10 alone
	if _, err := m.Up(ctx, UpOptions{}); err != nil {
		t.Fatal(err)
	}

	// Drift: dropped, then redefined on {id: 1}; each time Up repairs it with step 10.
	for _, redefine := range []bool{false, true} {
		if err := nodes.Indexes().DropOne(ctx, treedb.NodesIDIndex); err != nil {
			t.Fatal(err)
		}
		if redefine {
			if _, err := nodes.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: treedb.FieldID, Value: 1}},
				Options: options.Index().SetName(treedb.NodesIDIndex)}); err != nil {
				t.Fatal(err)
			}
		}
		d, err := m.Drift(ctx)
		if err != nil || len(d) != 1 || d[0].Version != 10 || d[0].Drift.Missing == redefine ||
			!strings.Contains(d[0].String(), "index "+treedb.NodesIDIndex+" on tree_nodes") ||
			!strings.Contains(d[0].String(), "step 10 built it") {
			t.Fatalf("redefined %v: Drift = %v, %v", redefine, d, err)
		}
		r, err := m.Up(ctx, UpOptions{})
		if err != nil || len(r.Applied) != 0 || len(r.Repaired) != 1 || r.Repaired[0].Step.Version != 10 || (len(r.Dropped) == 1) != redefine {
			t.Fatalf("redefined %v: Up = %+v, %v", redefine, r, err)
		}
		if d, err := store.CheckIndexes(ctx, db, Catalog()); err != nil || len(d) != 0 {
			t.Fatalf("redefined %v: drift after the repair: %v, %v", redefine, d, err)
		}
	}
	if again, err := m.Up(ctx, UpOptions{}); err != nil || !again.UpToDate() {
		t.Fatalf("second Up = %+v, %v", again, err)
	}
}
