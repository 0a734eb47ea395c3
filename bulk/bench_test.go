package bulk

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// BenchmarkWriter writes 100,000 new leaves per iteration through the Writer (100 agents
// submitting 10 leaves at a time) and, in the same run, the same documents as raw unordered
// BulkWrites of 1,000 guarded upserts from as many goroutines as the Writer has workers. Both
// go through the black-pipe proxy to the embedded server, into collections with the unique
// index. It reports leaves/s of both, their ratio, and update commands per 100k leaves.
//
//	go test -run '^$' -bench BenchmarkWriter -benchtime 3x ./bulk
func BenchmarkWriter(b *testing.B) {
	const leaves, agents, perSubmit, rawBatch = 100_000, 100, 10, 1000
	e := newEnv(b)
	opts := Options{}.withDefaults()
	w := startWriter(b, e.coll, opts)
	raw := e.coll.Database().Collection("counts_raw")
	ctx := context.Background()
	if _, err := raw.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "id", Value: 1}, {Key: "type", Value: 1}, {Key: "timestamp", Value: 1}},
		Options: options.Index().SetUnique(true),
	}); err != nil {
		b.Fatal(err)
	}
	makeItems := func(ts time.Time) []Item {
		items := make([]Item, leaves)
		for i := range items {
			items[i] = Item{Key: Key{ID: fmt.Sprintf("node-%06d", i), Type: "server", Timestamp: ts},
				Project: "bench", Online: int64(i % 500), Version: ts.UnixNano() + 1, SubmissionID: "bench"}
		}
		return items
	}

	var rawTime, writerTime time.Duration
	var writerCmds, rawCmds int
	iter := 0
	for b.Loop() {
		ts := tick0.Add(time.Duration(iter) * 5 * time.Minute)
		iter++

		items := makeItems(ts)
		e.proxy.ResetStats()
		start := time.Now()
		var wg sync.WaitGroup
		next := make(chan []Item, opts.Workers)
		for range opts.Workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for chunk := range next {
					models := make([]mongo.WriteModel, len(chunk))
					for i, it := range chunk {
						models[i], _ = model(nil, it, time.Now())
					}
					if _, err := raw.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		for i := 0; i < leaves; i += rawBatch {
			next <- items[i : i+rawBatch]
		}
		close(next)
		wg.Wait()
		rawTime += time.Since(start)
		rawCmds += e.proxy.Stats().Commands["update"]

		items = makeItems(ts)
		e.proxy.ResetStats()
		start = time.Now()
		per := leaves / agents
		for a := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mine := items[a*per : (a+1)*per]
				for i := 0; i < len(mine); i += perSubmit {
					res, err := w.Submit(ctx, mine[i:i+perSubmit])
					if err != nil {
						b.Error(err)
						return
					}
					for _, r := range res {
						if r.Outcome != OutcomeApplied {
							b.Errorf("outcome %v %v", r.Outcome, r.Err)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		writerTime += time.Since(start)
		writerCmds += e.proxy.Stats().Commands["update"]
	}
	total := float64(iter * leaves)
	b.ReportMetric(total/writerTime.Seconds(), "writer_leaves/s")
	b.ReportMetric(total/rawTime.Seconds(), "raw_leaves/s")
	b.ReportMetric(rawTime.Seconds()/writerTime.Seconds(), "ratio")
	b.ReportMetric(float64(writerCmds)/float64(iter), "writer_updates/100k")
	b.ReportMetric(float64(rawCmds)/float64(iter), "raw_updates/100k")
}
