package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// fakeTrees serves a fixed snapshot, or an error.
type fakeTrees struct {
	snap *treedb.Snapshot
	err  error
}

func (f fakeTrees) Snapshot(context.Context) (*treedb.Snapshot, error) { return f.snap, f.err }

func TestTreeChecks(t *testing.T) {
	tr, err := tree.Build("proj-a", []tree.Node{
		{ID: "root", Type: "project"},
		{ID: "g1", Type: "group", Parent: "root"},
		{ID: "s1", Type: "server", Parent: "g1"},
		{ID: "p1", Type: "process", Parent: "s1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	other, err := tree.Build("proj-b", []tree.Node{{ID: "b-root", Type: "project"}, {ID: "b1", Type: "process", Parent: "b-root"}})
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Date(2024, 5, 1, 10, 5, 0, 0, time.UTC) // reqBody's
	both := fakeTrees{snap: treedb.SnapshotOf(tick, tr, other)}
	onlyB := fakeTrees{snap: treedb.SnapshotOf(tick, other)}
	later := fakeTrees{snap: treedb.SnapshotOf(tick.Add(5*time.Minute), tr, other)}
	tests := []struct {
		name       string
		trees      TreeIndex
		counts     string
		status     int
		field      string
		sinkCalled bool
	}{
		{"leaf", both, `[{"id":"p1","type":"process","online":3}]`, http.StatusOK, "", true},
		{"unknown id is kept (an orphan)", both, `[{"id":"p9","type":"process","online":3}]`, http.StatusOK, "", true},
		{"interior id under another type is refused on its own", both, `[{"id":"s1","type":"process","online":3}]`, http.StatusOK, "", false},
		{"leaf id under another type is refused on its own", both, `[{"id":"p1","type":"server","online":3},{"id":"p9","type":"process","online":1}]`, http.StatusOK, "", true},
		{"interior node", both, `[{"id":"p1","type":"process","online":3},{"id":"s1","type":"server","online":9}]`, http.StatusBadRequest, "counts[1].id", false},
		{"the root", both, `[{"id":"root","type":"project","online":9}]`, http.StatusBadRequest, "counts[0].id", false},
		{"another project's leaf", both, `[{"id":"p1","type":"process","online":3},{"id":"b1","type":"process","online":999}]`, http.StatusForbidden, "counts[1].id", false},
		{"another project's leaf under another type", both, `[{"id":"b1","type":"server","online":9}]`, http.StatusForbidden, "counts[0].id", false},
		{"another project's root", both, `[{"id":"b-root","type":"project","online":9}]`, http.StatusForbidden, "counts[0].id", false},
		{"another project's leaf, no own tree", onlyB, `[{"id":"b1","type":"process","online":9}]`, http.StatusForbidden, "counts[0].id", false},
		{"no tree yet at this tick", later, `[{"id":"s1","type":"server","online":9},{"id":"b1","type":"process","online":9}]`, http.StatusOK, "", true},
		{"no tree index", nil, `[{"id":"s1","type":"server","online":9}]`, http.StatusOK, "", true},
		{"tree lookup fails", fakeTrees{err: errors.New("store down")}, `[{"id":"p1","type":"process","online":3}]`, http.StatusServiceUnavailable, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &fakeSink{}
			cfg := testConfig(t, sink)
			cfg.Trees = tt.trees
			r := post(t, newServer(cfg, newFakeTokens()), tokenA, strings.NewReader(reqBody(tt.counts)))
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.raw)
			}
			want := "interior node"
			if tt.status == http.StatusForbidden {
				want = "another project's tree"
			}
			if tt.field != "" && (len(r.err.Errors) != 1 || r.err.Errors[0].Field != tt.field || !strings.Contains(r.err.Errors[0].Message, want)) {
				t.Fatalf("errors = %+v, want one naming %s: %q", r.err.Errors, tt.field, want)
			}
			if strings.Contains(r.raw, "proj-b") {
				t.Fatalf("the answer names the other project: %s", r.raw)
			}
			if got := sink.numCalls() > 0; got != tt.sinkCalled {
				t.Fatalf("sink called = %v, want %v", got, tt.sinkCalled)
			}
			checkMismatches(t, tt.counts, r, sink, tt.trees == both)
		})
	}
}

// checkMismatches asserts that, in a 200 answer to counts against TestTreeChecks' tree, an
// item whose id is a tree node of another type is rejected naming the tree's type and was
// not written, and every other item was written and applied.
func checkMismatches(t *testing.T, counts string, r result, sink *fakeSink, ownTree bool) {
	t.Helper()
	if r.status != http.StatusOK {
		return
	}
	treeType := map[string]string{"root": "project", "g1": "group", "s1": "server", "p1": "process"}
	var items []struct{ ID, Type string }
	if err := json.Unmarshal([]byte(counts), &items); err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, call := range sink.calls {
		for _, it := range call {
			written[it.ID+"/"+it.Type] = true
		}
	}
	if len(r.ok.Items) != len(items) {
		t.Fatalf("%d item results for %d items", len(r.ok.Items), len(items))
	}
	for i, it := range items {
		got := r.ok.Items[i]
		typ, inTree := treeType[it.ID]
		if inTree && typ != it.Type && ownTree {
			if got.Status != apiv1.StatusRejected || !strings.Contains(got.Error, "is a "+typ+" in the project's tree") {
				t.Errorf("item %d (%s as %s): %s %q, want rejected naming %s", i, it.ID, it.Type, got.Status, got.Error, typ)
			}
			if written[it.ID+"/"+it.Type] {
				t.Errorf("item %d (%s as %s) was written", i, it.ID, it.Type)
			}
			continue
		}
		if got.Status != apiv1.StatusApplied || got.Index != i || got.ID != it.ID || !written[it.ID+"/"+it.Type] {
			t.Errorf("item %d (%s as %s): %+v, written %v; want applied and written", i, it.ID, it.Type, got, written[it.ID+"/"+it.Type])
		}
	}
}

// BenchmarkCheckLeaves1M is the ingest check of a 100-leaf request (one server's processes)
// against the project's 1,010,201-node tree: per item, one lookup of the id in the tree (and
// the deployment's owner index only for ids the tree does not hold).
func BenchmarkCheckLeaves1M(b *testing.B) {
	nodes := tree.Generate("big", 200, 50, 100)
	tr, err := tree.Build("big", nodes)
	if err != nil {
		b.Fatal(err)
	}
	tick := time.Date(2024, 5, 1, 10, 5, 0, 0, time.UTC)
	srv := newServer(Config{Sink: &fakeSink{}, Trees: fakeTrees{snap: treedb.SnapshotOf(tick, tr)}}, newFakeTokens())
	leaves := tr.Leaves()
	subs := make([]*submission, 0, 1000)
	for s := range 1000 {
		sub := &submission{project: "big", timestamp: tick}
		for _, l := range leaves[s*1000 : s*1000+100] { // a server's processes, servers far apart
			sub.items = append(sub.items, bulk.Item{Key: bulk.Key{ID: l.ID, Type: l.Type, Timestamp: tick}, Project: "big"})
		}
		subs = append(subs, sub)
	}
	ctx := context.Background()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if herr := srv.checkLeaves(ctx, subs[i%len(subs)]); herr != nil {
			b.Fatal(herr.body.Message)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/item")
}
