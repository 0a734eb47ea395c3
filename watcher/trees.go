package watcher

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gameops/rollup/tree"
)

// TreeSource gives the tree version in effect at a tick: the one with the largest
// effective_from <= tick. It returns a nil tree (and no error) when the project has no tree
// for that tick; every leaf of it is then an orphan.
type TreeSource interface {
	TreeAt(ctx context.Context, project string, tick time.Time) (*tree.Tree, int, error)
}

// TreeStore is what TreeCache reads: tree/treedb's Store.
type TreeStore interface {
	// VersionAt returns the version in effect at tick; ok is false when there is none.
	VersionAt(ctx context.Context, project string, tick time.Time) (version int, effectiveFrom time.Time, ok bool, err error)
	// Load returns one version of a project's tree.
	Load(ctx context.Context, project string, version int) (*tree.Tree, error)
}

// TreeCache is a TreeSource over a TreeStore. Tree versions are immutable, so loaded trees are
// kept by (project, version) forever; which version applies to a tick is asked of the store
// on every call (one small indexed query), so an import is seen by the next batch. The watcher
// calls TreeAt once per (project, tick) of a batch, not per event.
type TreeCache struct {
	store TreeStore
	mu    sync.Mutex
	trees map[treeKey]*tree.Tree
}

type treeKey struct {
	project string
	version int
}

var _ TreeSource = (*TreeCache)(nil)

// NewTreeCache returns a cache over store.
func NewTreeCache(store TreeStore) *TreeCache {
	return &TreeCache{store: store, trees: map[treeKey]*tree.Tree{}}
}

// TreeAt implements TreeSource.
func (c *TreeCache) TreeAt(ctx context.Context, project string, tick time.Time) (*tree.Tree, int, error) {
	v, _, ok, err := c.store.VersionAt(ctx, project, tick)
	if err != nil {
		return nil, 0, fmt.Errorf("tree version of %s at %s: %w", project, tick.Format(time.RFC3339), err)
	}
	if !ok {
		return nil, 0, nil
	}
	k := treeKey{project, v}
	c.mu.Lock()
	t := c.trees[k]
	c.mu.Unlock()
	if t != nil {
		return t, v, nil
	}
	t, err = c.store.Load(ctx, project, v)
	if err != nil {
		return nil, 0, fmt.Errorf("load tree %s/%d: %w", project, v, err)
	}
	c.mu.Lock()
	c.trees[k] = t
	c.mu.Unlock()
	return t, v, nil
}
