package treedbtest

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// Trees holds tree versions in memory. Its zero value is ready to use; it is safe for
// concurrent use.
type Trees struct {
	mu       sync.Mutex
	versions map[string][]version
}

var _ treedb.TreeSource = (*Trees)(nil)

type version struct {
	from time.Time
	tr   *tree.Tree
	v    int
}

// Add builds nodes as the next version of project, effective from from, and returns the tree
// and its version number (t fails on a tree that does not build).
func (s *Trees) Add(t testing.TB, project string, from time.Time, nodes []tree.Node) (*tree.Tree, int) {
	t.Helper()
	tr, err := tree.Build(project, nodes)
	if err != nil {
		t.Fatalf("build tree: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.versions == nil {
		s.versions = map[string][]version{}
	}
	vs := s.versions[project]
	v := len(vs) + 1
	vs = append(vs, version{from: from, tr: tr, v: v})
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].from.Before(vs[j].from) })
	s.versions[project] = vs
	return tr, v
}

// TreeAt returns the version of project's tree in effect at at (nil when none is).
func (s *Trees) TreeAt(_ context.Context, project string, at time.Time) (*tree.Tree, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best *version
	for i := range s.versions[project] {
		tv := &s.versions[project][i]
		if !tv.from.After(at) && (best == nil || !tv.from.Before(best.from)) {
			best = tv
		}
	}
	if best == nil {
		return nil, 0, nil
	}
	return best.tr, best.v, nil
}
