package api_test

import (
	"net/url"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// BenchmarkSeries30Days1h is GET .../series over HTTP for the root of a 100,000-leaf tree
// (10 groups × 100 servers × 100 processes), 30 days at a 1h step: 720 points from 720
// hourly summaries. The target is 50 ms per request warm (issue #14). The first request,
// which loads the tree version (101,011 nodes) into the server's cache, is reported as
// cold-ms.
func BenchmarkSeries30Days1h(b *testing.B) {
	benchSeries(b, 30, apiv1.Step1h, 720, 12*100_000)
}

// BenchmarkSeries365Days1d is BenchmarkSeries30Days1h for a year at a 1d step: 365 points
// from 365 daily summaries. The target is 50 ms per request warm.
func BenchmarkSeries365Days1d(b *testing.B) {
	benchSeries(b, 365, apiv1.Step1d, 365, 288*100_000)
}

// benchSeries writes a year of the root's hourly and daily summaries of a 100,000-leaf tree
// (every leaf reported at every tick; online varies by tick), as the watcher leaves them, and
// measures the series of the last days at step. Only the root's summaries are written: the
// series of a root at 1h or 1d reads nothing else.
func benchSeries(b *testing.B, days int, step string, points int, expected int64) {
	s := newReadStack(b, zap.NewNop())
	nodes := tree.Generate("bench", 10, 100, 100)
	from := rt0.Add(-365 * 24 * time.Hour)
	if _, err := s.trees.Import(s.ctx, "bench", nodes, from); err != nil {
		b.Fatal(err)
	}
	tr, err := tree.Build("bench", nodes)
	if err != nil {
		b.Fatal(err)
	}
	leaves := int64(tr.LeafCount("bench"))
	hours := map[time.Time]*rollup.Stats{}
	dayStats := map[time.Time]*rollup.Stats{}
	for tk := from; tk.Before(rt0); tk = tk.Add(rtick) {
		online := int64(10_000 + tk.Minute()*7 + tk.Hour()*100 + tk.YearDay())
		for _, t := range []store.Tier{store.Tier1h, store.Tier1d} {
			m := hours
			if t == store.Tier1d {
				m = dayStats
			}
			start := store.BucketStart(t, tk)
			st := m[start]
			if st == nil {
				st = &rollup.Stats{}
				m[start] = st
			}
			slot, _ := store.BucketSlot(t, start, tk)
			st.Add(slot, online, leaves, leaves)
		}
	}
	for t, m := range map[store.Tier]map[time.Time]*rollup.Stats{store.Tier1h: hours, store.Tier1d: dayStats} {
		coll, _ := store.SummaryCollection(t)
		models := make([]mongo.WriteModel, 0, len(m))
		for start, st := range m {
			sum := rollup.Summary{ID: "bench", Type: tree.TypeProject, Project: "bench", Start: start, Rev: 1, Stats: *st}
			models = append(models, mongo.NewUpdateOneModel().SetUpsert(true).
				SetFilter(store.KeyFilter(store.Key{ID: sum.ID, Type: sum.Type, Tick: start})).
				SetUpdate(store.SummaryUpdate(t, sum, start)))
		}
		if _, err := s.db.Collection(coll).BulkWrite(s.ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
			b.Fatal(err)
		}
	}
	tok := s.token(b, "bench", true)
	q := url.Values{"node": {"bench"}, "step": {step}, "agg": {apiv1.AggMean},
		"from": {rt0.Add(-time.Duration(days) * 24 * time.Hour).Format(time.RFC3339)}, "to": {rt0.Format(time.RFC3339)}}
	path := apiv1.ProjectsPath + "/bench" + apiv1.SeriesPath

	check := func() {
		var got apiv1.SeriesResponse
		s.getOK(b, tok, path, q, &got)
		if len(got.Points) != points || got.Tier != step || got.Points[0].Online == nil || !got.Points[0].Complete || got.Points[0].Expected != expected {
			b.Fatalf("series: %d points from %s, first %+v", len(got.Points), got.Tier, got.Points[0])
		}
	}
	start := time.Now()
	check()
	cold := time.Since(start)
	b.ResetTimer()
	for b.Loop() {
		check()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	b.ReportMetric(float64(cold.Microseconds())/1000, "cold-ms")
}

// BenchmarkTree100k is GET .../tree over HTTP at a tick where every leaf of a 100,000-leaf
// tree reported (100,000 leaf and 1,011 parent documents read, 101,011 nodes answered).
func BenchmarkTree100k(b *testing.B) {
	s := newReadStack(b, zap.NewNop())
	w := newWorld("big")
	w.importTree(b, s, tree.Generate("big", 10, 100, 100), rt0)
	for i, leaf := range w.at(rt0).tree.Leaves() {
		w.set(rt0, leaf.ID, int64(i%7))
	}
	w.write(b, s)
	tok := s.token(b, "big", true)
	path := apiv1.ProjectsPath + "/big" + apiv1.TreePath
	check := func() {
		var got apiv1.TreeResponse
		s.getOK(b, tok, path, url.Values{"tick": {rt0.Format(time.RFC3339)}}, &got)
		if len(got.Nodes) != 101_011 || got.Nodes[0].Reported != 100_000 {
			b.Fatalf("tree: %d nodes, root %+v", len(got.Nodes), got.Nodes[0])
		}
	}
	start := time.Now()
	check()
	cold := time.Since(start)
	b.ResetTimer()
	for b.Loop() {
		check()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	b.ReportMetric(float64(cold.Microseconds())/1000, "cold-ms")
}
