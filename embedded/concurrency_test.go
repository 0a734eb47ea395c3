package embedded_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestConcurrentUpserts runs 16 writers (half with their own client, half sharing one) doing
// unordered upsert batches with absolute $set values on overlapping unique keys: no write
// may fail, every key exists exactly once, and its value is one of the values written to it.
func TestConcurrentUpserts(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("events")
	createKeyIndex(t, e, coll)
	const (
		writers   = 16
		batches   = 8
		batchSize = 100
		keyIDs    = 120 // x 2 types x 2 timestamps = 480 distinct keys
	)
	type k struct {
		id, typ string
		ts      int32
	}
	written := make([]map[k][]int32, writers) // per writer: key -> values it wrote
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		written[w] = map[k][]int32{}
		c := e.c
		if w%2 == 1 {
			c = e.store.Client(t, quickMonitor())
		}
		wcoll := c.Database(e.db.Name()).Collection("events")
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for b := range batches {
				models := make([]mongo.WriteModel, 0, batchSize)
				for i := range batchSize {
					kk := k{id: fmt.Sprintf("k%d", rng.IntN(keyIDs)), typ: []string{"p", "q"}[rng.IntN(2)], ts: int32(rng.IntN(2))}
					v := int32(w*1_000_000 + b*1000 + i)
					written[w][kk] = append(written[w][kk], v)
					models = append(models, mongo.NewUpdateOneModel().SetFilter(key(kk.id, kk.typ, kk.ts)).
						SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: v}, {Key: "w", Value: int32(w)}}}}).SetUpsert(true))
				}
				if _, err := wcoll.BulkWrite(e.ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
					errs <- fmt.Errorf("writer %d batch %d: %w", w, b, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	all := map[k]map[int32]bool{}
	for _, m := range written {
		for kk, vs := range m {
			if all[kk] == nil {
				all[kk] = map[int32]bool{}
			}
			for _, v := range vs {
				all[kk][v] = true
			}
		}
	}
	cur, err := coll.Find(e.ctx, bson.D{})
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	var docs []struct {
		ID        string `bson:"id"`
		Type      string `bson:"type"`
		Timestamp int32  `bson:"timestamp"`
		V         int32  `bson:"v"`
		W         int32  `bson:"w"`
	}
	if err := cur.All(e.ctx, &docs); err != nil {
		t.Fatalf("read: %v", err)
	}
	if len(docs) != len(all) {
		t.Errorf("%d documents, want %d distinct keys", len(docs), len(all))
	}
	seen := map[k]bool{}
	for _, d := range docs {
		kk := k{d.ID, d.Type, d.Timestamp}
		if seen[kk] {
			t.Errorf("key %v stored twice", kk)
		}
		seen[kk] = true
		if !all[kk][d.V] {
			t.Errorf("key %v: value %d was never written to it", kk, d.V)
		}
		if d.V/1_000_000 != d.W {
			t.Errorf("key %v: v %d and w %d come from different writes", kk, d.V, d.W)
		}
	}
	if n, err := coll.CountDocuments(e.ctx, bson.D{}); err != nil || n != int64(len(all)) {
		t.Errorf("count = %d, %v; want %d", n, err, len(all))
	}
}
