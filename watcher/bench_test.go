package watcher

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// BenchmarkTick100k writes ticks of 100,000 leaves (1 root, 20 groups, 1,000 servers, 100
// processes each) through bulk.Writer, one agent per server (100 concurrent agents, each
// submitting its server's 100 processes), and measures the time from the last leaf
// acknowledged to the root total being correct, and the parent writes per tick. Each
// iteration is one tick: run with -benchtime Nx.
func BenchmarkTick100k(b *testing.B) {
	for _, burst := range []time.Duration{DefaultMaxBurstDelay, time.Second} {
		b.Run(fmt.Sprint("max-burst-delay=", burst), func(b *testing.B) { benchTick100k(b, Options{MaxBurstDelay: burst}) })
	}
}

func benchTick100k(b *testing.B, opts Options) {
	e := newEnv(b)
	const project = "bench"
	t0 := baseTick()
	e.trees.Add(b, project, t0.Add(-365*24*time.Hour), tree.Generate(project, 20, 50, 100))
	tr, _, _ := e.trees.TreeAt(context.Background(), project, t0)
	servers := tr.Levels()[1] // deepest first: processes, servers, groups, root
	distinct := int64(1 + 20 + len(servers))
	w := New(e.db, e.trees, opts, zaptest.NewLogger(b, zaptest.Level(zap.WarnLevel)))
	r := e.start(w)
	root := e.db.Collection(store.CountsCollection)

	var lat, tierLat []time.Duration
	var writes, tierWrites []int64
	var submitTimes []time.Duration
	b.ResetTimer()
	for i := range b.N {
		at := t0.Add(-time.Duration(i+1) * tick)
		before, tiersBefore := w.Stats().ParentWrites, w.Stats().TierWrites
		want := int64(0)
		started := time.Now()
		var wg sync.WaitGroup
		work := make(chan tree.Node)
		errs := make(chan error, 100)
		for range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for s := range work {
					kids := tr.Children(s.ID)
					items := make([]bulk.Item, len(kids))
					for j, k := range kids {
						items[j] = item(project, k.ID, k.Type, at, int64(j%7), int64(i+1))
					}
					if _, err := e.leaves.Submit(context.Background(), items); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		for _, s := range servers {
			for j := range tr.ChildCount(s.ID) {
				want += int64(j % 7)
			}
			work <- s
		}
		close(work)
		wg.Wait()
		acked := time.Now()
		submitTimes = append(submitTimes, acked.Sub(started))
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
		for {
			p, ok := rootDoc(b, root, project, at)
			if ok && p.online == want && p.reported == 100_000 {
				break
			}
			if time.Since(acked) > 60*time.Second {
				b.Fatalf("root never correct: %+v", p)
			}
			pollPause()
		}
		lat = append(lat, time.Since(acked))
		// The root's hourly and daily summaries have the tick (the watcher writes them when
		// the stream goes quiet, at most MaxTierDelay later).
		for !rootSummarized(b, e.db, project, at) {
			if time.Since(acked) > 60*time.Second {
				b.Fatal("the root's summaries never had the tick")
			}
			pollPause()
		}
		tierLat = append(tierLat, time.Since(acked))
		testctx.WaitFor(b, "writes settle", func() bool { return w.Stats().ParentWrites-before >= distinct })
		writes = append(writes, w.Stats().ParentWrites-before)
		tierWrites = append(tierWrites, w.Stats().TierWrites-tiersBefore)
	}
	b.StopTimer()
	slices.Sort(lat)
	p99 := lat[min(len(lat)-1, (len(lat)*99+99)/100-1)]
	b.ReportMetric(float64(p99.Milliseconds()), "p99-ms-root-correct")
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms-root-correct")
	b.ReportMetric(float64(slices.Max(writes)), "max-parent-writes/tick")
	b.ReportMetric(float64(distinct), "distinct-parents/tick")
	slices.Sort(tierLat)
	b.ReportMetric(float64(tierLat[len(tierLat)/2].Milliseconds()), "p50-ms-summaries")
	b.ReportMetric(float64(slices.Max(tierWrites)), "max-summary-writes/tick")
	fmt.Fprintf(os.Stderr, "%s N=%d submit times %v latencies %v writes %v\n", b.Name(), b.N, submitTimes, lat, writes)
	b.Logf("latencies %v; summaries %v; parent writes per tick %v (distinct parents %d); summary writes %v; stats %+v",
		lat, tierLat, writes, distinct, tierWrites, w.Stats())
	if err := r.stop(); err != nil {
		b.Fatal(err)
	}
}

type rootTotals struct{ online, reported int64 }

func rootDoc(b *testing.B, coll *mongo.Collection, project string, at time.Time) (rootTotals, bool) {
	raw, err := coll.FindOne(context.Background(), bson.D{
		{Key: store.FieldID, Value: project}, {Key: store.FieldType, Value: tree.TypeProject}, {Key: store.FieldTimestamp, Value: at},
	}).Raw()
	if err != nil {
		return rootTotals{}, false
	}
	on, _ := raw.Lookup(store.FieldOnline).AsInt64OK()
	rep, _ := raw.Lookup("reported").AsInt64OK()
	return rootTotals{on, rep}, true
}

// rootSummarized reports whether the root's hourly and daily summaries have tick at.
func rootSummarized(b *testing.B, db *mongo.Database, project string, at time.Time) bool {
	for _, t := range []store.Tier{store.Tier1h, store.Tier1d} {
		start := store.BucketStart(t, at)
		coll, _ := store.SummaryCollection(t)
		raw, err := db.Collection(coll).FindOne(context.Background(), store.KeyFilter(store.Key{ID: project, Type: tree.TypeProject, Tick: start})).Raw()
		if err != nil {
			return false
		}
		sum, err := store.DecodeSummary(t, raw)
		if err != nil {
			b.Fatal(err)
		}
		slot, _ := store.BucketSlot(t, start, at)
		if !sum.Ticks.Has(slot) {
			return false
		}
	}
	return true
}
