package embedded_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/embeddedtest"
)

// parentDoc is a parent document as rollup's watcher writes it: every field in one $set,
// with the children's contributions embedded (children of them).
func parentDoc(id string, rev int64, children int, ts bson.DateTime) bson.D {
	kids := make(bson.D, children)
	for i := range kids {
		kids[i] = bson.E{Key: fmt.Sprintf("%s-p%03d", id, i), Value: bson.D{
			{Key: "type", Value: "process"}, {Key: "online", Value: int64(40 + i%50)}, {Key: "version", Value: int64(1764000000000000000 + rev)},
			{Key: "reported", Value: int64(1)}, {Key: "expected", Value: int64(1)},
		}}
	}
	return bson.D{
		{Key: "id", Value: id}, {Key: "type", Value: "server"}, {Key: "timestamp", Value: ts}, {Key: "project", Value: "bench"},
		{Key: "online", Value: int64(4000 + rev)}, {Key: "version", Value: rev}, {Key: "children", Value: kids},
		{Key: "reported", Value: int64(children)}, {Key: "expected", Value: int64(children)}, {Key: "tree_version", Value: int64(1)},
		{Key: "written_at", Value: bson.NewDateTimeFromTime(time.Now())}, {Key: "rollup", Value: true},
	}
}

// benchCounts starts an embedded store and returns a counts collection with rollup's indexes
// on it, and a context bounding the benchmark.
func benchCounts(b *testing.B) (context.Context, *mongo.Collection) {
	store := embeddedtest.Start(b, embeddedtest.Options{})
	store.SkipIfReal(b)
	c := store.Client(b)
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	b.Cleanup(cancel)
	coll := c.Database("bench").Collection("counts")
	for _, ix := range []mongo.IndexModel{
		{Keys: bson.D{{Key: "id", Value: 1}, {Key: "type", Value: 1}, {Key: "timestamp", Value: 1}}, Options: options.Index().SetUnique(true)},
		{Keys: bson.D{{Key: "written_at", Value: 1}}},
		{Keys: bson.D{{Key: "project", Value: 1}, {Key: "timestamp", Value: 1}}},
	} {
		if _, err := coll.Indexes().CreateOne(ctx, ix); err != nil {
			b.Fatal(err)
		}
	}
	return ctx, coll
}

// BenchmarkParentWrites measures the watcher's write of parent documents: unordered
// BulkWrites of 100 rev-guarded upserts, each the whole parent ($set of every field, 100
// children embedded), on rollup's indexes; with a change stream open as the watcher opens it
// (fullDocument updateLookup, its $match on leaf writes, which every parent write is
// evaluated against) and drained, or without one. Reports µs per parent written.
func BenchmarkParentWrites(b *testing.B) {
	for _, stream := range []bool{false, true} {
		b.Run(fmt.Sprintf("stream=%v", stream), func(b *testing.B) {
			ctx, coll := benchCounts(b)
			if stream {
				cs, err := coll.Watch(ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "$or", Value: bson.A{
					bson.D{{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"insert", "update", "replace"}}}}, {Key: "fullDocument.rollup", Value: bson.D{{Key: "$ne", Value: true}}}},
					bson.D{{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"invalidate", "drop", "rename", "dropDatabase"}}}}},
				}}}}}}, options.ChangeStream().SetFullDocument(options.UpdateLookup).SetMaxAwaitTime(100*time.Millisecond))
				if err != nil {
					b.Fatal(err)
				}
				sctx, stop := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() {
					defer close(done)
					for cs.Next(sctx) {
					}
				}()
				defer func() { stop(); <-done; _ = cs.Close(context.Background()) }()
			}
			const parents, batch = 1000, 100
			ts := bson.NewDateTimeFromTime(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
			rev := make([]int64, parents)
			write := func() {
				for lo := 0; lo < parents; lo += batch {
					models := make([]mongo.WriteModel, 0, batch)
					for i := lo; i < lo+batch; i++ {
						id := fmt.Sprintf("g%02d-s%04d", i/50, i)
						var guard any = bson.D{{Key: "$exists", Value: false}}
						if rev[i] > 0 {
							guard = rev[i]
						}
						rev[i]++
						models = append(models, mongo.NewUpdateOneModel().
							SetFilter(bson.D{{Key: "id", Value: id}, {Key: "type", Value: "server"}, {Key: "timestamp", Value: ts}, {Key: "version", Value: guard}}).
							SetUpdate(bson.D{{Key: "$set", Value: parentDoc(id, rev[i], 100, ts)}}).SetUpsert(true))
					}
					if _, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
						b.Fatal(err)
					}
				}
			}
			write() // the documents exist: the iterations update them, as most parent writes do
			b.ResetTimer()
			for b.Loop() {
				write()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*parents), "µs/parent")
		})
	}
}

// BenchmarkParentReads measures the watcher's read of the parents it is about to merge:
// finds of 100 parent documents (100 children each) by key ({id: {$in}, type: {$in},
// timestamp: {$in}}, as store.ByKeys asks). Reports µs per parent read.
func BenchmarkParentReads(b *testing.B) {
	ctx, coll := benchCounts(b)
	const parents, batch = 1000, 100
	ts := bson.NewDateTimeFromTime(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	ids := make([]any, parents)
	docs := make([]any, parents)
	for i := range parents {
		ids[i] = fmt.Sprintf("g%02d-s%04d", i/50, i)
		docs[i] = parentDoc(ids[i].(string), 1, 100, ts)
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		for lo := 0; lo < parents; lo += batch {
			cur, err := coll.Find(ctx, bson.D{
				{Key: "id", Value: bson.D{{Key: "$in", Value: ids[lo : lo+batch]}}},
				{Key: "type", Value: bson.D{{Key: "$in", Value: bson.A{"server"}}}},
				{Key: "timestamp", Value: bson.D{{Key: "$in", Value: bson.A{ts}}}},
			})
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for cur.Next(ctx) {
				n++
			}
			if err := cur.Err(); err != nil || n != batch {
				b.Fatalf("read %d parents, %v", n, err)
			}
			_ = cur.Close(ctx)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*parents), "µs/parent")
}
