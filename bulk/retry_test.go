package bulk

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/migrations"
)

// TestDuplicateKeyRetriesExactlyFailedOps seeds leaves with higher and with lower versions,
// submits one batch and checks outcomes, stored values, and that the second update command
// carried exactly the ops that failed with E11000.
func TestDuplicateKeyRetriesExactlyFailedOps(t *testing.T) {
	e := newEnv(t)
	var seeds, batch []Item
	var wantStale []string
	want := map[string]int64{}
	for i := range 30 {
		id := fmt.Sprintf("n%02d", i)
		it := item(id, int64(i+1), 100)
		batch = append(batch, it)
		switch i % 3 {
		case 0: // newer version stored: stale, keeps the stored value
			seeds = append(seeds, item(id, 1000+int64(i), 200))
			wantStale = append(wantStale, id)
			want[id] = 1000 + int64(i)
		case 1: // older version stored: applied
			seeds = append(seeds, item(id, 1000+int64(i), 50))
			want[id] = int64(i + 1)
		default: // new key
			want[id] = int64(i + 1)
		}
	}
	e.seed(t, seeds...)
	w := startWriter(t, e.coll, Options{Workers: 1})
	e.proxy.ResetStats()

	res := submit(t, w, batch)
	var gotStale []string
	for i, r := range res {
		switch r.Outcome {
		case OutcomeStale:
			gotStale = append(gotStale, batch[i].ID)
		case OutcomeApplied:
		default:
			t.Fatalf("item %d: %v %v", i, r.Outcome, r.Err)
		}
	}
	if !slices.Equal(gotStale, wantStale) {
		t.Fatalf("stale items %v, want %v", gotStale, wantStale)
	}
	for _, d := range e.leaves(t) {
		if d.Online != want[d.ID] {
			t.Errorf("%s: online %d, want %d", d.ID, d.Online, want[d.ID])
		}
	}
	cmds := updateFilters(t, e.proxy)
	if len(cmds) != 2 {
		t.Fatalf("%d update commands, want 2 (batch + retry of the failed ops): %v", len(cmds), cmds)
	}
	if len(cmds[0]) != len(batch) {
		t.Fatalf("first command carried %d ops, want %d", len(cmds[0]), len(batch))
	}
	if !slices.Equal(cmds[1], wantStale) {
		t.Fatalf("retry command carried %v, want exactly the failed ops %v", cmds[1], wantStale)
	}
	// Byte for byte: the retry's q filters are the failed ops' guarded filters.
	var wantQs []string
	for _, it := range batch {
		if slices.Contains(wantStale, it.ID) {
			wantQs = append(wantQs, guardFilter(t, it))
		}
	}
	slices.Sort(wantQs)
	if qs := updateQs(t, e.proxy)[1]; !slices.Equal(qs, wantQs) {
		t.Fatalf("retry q filters:\n%v\nwant:\n%v", qs, wantQs)
	}
}

// TestDoubleCountRegression replays the original incident: one upsert of an unordered bulk
// fails on the unique index and the whole bulk is retried. The old approach ($inc, retry
// everything) double counts every other leaf; the Writer leaves every value correct.
func TestDoubleCountRegression(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 10
	var batch []Item
	var wantTotal int64
	for i := range n {
		it := item(fmt.Sprintf("n%02d", i), int64(i+1), 100)
		batch = append(batch, it)
		wantTotal += it.Online
	}
	// The node n05 already has a document for this tick that the old filter does not match
	// (written under another project; in the writer's case a newer version): its upsert fails
	// with E11000.
	conflict := item("n05", 6, 200)
	conflict.Project = "other"
	e.seed(t, conflict)

	t.Run("old approach double counts", func(t *testing.T) {
		old := e.coll.Database().Collection("counts_old")
		if _, err := old.Indexes().CreateOne(ctx, mongo.IndexModel{
			Keys:    bson.D{{Key: "id", Value: 1}, {Key: "type", Value: 1}, {Key: "timestamp", Value: 1}},
			Options: options.Index().SetUnique(true),
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := old.InsertOne(ctx, bson.D{{Key: "id", Value: "n05"}, {Key: "type", Value: "server"},
			{Key: "timestamp", Value: tick0}, {Key: "project", Value: "other"}, {Key: "online", Value: int64(6)}}); err != nil {
			t.Fatal(err)
		}
		models := make([]mongo.WriteModel, len(batch))
		for i, it := range batch {
			models[i] = mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "project", Value: it.Project}, {Key: "id", Value: it.ID},
					{Key: "type", Value: it.Type}, {Key: "timestamp", Value: it.Timestamp}}).
				SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "online", Value: it.Online}}}}).
				SetUpsert(true)
		}
		// The old application: on error, retry the whole bulk once.
		_, err := old.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		if !mongo.IsDuplicateKeyError(err) {
			t.Fatalf("first bulk: %v, want E11000", err)
		}
		_, err = old.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		if !mongo.IsDuplicateKeyError(err) {
			t.Fatalf("retried bulk: %v, want E11000", err)
		}
		total := sumOnline(t, old, bson.D{{Key: "id", Value: bson.D{{Key: "$ne", Value: "n05"}}}})
		if want := 2 * (wantTotal - 6); total != want {
			t.Fatalf("old approach total of the other leaves %d, want the double count %d", total, want)
		}
	})

	t.Run("writer counts once", func(t *testing.T) {
		w := startWriter(t, e.coll, Options{Workers: 1})
		e.proxy.ResetStats()
		res := submit(t, w, batch)
		for i, r := range res {
			want := OutcomeApplied
			if batch[i].ID == "n05" {
				want = OutcomeStale
			}
			if r.Outcome != want {
				t.Fatalf("item %s: %v, want %v", batch[i].ID, r.Outcome, want)
			}
		}
		// Submitting the same batch again (what the old system did) changes nothing.
		res = submit(t, w, batch)
		for i, r := range res {
			if r.Outcome != OutcomeStale {
				t.Fatalf("resent item %s: %v, want stale", batch[i].ID, r.Outcome)
			}
		}
		want := map[string]int64{}
		for _, it := range batch {
			want[it.ID] = it.Online
		}
		for _, d := range e.leaves(t) {
			if d.Online != want[d.ID] {
				t.Errorf("%s: online %d, want %d", d.ID, d.Online, want[d.ID])
			}
		}
		if total := sumOnline(t, e.check, bson.D{}); total != wantTotal {
			t.Fatalf("total %d, want %d", total, wantTotal)
		}
		cmds := updateFilters(t, e.proxy)
		if len(cmds) != 4 || !slices.Equal(cmds[1], []string{"n05"}) || len(cmds[3]) != n {
			t.Fatalf("update commands %v: want batch, retry of n05 only, resent batch, retry of all", cmds)
		}
	})
}

func sumOnline(t testing.TB, coll *mongo.Collection, filter bson.D) int64 {
	t.Helper()
	cur, err := coll.Aggregate(context.Background(), mongo.Pipeline{
		{{Key: "$match", Value: filter}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "total", Value: bson.D{{Key: "$sum", Value: "$" + migrations.FieldOnline}}}}}},
	})
	if err != nil {
		t.Fatalf("aggregate: %v", err)
	}
	var out []struct {
		Total int64 `bson:"total"`
	}
	if err := cur.All(context.Background(), &out); err != nil {
		t.Fatalf("aggregate: %v", err)
	}
	if len(out) != 1 {
		t.Fatalf("aggregate: %d groups", len(out))
	}
	return out[0].Total
}
