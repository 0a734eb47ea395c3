package treedb

import (
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/tree"
)

var benchProjects = flag.Int("treedb.projects", 1000, "projects BenchmarkImportManyProjects imports")

// projectNodes is tree.Generate with every id but the root's prefixed by the project, so the
// trees of different projects share no id.
func projectNodes(project string, groups, servers, processes int) []tree.Node {
	nodes := tree.Generate(project, groups, servers, processes)
	for i := range nodes {
		if nodes[i].ID != project {
			nodes[i].ID = project + "-" + nodes[i].ID
		}
		if nodes[i].Parent != "" && nodes[i].Parent != project {
			nodes[i].Parent = project + "-" + nodes[i].Parent
		}
	}
	return nodes
}

// BenchmarkImportManyProjects imports -treedb.projects trees of 1,012 nodes (1 group, 10
// servers, 100 processes: the shape `rollup-bench scale --leaves 1000` gives each project),
// each into its own project, through one Store into a fresh database with treedb's indexes
// (as the migrations build them). It reports the first import (first-ms), the median of the
// last 10 (last10-ms: each checks its ids against every other project) and the median of 3
// more imports each through a fresh Store (fresh-ms: what a separate `rollup tree import`
// process pays, with no tree cached).
func BenchmarkImportManyProjects(b *testing.B) {
	n := *benchProjects
	if n < 10 {
		b.Fatalf("-treedb.projects %d: want at least 10", n)
	}
	srv := embeddedtest.Start(b)
	client := srv.Client(b)
	ctx := testctx.Context(b)
	name := func(i int) string { return fmt.Sprintf("p%04d", i) }
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	median := func(ds []time.Duration) time.Duration { return slices.Sorted(slices.Values(ds))[len(ds)/2] }
	var first, last10, fresh []time.Duration
	for range b.N {
		b.StopTimer()
		db := srv.Database(b, client)
		for _, ix := range Indexes() {
			if _, err := db.Collection(ix.Collection).Indexes().CreateOne(ctx, ix.Model()); err != nil {
				b.Fatal(err)
			}
		}
		s := New(db)
		b.StartTimer()
		var took []time.Duration
		for i := range n {
			nodes := projectNodes(name(i), 1, 10, 100)
			start := time.Now()
			if _, err := s.Import(ctx, name(i), nodes, t0); err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(start))
		}
		first = append(first, took[0])
		last10 = append(last10, median(took[n-10:]))
		var sep []time.Duration
		for i := n; i < n+3; i++ {
			nodes := projectNodes(name(i), 1, 10, 100)
			start := time.Now()
			if _, err := New(db).Import(ctx, name(i), nodes, t0); err != nil {
				b.Fatal(err)
			}
			sep = append(sep, time.Since(start))
		}
		fresh = append(fresh, median(sep))
	}
	b.ReportMetric(ms(median(first)), "first-ms")
	b.ReportMetric(ms(median(last10)), "last10-ms")
	b.ReportMetric(ms(median(fresh)), "fresh-ms")
}
