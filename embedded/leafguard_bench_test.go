package embedded_test

import (
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/embeddedtest"
)

// BenchmarkLeafUpsertGuards measures what rollup's leaf guards cost: unordered batches of
// 1,000 upserts of new leaves through the driver, into a collection with the counts
// collection's indexes, with the plain key-and-version filter (what `rollup-bench ingest`'s
// raw path sends) and with rollup's guarded filter (store.LeafFilter: project equality and
// rollup $ne true as well). One iteration is one batch; the difference is the guards' cost,
// driver encoding included.
//
//	go test -run '^$' -bench LeafUpsertGuards -benchmem ./embedded/
func BenchmarkLeafUpsertGuards(b *testing.B) {
	for _, guarded := range []bool{false, true} {
		b.Run(fmt.Sprintf("guarded=%t", guarded), func(b *testing.B) {
			store := embeddedtest.Start(b, embeddedtest.Options{})
			store.SkipIfReal(b)
			ctx := b.Context()
			coll := store.Client(b).Database("bench").Collection("counts")
			for _, keys := range []bson.D{
				{{Key: "id", Value: 1}, {Key: "type", Value: 1}, {Key: "timestamp", Value: 1}},
				{{Key: "written_at", Value: 1}},
				{{Key: "project", Value: 1}, {Key: "timestamp", Value: 1}},
			} {
				if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: keys,
					Options: options.Index().SetUnique(len(keys) == 3)}); err != nil {
					b.Fatal(err)
				}
			}
			const batch = 1000
			models := make([]mongo.WriteModel, batch)
			tick := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
			for it := 0; b.Loop(); it++ {
				ts := bson.NewDateTimeFromTime(tick.Add(time.Duration(it/100) * 5 * time.Minute))
				version := int64(it + 1)
				for j := range models {
					filter := bson.D{{Key: "id", Value: fmt.Sprintf("leaf-%07d", (it%100)*batch+j)}, {Key: "type", Value: "process"}, {Key: "timestamp", Value: ts}}
					if guarded {
						filter = append(filter, bson.E{Key: "project", Value: "bench"})
					}
					filter = append(filter, bson.E{Key: "version", Value: bson.D{{Key: "$lt", Value: version}}})
					if guarded {
						filter = append(filter, bson.E{Key: "rollup", Value: bson.D{{Key: "$ne", Value: true}}})
					}
					models[j] = mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(bson.D{{Key: "$set", Value: bson.D{
						{Key: "online", Value: int64(j)}, {Key: "version", Value: version}, {Key: "project", Value: "bench"},
						{Key: "submission_id", Value: "s"}, {Key: "written_at", Value: bson.NewDateTimeFromTime(time.Now())},
					}}}).SetUpsert(true)
				}
				res, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
				if err != nil {
					b.Fatal(err)
				}
				if res.UpsertedCount != batch {
					b.Fatalf("upserted %d of %d", res.UpsertedCount, batch)
				}
			}
		})
	}
}
