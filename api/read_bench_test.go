package api_test

import (
	"net/url"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// BenchmarkSeries30Days1h is GET .../series over HTTP for the root of a 100,000-leaf tree
// (10 groups × 100 servers × 100 processes), 30 days at a 1h step (720 points from 8,640
// root documents, each with its 10 children). The target is 200 ms per request. Only the
// root's documents are written: the series never reads anything else. The first request,
// which loads the tree version (101,011 nodes) into the server's cache, is reported as
// cold-ms.
func BenchmarkSeries30Days1h(b *testing.B) {
	s := newReadStack(b, zap.NewNop())
	nodes := tree.Generate("bench", 10, 100, 100)
	from := rt0.Add(-30 * 24 * time.Hour)
	if _, err := s.trees.Import(s.ctx, "bench", nodes, from); err != nil {
		b.Fatal(err)
	}
	tr, err := tree.Build("bench", nodes)
	if err != nil {
		b.Fatal(err)
	}
	models := make([]mongo.WriteModel, 0, 30*288)
	for tk := from; tk.Before(rt0); tk = tk.Add(rtick) {
		p := rollup.Parent{ID: "bench", Type: tree.TypeProject, Project: "bench", Timestamp: tk, Rev: 1, TreeVersion: 1,
			Expected: int64(tr.LeafCount("bench")), Children: map[string]rollup.ChildState{}}
		for i, g := range tr.Children("bench") {
			st := rollup.ChildState{Type: g.Type, Online: int64(1000 + i + tk.Minute()), Version: 1, Reported: 10_000, Expected: 10_000}
			p.Children[g.ID] = st
			p.Online += st.Online
			p.Reported += st.Reported
		}
		models = append(models, mongo.NewUpdateOneModel().SetUpsert(true).
			SetFilter(bson.D{{Key: "id", Value: p.ID}, {Key: "type", Value: p.Type}, {Key: "timestamp", Value: tk}}).
			SetUpdate(store.ParentUpdate(p, tk)))
	}
	if _, err := s.db.Collection(store.CountsCollection).BulkWrite(s.ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
		b.Fatal(err)
	}
	tok := s.token(b, "bench", true)
	q := url.Values{"node": {"bench"}, "step": {apiv1.Step1h}, "agg": {apiv1.AggMean},
		"from": {from.Format(time.RFC3339)}, "to": {rt0.Format(time.RFC3339)}}
	path := apiv1.ProjectsPath + "/bench" + apiv1.SeriesPath

	check := func() {
		var got apiv1.SeriesResponse
		s.getOK(b, tok, path, q, &got)
		if len(got.Points) != 720 || got.Points[0].Online == nil || !got.Points[0].Complete || got.Points[0].Expected != 12*100_000 {
			b.Fatalf("series: %d points, first %+v", len(got.Points), got.Points[0])
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
