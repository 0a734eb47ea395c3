package storage

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

const upsertBatch = 1000

// upserter performs rollup's upsert: find by the unique (id, type, timestamp) key, then
// replace with $set-like changes, or insert.
type upserter struct {
	ids     []string
	version int64
}

func newUpserter() *upserter {
	u := &upserter{}
	for i := 0; i < upsertBatch; i++ {
		u.ids = append(u.ids, "player-"+strconv.Itoa(i))
	}
	return u
}

func (u *upserter) upsert(w *Writer, id string, ts int64) error {
	u.version++
	filter := bson.D{{Key: "id", Value: id}, {Key: "type", Value: "p"}, {Key: "timestamp", Value: ts}}
	var found *Doc
	w.Find("app", "events", filter, func(d *Doc) bool { found = d; return false })
	if found == nil {
		_, err := w.Insert("app", "events", bson.D{
			{Key: "_id", Value: bson.NewObjectID()}, {Key: "id", Value: id}, {Key: "type", Value: "p"},
			{Key: "timestamp", Value: ts}, {Key: "online", Value: int32(1)}, {Key: "version", Value: u.version},
		})
		return err
	}
	nd := found.D()
	nd[4].Value = int32(2)
	nd[5].Value = u.version
	_, err := w.Replace("app", "events", found, nd, &UpdateDesc{UpdatedFields: bson.D{nd[4], nd[5]}})
	return err
}

func setupUpsert(b *testing.B, e *Engine) {
	if _, err := e.Write(context.Background(), func(w *Writer) error {
		_, err := w.CreateIndex("app", "events", IndexSpec{Name: "id_1_type_1_timestamp_1",
			Key: bson.D{{Key: "id", Value: int32(1)}, {Key: "type", Value: int32(1)}, {Key: "timestamp", Value: int32(1)}}, Unique: true})
		return err
	}); err != nil {
		b.Fatal(err)
	}
}

// benchUpserts runs b.N Writes of 1,000 upserts; every other batch updates the previous
// batch's documents, the others insert new ones.
func benchUpserts(b *testing.B, e *Engine) {
	setupUpsert(b, e)
	u := newUpserter()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		ts := int64(n / 2)
		if _, err := e.Write(context.Background(), func(w *Writer) error {
			for _, id := range u.ids {
				if err := u.upsert(w, id, ts); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*upsertBatch)/b.Elapsed().Seconds(), "upserts/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*upsertBatch), "ns/upsert")
}

func BenchmarkUpsertMemory(b *testing.B) {
	e, err := Open(Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	benchUpserts(b, e)
}

func BenchmarkUpsertDurable(b *testing.B) {
	e, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	benchUpserts(b, e)
}

// BenchmarkUpsertScaling inserts 1M documents by upsert (1,000 per Write) and reports the
// cost of the first and the last 100k: it must stay flat (O(log n) index operations).
func BenchmarkUpsertScaling(b *testing.B) {
	for n := 0; n < b.N; n++ {
		e, err := Open(Options{OplogMaxBytes: oplogBytesForBench()})
		if err != nil {
			b.Fatal(err)
		}
		setupUpsert(b, e)
		u := newUpserter()
		const total, window = 1_000_000, 100_000
		var first, last, firstCPU, lastCPU time.Duration
		start, startCPU := time.Now(), cpuTime()
		for batch := 0; batch < total/upsertBatch; batch++ {
			if batch*upsertBatch == total-window {
				start, startCPU = time.Now(), cpuTime()
			}
			ts := int64(batch)
			if _, err := e.Write(context.Background(), func(w *Writer) error {
				for _, id := range u.ids {
					if err := u.upsert(w, id, ts); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			if (batch+1)*upsertBatch == window {
				first, firstCPU = time.Since(start), cpuTime()-startCPU
			}
		}
		last, lastCPU = time.Since(start), cpuTime()-startCPU
		var count int
		e.Read(func(r *Reader) { count = r.Count("app", "events") })
		if count != total {
			b.Fatalf("count = %d", count)
		}
		_ = e.Close()
		ratio := float64(last) / float64(first)
		b.ReportMetric(float64(first.Nanoseconds())/window, "first100k-ns/upsert")
		b.ReportMetric(float64(last.Nanoseconds())/window, "last100k-ns/upsert")
		b.ReportMetric(ratio, "last/first")
		cpuRatio := float64(lastCPU) / float64(firstCPU)
		b.ReportMetric(cpuRatio, "cpu-last/first")
		b.Logf("first 100k: %v, last 100k of 1M: %v (ratio %.2f); process CPU time %v vs %v (ratio %.2f)",
			first, last, ratio, firstCPU, lastCPU, cpuRatio)
		if ratio > 1.3 {
			b.Logf("WARNING: last 100k cost %.2fx the first 100k (target <= 1.3x)", ratio)
		}
	}
}

func BenchmarkFindUniquePoint(b *testing.B) {
	e, err := Open(Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	setupUpsert(b, e)
	u := newUpserter()
	for batch := 0; batch < 100; batch++ {
		if _, err := e.Write(context.Background(), func(w *Writer) error {
			for _, id := range u.ids {
				if err := u.upsert(w, id, int64(batch)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	filter := bson.D{{Key: "id", Value: "player-7"}, {Key: "type", Value: "p"}, {Key: "timestamp", Value: int64(42)}}
	b.ResetTimer()
	e.Read(func(r *Reader) {
		for i := 0; i < b.N; i++ {
			n := 0
			r.Find("app", "events", filter, func(*Doc) bool { n++; return true })
			if n != 1 {
				b.Fatal(fmt.Sprint("found ", n))
			}
		}
	})
}

func oplogBytesForBench() int64 {
	if v := os.Getenv("OPLOG_BYTES"); v != "" {
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

// BenchmarkUpsertDurableParallel runs concurrent 1,000-upsert Writes (distinct keys per
// goroutine) with fsync: group commit shares the syncs.
func BenchmarkUpsertDurableParallel(b *testing.B) {
	e, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	setupUpsert(b, e)
	var next atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		u := newUpserter()
		base := next.Add(1) << 32
		for n := int64(0); pb.Next(); n++ {
			ts := base + n/2
			if _, err := e.Write(context.Background(), func(w *Writer) error {
				for _, id := range u.ids {
					if err := u.upsert(w, id, ts); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N*upsertBatch)/b.Elapsed().Seconds(), "upserts/s")
	b.ReportMetric(float64(e.syncs.Load())/float64(b.N), "syncs/write")
}

// cpuTime returns the process's CPU time (user + system), which other processes on a shared
// machine do not inflate.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStoredLeafMemory stores 200,000 documents shaped like rollup's leaf counts (the
// fields the bulk writer sets) in a collection with rollup's indexes (the unique key,
// written_at, {project, timestamp}) and reports the heap they keep: what a stored document
// costs the embedded server's memory, and its garbage collector.
func BenchmarkStoredLeafMemory(b *testing.B) {
	const n = 200_000
	for range b.N {
		e, err := Open(Options{OplogMaxBytes: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.Write(context.Background(), func(w *Writer) error {
			for _, spec := range []IndexSpec{
				{Name: "id_1_type_1_timestamp_1", Key: bson.D{{Key: "id", Value: int32(1)}, {Key: "type", Value: int32(1)}, {Key: "timestamp", Value: int32(1)}}, Unique: true},
				{Name: "written_at_1", Key: bson.D{{Key: "written_at", Value: int32(1)}}},
				{Name: "project_1_timestamp_1", Key: bson.D{{Key: "project", Value: int32(1)}, {Key: "timestamp", Value: int32(1)}}},
			} {
				if _, err := w.CreateIndex("app", "counts", spec); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		ts := bson.DateTime(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC).UnixMilli())
		for lo := 0; lo < n; lo += upsertBatch {
			if _, err := e.Write(context.Background(), func(w *Writer) error {
				for i := lo; i < lo+upsertBatch; i++ {
					if _, err := w.Insert("app", "counts", bson.D{
						{Key: "_id", Value: bson.NewObjectID()},
						{Key: "id", Value: fmt.Sprintf("g%03d-s%02d-p%03d", i/5000, i/100%50, i%100)}, {Key: "type", Value: "process"},
						{Key: "timestamp", Value: ts}, {Key: "online", Value: int64(i % 97)}, {Key: "version", Value: int64(1764000000000000000 + i)},
						{Key: "project", Value: "bench"}, {Key: "submission_id", Value: "scale-1764000000-bench-" + strconv.Itoa(i/100)},
						{Key: "written_at", Value: bson.DateTime(time.Now().UnixMilli())},
					}); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/n, "heap-B/doc")
		b.ReportMetric(float64(m1.HeapObjects-m0.HeapObjects)/n, "objects/doc")
		// What one collection costs per stored document: the marking a busy store's garbage
		// collector repeats every cycle (the median of a few forced collections).
		var gcs []time.Duration
		for range 5 {
			start := time.Now()
			runtime.GC()
			gcs = append(gcs, time.Since(start))
		}
		slices.Sort(gcs)
		b.ReportMetric(float64(gcs[len(gcs)/2].Nanoseconds())/n, "gc-ns/doc")
		runtime.KeepAlive(e)
		_ = e.Close()
	}
}
