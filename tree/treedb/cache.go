package treedb

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gameops/rollup/tree"
)

// TreeSource gives the tree version in effect at a tick: the one with the largest
// effective_from <= tick. It returns a nil tree (and no error) when the project has no tree
// for that tick; every leaf of it is then an orphan. A *Cache is one; tests use static ones.
type TreeSource interface {
	TreeAt(ctx context.Context, project string, tick time.Time) (*tree.Tree, int, error)
}

// Versions is what a Cache reads: a *Store.
type Versions interface {
	// VersionAt returns the version in effect at tick; ok is false when there is none.
	VersionAt(ctx context.Context, project string, tick time.Time) (version int, effectiveFrom time.Time, ok bool, err error)
	// Load returns one version of a project's tree.
	Load(ctx context.Context, project string, version int) (*tree.Tree, error)
}

var _ Versions = (*Store)(nil)

// Cache is a TreeSource over a Store. Tree versions are immutable, so loaded trees are kept by
// (project, version) for as long as the Cache lives (the Store's own cache is bounded by
// nodes); which version applies to a tick is asked of the store on every call (one small
// indexed query), so an import is seen by the next call. The watcher calls TreeAt once per
// (project, tick) of a burst, not per event, and TreesAt once per tick of a burst of several
// projects. It is safe for concurrent use.
type Cache struct {
	store Versions
	mu    sync.Mutex
	trees map[cacheKey]*tree.Tree
}

var _ TreeSource = (*Cache)(nil)

// NewCache returns a cache over s.
func NewCache(s Versions) *Cache {
	return &Cache{store: s, trees: map[cacheKey]*tree.Tree{}}
}

// TreeAt implements TreeSource.
func (c *Cache) TreeAt(ctx context.Context, project string, tick time.Time) (*tree.Tree, int, error) {
	v, _, ok, err := c.store.VersionAt(ctx, project, tick)
	if err != nil {
		return nil, 0, fmt.Errorf("tree version of %s at %s: %w", project, tick.Format(time.RFC3339), err)
	}
	if !ok {
		return nil, 0, nil
	}
	k := cacheKey{project, v}
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

// TreeVersion is a tree and its version number.
type TreeVersion struct {
	Tree    *tree.Tree
	Version int
}

// BatchTreeSource is a TreeSource that also answers for many projects at one tick at once:
// a burst of leaves of 1,000 projects asks for their trees with one query, not 1,000.
type BatchTreeSource interface {
	TreeSource
	// TreesAt returns the tree of each of projects at tick; projects without one are absent.
	TreesAt(ctx context.Context, tick time.Time, projects []string) (map[string]TreeVersion, error)
}

var _ BatchTreeSource = (*Cache)(nil)

// versionsAt is what a Store answers for many projects (Store.VersionsAt).
type versionsAt interface {
	VersionsAt(ctx context.Context, projects []string, tick time.Time) (map[string]Version, error)
}

// TreesAt implements BatchTreeSource: one VersionsAt query (per 1,000 projects) when the
// Versions is a Store, else TreeAt per project; trees load as in TreeAt.
func (c *Cache) TreesAt(ctx context.Context, tick time.Time, projects []string) (map[string]TreeVersion, error) {
	out := make(map[string]TreeVersion, len(projects))
	va, ok := c.store.(versionsAt)
	if !ok {
		for _, p := range projects {
			t, v, err := c.TreeAt(ctx, p, tick)
			if err != nil {
				return nil, err
			}
			if t != nil {
				out[p] = TreeVersion{t, v}
			}
		}
		return out, nil
	}
	vs, err := va.VersionsAt(ctx, projects, tick)
	if err != nil {
		return nil, fmt.Errorf("tree versions of %d projects at %s: %w", len(projects), tick.Format(time.RFC3339), err)
	}
	for p, v := range vs {
		k := cacheKey{p, v.Version}
		c.mu.Lock()
		t := c.trees[k]
		c.mu.Unlock()
		if t == nil {
			if t, err = c.store.Load(ctx, p, v.Version); err != nil {
				return nil, fmt.Errorf("load tree %s/%d: %w", p, v.Version, err)
			}
			c.mu.Lock()
			c.trees[k] = t
			c.mu.Unlock()
		}
		out[p] = TreeVersion{t, v.Version}
	}
	return out, nil
}
