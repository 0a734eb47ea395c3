package embedded

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/aggregate"
	"github.com/gameops/rollup/embedded/storage"
)

// leafFilterStage is the $match rollup's watcher opens its stream with (watcher/events.go):
// leaf writes, not its own parent writes (fullDocument.rollup), and the stream-ending events.
func leafFilterStage() bson.D {
	return bson.D{{Key: "$match", Value: bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"insert", "update", "replace"}}}}, {Key: "fullDocument.rollup", Value: bson.D{{Key: "$ne", Value: true}}}},
		bson.D{{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"invalidate", "drop", "rename", "dropDatabase"}}}}},
	}}}}}
}

// newInternalServer starts no listener loop: the tests of this file call the server's
// functions directly on its in-memory engine.
func newInternalServer(tb testing.TB) *Server {
	tb.Helper()
	s, err := New(Config{Listen: "127.0.0.1:0", TTLMonitorInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = s.ln.Close()
		_ = s.engine.Close()
	})
	return s
}

// testStream is a collection change stream on db.coll as openChangeStream builds it, at
// position after, with fullDocument mode full and the stages after $changeStream.
func testStream(tb testing.TB, db, coll, full string, after storage.OpTime, stages ...bson.D) *changeStream {
	tb.Helper()
	cs := &changeStream{scope: scopeCollection, db: db, coll: coll, fullDocument: full, after: after}
	if len(stages) > 0 {
		p, err := aggregate.Compile(stages)
		if err != nil {
			tb.Fatal(err)
		}
		cs.post = p
		cs.probe = newStreamProbe(stages[0], full)
	}
	cs.rawProbes, cs.rawProject, cs.raw = rawEventsFor(cs, stages)
	return cs
}

// leafDoc is a leaf document shaped as rollup stores it.
func leafDoc(i int, online int64, ts bson.DateTime) bson.D {
	return bson.D{
		{Key: "_id", Value: bson.NewObjectID()},
		{Key: "id", Value: fmt.Sprintf("bench/g%02d/s%04d/p%02d", i%20, i/100, i%100)},
		{Key: "type", Value: "process"}, {Key: "timestamp", Value: ts}, {Key: "project", Value: "bench"},
		{Key: "online", Value: online}, {Key: "agent", Value: fmt.Sprintf("agent-%04d", i/100)},
		{Key: "received_at", Value: bson.NewDateTimeFromTime(time.Now())},
	}
}

// BenchmarkStreamBatch measures a change stream's batch on rollup's leaf traffic: 1,000 leaf
// inserts, then an update ($set online, received_at) of each, read as rollup's watcher reads
// them (fullDocument updateLookup, its leaf $match) and, for the raw cost of an event, with no
// pipeline and fullDocument default. One op is one streamBatch of the 2,000 entries; ns/event
// and allocs/event divide by the events it returns.
func BenchmarkStreamBatch(b *testing.B) {
	s := newInternalServer(b)
	const db, coll, n = "bench", "counts", 1000
	start := s.engine.LastOpTime()
	ts := bson.NewDateTimeFromTime(time.Now().Truncate(5 * time.Minute))
	ctx := context.Background()
	docs := make([]*storage.Doc, n)
	if _, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		for i := range docs {
			d, err := w.Insert(db, coll, leafDoc(i, int64(i%50), ts))
			if err != nil {
				return err
			}
			docs[i] = d
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	if _, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		for i, old := range docs {
			next := old.D()
			now := bson.NewDateTimeFromTime(time.Now())
			next[5].Value, next[7].Value = int64(i%50+1), now
			desc := &storage.UpdateDesc{UpdatedFields: bson.D{{Key: "online", Value: int64(i%50 + 1)}, {Key: "received_at", Value: now}}, RemovedFields: []string{}}
			if _, err := w.Replace(db, coll, old, next, desc); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name, full string
		stages     []bson.D
	}{
		{"watcher", "updateLookup", []bson.D{leafFilterStage()}},
		{"plain", "default", nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cs := testStream(b, db, coll, bc.full, start, bc.stages...)
			events := 0
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for b.Loop() {
				cs.after = start
				batch, err := s.streamBatch(cs, 0)
				if err != nil {
					b.Fatal(err)
				}
				if len(batch) != 2*n {
					b.Fatalf("%d events, want %d", len(batch), 2*n)
				}
				events += len(batch)
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(events), "allocs/event")
		})
	}
}
