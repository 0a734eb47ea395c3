package bulk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/store"
)

// TestDuplicateKeyRetriesExactlyFailedOps seeds leaves with higher and with lower versions,
// submits one batch and checks outcomes, stored values, and that exactly the ops that failed
// with E11000 were looked up, in one find, and none re-issued.
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
	if len(cmds) != 1 || len(cmds[0]) != len(batch) {
		t.Fatalf("update commands %v, want one with the %d ops of the batch", cmds, len(batch))
	}
	if finds := findIDs(t, e.proxy); len(finds) != 1 || !slices.Equal(finds[0], wantStale) {
		t.Fatalf("finds of ids %v, want one of exactly the failed ops %v", finds, wantStale)
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
	// (written under another project): its upsert fails with E11000.
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
		// n05 is another project's: rejected, its document untouched.
		res := submit(t, w, batch)
		for i, r := range res {
			want := OutcomeApplied
			if batch[i].ID == "n05" {
				want = OutcomeRejected
			}
			if r.Outcome != want {
				t.Fatalf("item %s: %v, want %v", batch[i].ID, r.Outcome, want)
			}
		}
		// Submitting the same batch again (what the old system did) changes nothing.
		res = submit(t, w, batch)
		for i, r := range res {
			want := OutcomeStale
			if batch[i].ID == "n05" {
				want = OutcomeRejected
			}
			if r.Outcome != want {
				t.Fatalf("resent item %s: %v, want %v", batch[i].ID, r.Outcome, want)
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
		cmds, finds := updateFilters(t, e.proxy), findIDs(t, e.proxy)
		if len(cmds) != 2 || len(cmds[0]) != n || len(cmds[1]) != n ||
			len(finds) != 2 || !slices.Equal(finds[0], []string{"n05"}) || len(finds[1]) != n {
			t.Fatalf("update commands %v and finds of %v: want batch, a find of n05, resent batch, a find of all", cmds, finds)
		}
		var d leafDoc
		if err := e.check.FindOne(ctx, bson.D{{Key: "id", Value: "n05"}}).Decode(&d); err != nil || d.Project != "other" || d.Version != 200 {
			t.Fatalf("the other project's n05 became %+v (%v)", d, err)
		}
	})
}

func sumOnline(t testing.TB, coll *mongo.Collection, filter bson.D) int64 {
	t.Helper()
	cur, err := coll.Aggregate(context.Background(), mongo.Pipeline{
		{{Key: "$match", Value: filter}},
		{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "total", Value: bson.D{{Key: "$sum", Value: "$" + store.FieldOnline}}}}}},
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

// TestReissueAfterRead: an upsert hits E11000 but the read finds no document under its key
// (here the conflict is on another unique index, as when a document vanishes between the two):
// the op, and only it, is re-issued once with its guarded filter, byte for byte; its second
// E11000 leaves its outcome unknown (a resend finds out), never a false stale.
func TestReissueAfterRead(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.check.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "submission_id", Value: 1}}, Options: options.Index().SetUnique(true),
	}); err != nil {
		t.Fatal(err)
	}
	taken := item("z", 1, 1)
	taken.SubmissionID = "shared"
	e.seed(t, taken)
	w := startWriter(t, e.coll, Options{Workers: 1})
	e.proxy.ResetStats()
	clash := item("a", 5, 10)
	clash.SubmissionID = "shared"
	batch := []Item{clash, item("b", 6, 10)}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	res, err := w.Submit(ctx2, batch)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("submit: %v, want an unknown outcome (ErrUnavailable)", err)
	}
	if res[0].Outcome != OutcomeUnknown || res[1].Outcome != OutcomeApplied {
		t.Fatalf("outcomes %v (%v), want unknown, applied", outcomes(res), res[0].Err)
	}
	if finds := findIDs(t, e.proxy); len(finds) != 1 || !slices.Equal(finds[0], []string{"a"}) {
		t.Fatalf("finds of %v, want one of a", finds)
	}
	qs := updateQs(t, e.proxy)
	if len(qs) != 2 || len(qs[0]) != 2 || !slices.Equal(qs[1], []string{guardFilter(t, clash)}) {
		t.Fatalf("update q filters %v, want the batch, then a's guarded filter alone", qs)
	}
	if s := w.Stats(); s.Conflicts != 1 || s.Reissued != 1 {
		t.Fatalf("conflicts %d reissued %d, want 1 1", s.Conflicts, s.Reissued)
	}
}
