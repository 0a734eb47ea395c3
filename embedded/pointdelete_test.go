package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// pointOp is one operation of TestConcurrentPointDeletesAndFindAndModifyMatchSerialModel and
// what the server reported for it.
type pointOp struct {
	kind    string // "upsert" (findOneAndUpdate), "delete" (delete command), "remove" (findOneAndDelete)
	key     string
	id      string // the op's id: the value an upsert sets
	before  string // upsert and remove: the op id of the document found ("" none)
	deleted int64  // delete: documents deleted
}

// TestConcurrentPointDeletesAndFindAndModifyMatchSerialModel cross-checks deletes and
// findAndModify by a unique key, whose finds are planned (and upserts' documents prepared)
// outside the engine's lock, against a serial model replayed from the change stream, while
// another client drops and re-creates the unique index and a plain one (so the plans go stale
// between the plan and the write). Writers send findOneAndUpdate upserts (each sets its own
// op id), unordered delete commands of several statements and findOneAndDelete, on a few
// keys. Checked: events in commit order; an insert only of an absent key, by an upsert that
// reported no document found; an update only of a present key, by an upsert that reported
// the document the model holds then; every upsert applied exactly once; as many delete
// events as deletes reported, each findOneAndDelete's document among them; the collection
// ends equal to the model.
func TestConcurrentPointDeletesAndFindAndModifyMatchSerialModel(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("points")
	unique := mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}, Options: options.Index().SetUnique(true).SetName("k_1")}
	if _, err := coll.Indexes().CreateOne(e.ctx, unique); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(e.ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer cs.Close(e.ctx)
	const writers, perWriter, keys = 6, 200, 6
	ops := make([][]pointOp, writers)
	errs := make(chan error, writers+1)
	stopChurn := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() {
		idx := coll.Indexes()
		plain := mongo.IndexModel{Keys: bson.D{{Key: "op", Value: 1}}, Options: options.Index().SetName("op_1")}
		for {
			select {
			case <-stopChurn:
				return
			default:
			}
			for _, step := range []func() error{
				func() error { return idx.DropOne(e.ctx, "k_1") },
				func() error { _, err := idx.CreateMany(e.ctx, []mongo.IndexModel{unique, plain}); return err },
				func() error { return idx.DropOne(e.ctx, "op_1") },
			} {
				if err := step(); err != nil {
					errs <- fmt.Errorf("index churn: %w", err)
					return
				}
			}
		}
	})
	var wg, half sync.WaitGroup
	half.Add(writers)
	for w := range writers {
		c := e.c
		if w%2 == 1 {
			c = e.store.Client(t, quickMonitor())
		}
		wcoll := c.Database(e.db.Name()).Collection("points")
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 30))
			for i := range perWriter {
				if i == perWriter/2 {
					half.Done()
				}
				op, err := runPointOp(e, wcoll, rng, keys, fmt.Sprintf("w%d-%d", w, i))
				if err != nil {
					errs <- fmt.Errorf("writer %d op %d: %w", w, i, err)
					return
				}
				ops[w] = append(ops[w], op)
			}
		})
	}
	half.Wait()
	close(stopChurn)
	churn.Wait()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	model := replayPointOps(t, e, cs, ops)
	var docs []struct {
		K  string `bson:"k"`
		Op string `bson:"op"`
	}
	cur, err := coll.Find(e.ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(e.ctx, &docs); err != nil {
		t.Fatal(err)
	}
	if len(docs) != len(model) {
		t.Errorf("%d documents stored, the model has %d", len(docs), len(model))
	}
	for _, d := range docs {
		if model[d.K] != d.Op {
			t.Errorf("key %s: stored op %s, model %s", d.K, d.Op, model[d.K])
		}
	}
}

// runPointOp runs one random operation of the test and returns what the server reported.
func runPointOp(e env, coll *mongo.Collection, rng *rand.Rand, keys int, id string) (pointOp, error) {
	key := func() string { return fmt.Sprintf("k%d", rng.IntN(keys)) }
	op := pointOp{key: key(), id: id}
	var found struct {
		Op string `bson:"op"`
	}
	switch rng.IntN(3) {
	case 0:
		op.kind = "upsert"
		err := coll.FindOneAndUpdate(e.ctx, bson.D{{Key: "k", Value: op.key}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "op", Value: id}}}},
			options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.Before)).Decode(&found)
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return op, err
		}
		op.before = found.Op
	case 1:
		op.kind = "delete"
		models := []mongo.WriteModel{}
		for range 1 + rng.IntN(4) {
			models = append(models, mongo.NewDeleteOneModel().SetFilter(bson.D{{Key: "k", Value: key()}}))
		}
		res, err := coll.BulkWrite(e.ctx, models, options.BulkWrite().SetOrdered(false))
		if err != nil {
			return op, err
		}
		op.deleted = res.DeletedCount
	default:
		op.kind = "remove"
		err := coll.FindOneAndDelete(e.ctx, bson.D{{Key: "k", Value: op.key}}).Decode(&found)
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return op, err
		}
		op.before = found.Op
	}
	return op, nil
}

// replayPointOps reads the events the operations must have produced and replays them on a
// model (key -> op id of its document), checking each against what was reported; it returns
// the model.
func replayPointOps(t *testing.T, e env, cs *mongo.ChangeStream, ops [][]pointOp) map[string]string {
	t.Helper()
	upserts := map[string]pointOp{} // by op id
	removed := map[string]int{}     // op ids findOneAndDelete reported, to find among the deletes
	var wantDeletes int64
	for _, w := range ops {
		for _, op := range w {
			switch op.kind {
			case "upsert":
				upserts[op.id] = op
			case "delete":
				wantDeletes += op.deleted
			case "remove":
				if op.before != "" {
					removed[op.before]++
					wantDeletes++
				}
			}
		}
	}
	model := map[string]string{}
	keyOfID := map[string]string{}
	applied := map[string]bool{}
	var lastTS bson.Timestamp
	// A missing event must fail the test, not hang it.
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	for n, want := 0, int64(len(upserts))+wantDeletes; int64(n) < want; n++ {
		if !cs.Next(ctx) {
			t.Fatalf("change stream ended after %d of %d events: %v", n, want, cs.Err())
		}
		var ev struct {
			Op          string         `bson:"operationType"`
			ClusterTime bson.Timestamp `bson:"clusterTime"`
			DocKey      bson.Raw       `bson:"documentKey"`
			Full        struct {
				K  string `bson:"k"`
				Op string `bson:"op"`
			} `bson:"fullDocument"`
			Upd struct {
				Fields struct {
					Op string `bson:"op"`
				} `bson:"updatedFields"`
			} `bson:"updateDescription"`
		}
		if err := cs.Decode(&ev); err != nil {
			t.Fatalf("decode event %d: %v", n, err)
		}
		if n > 0 && !ev.ClusterTime.After(lastTS) {
			t.Fatalf("event %d: cluster time %v not after %v", n, ev.ClusterTime, lastTS)
		}
		lastTS = ev.ClusterTime
		id := ev.DocKey.Lookup("_id").String()
		var opID, key string
		switch ev.Op {
		case "insert":
			opID, key = ev.Full.Op, ev.Full.K
			if cur, ok := model[key]; ok {
				t.Fatalf("event %d: insert of key %s by %s while it holds %s", n, key, opID, cur)
			}
			keyOfID[id] = key
		case "update":
			opID, key = ev.Upd.Fields.Op, keyOfID[id]
			if up := upserts[opID]; up.before != model[key] || up.before == "" {
				t.Fatalf("event %d: %s updated key %s holding %q, reported %q", n, opID, key, model[key], up.before)
			}
		case "delete":
			key = keyOfID[id]
			if removed[model[key]] > 0 {
				removed[model[key]]--
			}
			delete(model, key)
			continue
		default:
			t.Fatalf("event %d: unexpected %s", n, ev.Op)
		}
		if up, ok := upserts[opID]; !ok || up.key != key || applied[opID] || (ev.Op == "insert") != (up.before == "") {
			t.Fatalf("event %d: %s of key %s by %q (reported %+v, applied before: %v)", n, ev.Op, key, opID, up, applied[opID])
		}
		applied[opID] = true
		model[key] = opID
	}
	for opID, n := range removed {
		if n > 0 {
			t.Errorf("findOneAndDelete reported %s, which no delete event removed", opID)
		}
	}
	return model
}
