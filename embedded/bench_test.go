package embedded_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/embeddedtest"
)

// benchUpsertsEnv sets the number of upserts per benchmark iteration (default 100,000). The
// reference run is:
//
//	ROLLUP_BENCH_UPSERTS=1000000 go test -run '^$' -bench UpsertThroughDriver -benchtime 1x ./embedded/
//
// (one iteration of one million upserts, in memory and durable).
const benchUpsertsEnv = "ROLLUP_BENCH_UPSERTS"

const (
	benchBatch  = 1000
	benchWindow = 100_000 // the ratio compares the time of the last and the first window
)

// BenchmarkUpsertThroughDriver measures rollup's write path end to end: unordered batches of
// 1,000 upserts on the unique (id, type, timestamp) index through the official driver over
// TCP, in memory and durable. It reports upserts/s and, when an iteration has at least two
// windows of 100,000 upserts, last-window/first-window time: about 1 when every upsert is an
// index lookup, growing with the collection when upserts scan.
func BenchmarkUpsertThroughDriver(b *testing.B) {
	n := 100_000
	if s := os.Getenv(benchUpsertsEnv); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < benchBatch {
			b.Fatalf("%s=%q: want an integer >= %d", benchUpsertsEnv, s, benchBatch)
		}
		n = v
	}
	for _, mode := range []string{"memory", "durable"} {
		b.Run(fmt.Sprintf("%s/n=%d", mode, n), func(b *testing.B) {
			var opts embeddedtest.Options
			if mode == "durable" {
				opts.DataDir = b.TempDir()
			}
			store := embeddedtest.Start(b, opts)
			store.SkipIfReal(b)
			c := store.Client(b)
			ctx, cancel := context.WithTimeout(b.Context(), 30*time.Minute)
			defer cancel()
			var total time.Duration
			var firstWin, lastWin time.Duration
			for it := 0; b.Loop(); it++ {
				b.StopTimer()
				coll := c.Database("bench").Collection(fmt.Sprintf("events_%d", it))
				if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{
					Keys:    bson.D{{Key: "id", Value: 1}, {Key: "type", Value: 1}, {Key: "timestamp", Value: 1}},
					Options: options.Index().SetUnique(true),
				}); err != nil {
					b.Fatalf("create index: %v", err)
				}
				b.StartTimer()
				start := time.Now()
				winStart := start
				models := make([]mongo.WriteModel, 0, benchBatch)
				for i := 0; i < n; i += benchBatch {
					models = models[:0]
					for j := i; j < i+benchBatch && j < n; j++ {
						models = append(models, mongo.NewUpdateOneModel().
							SetFilter(bson.D{{Key: "id", Value: fmt.Sprintf("user-%08d", j)}, {Key: "type", Value: "play"}, {Key: "timestamp", Value: int64(1_700_000_000 + j%3600)}}).
							SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "count", Value: int32(j)}, {Key: "version", Value: int64(1)}}}}).
							SetUpsert(true))
					}
					res, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
					if err != nil {
						b.Fatalf("bulk write at %d: %v", i, err)
					}
					if res.UpsertedCount != int64(len(models)) {
						b.Fatalf("bulk write at %d: upserted %d of %d", i, res.UpsertedCount, len(models))
					}
					done := i + len(models)
					if done%benchWindow == 0 {
						now := time.Now()
						if done == benchWindow {
							firstWin = now.Sub(winStart)
						}
						if done == n-n%benchWindow {
							lastWin = now.Sub(winStart)
						}
						winStart = now
					}
				}
				total += time.Since(start)
			}
			b.StopTimer()
			b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "upserts/s")
			if n >= 2*benchWindow && firstWin > 0 {
				b.ReportMetric(lastWin.Seconds()/firstWin.Seconds(), "last100k/first100k")
			}
		})
	}
}
