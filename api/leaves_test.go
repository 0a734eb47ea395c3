package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

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
		{"interior id under another type is a different key", both, `[{"id":"s1","type":"process","online":3}]`, http.StatusOK, "", true},
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
		})
	}
}
