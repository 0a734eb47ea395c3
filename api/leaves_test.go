package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/tree"
)

// fakeTrees serves one tree for every tick of proj-a, or an error.
type fakeTrees struct {
	t   *tree.Tree
	err error
}

func (f fakeTrees) TreeAt(_ context.Context, project string, _ time.Time) (*tree.Tree, int, error) {
	if f.err != nil {
		return nil, 0, f.err
	}
	if project != "proj-a" {
		return nil, 0, nil
	}
	return f.t, 1, nil
}

func TestInteriorNodesRejected(t *testing.T) {
	tr, err := tree.Build("proj-a", []tree.Node{
		{ID: "root", Type: "project"},
		{ID: "g1", Type: "group", Parent: "root"},
		{ID: "s1", Type: "server", Parent: "g1"},
		{ID: "p1", Type: "process", Parent: "s1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		trees      TreeSource
		counts     string
		status     int
		field      string
		sinkCalled bool
	}{
		{"leaf", fakeTrees{t: tr}, `[{"id":"p1","type":"process","online":3}]`, http.StatusOK, "", true},
		{"unknown id is kept (an orphan)", fakeTrees{t: tr}, `[{"id":"p9","type":"process","online":3}]`, http.StatusOK, "", true},
		{"interior id under another type is a different key", fakeTrees{t: tr}, `[{"id":"s1","type":"process","online":3}]`, http.StatusOK, "", true},
		{"interior node", fakeTrees{t: tr}, `[{"id":"p1","type":"process","online":3},{"id":"s1","type":"server","online":9}]`, http.StatusBadRequest, "counts[1].id", false},
		{"the root", fakeTrees{t: tr}, `[{"id":"root","type":"project","online":9}]`, http.StatusBadRequest, "counts[0].id", false},
		{"no tree yet", fakeTrees{}, `[{"id":"s1","type":"server","online":9}]`, http.StatusOK, "", true},
		{"no tree source", nil, `[{"id":"s1","type":"server","online":9}]`, http.StatusOK, "", true},
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
			if tt.field != "" && (len(r.err.Errors) != 1 || r.err.Errors[0].Field != tt.field || !strings.Contains(r.err.Errors[0].Message, "interior node")) {
				t.Fatalf("errors = %+v, want one naming %s", r.err.Errors, tt.field)
			}
			if got := sink.numCalls() > 0; got != tt.sinkCalled {
				t.Fatalf("sink called = %v, want %v", got, tt.sinkCalled)
			}
		})
	}
}
