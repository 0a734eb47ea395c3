package treedb

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/tree"
)

// Defaults of DirectoryOptions.
const (
	DefaultDirectoryMaxAge = 5 * time.Second
	// DefaultDirectoryWindow covers the API's default 24h late window, with a margin.
	DefaultDirectoryWindow = 25 * time.Hour
)

// DirectoryOptions tune a Directory. Zero fields take their defaults.
type DirectoryOptions struct {
	// MaxAge is how old a snapshot may be before the next Snapshot call refreshes it (default
	// 5s): an import is seen within about this long.
	MaxAge time.Duration
	// Window is how far back from now the snapshot's ticks reach (default 25h); older ticks
	// are not covered (Snapshot.TreeAt reports it).
	Window time.Duration
}

// Directory answers, from memory, which tree version of a project applies to a tick and
// which project's tree holds a node id at a tick, over every project of the deployment: the
// versions that apply to ticks from now − Window on, loaded once (versions are immutable). It
// refreshes itself from the trees collection (one query of the versions' metadata, plus a
// load of each new version) at most once per MaxAge, inside the Snapshot call that finds it
// stale; concurrent callers keep using the previous snapshot meanwhile. It is safe for
// concurrent use.
type Directory struct {
	store *Store
	opts  DirectoryOptions
	now   func() time.Time

	mu      sync.Mutex
	snap    *Snapshot
	loading *dirLoad  // the refresh in progress
	tried   time.Time // when the last refresh began
}

type dirLoad struct {
	done chan struct{}
	snap *Snapshot
	err  error
}

// NewDirectory returns a directory over s.
func NewDirectory(s *Store, opts DirectoryOptions) *Directory {
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultDirectoryMaxAge
	}
	if opts.Window <= 0 {
		opts.Window = DefaultDirectoryWindow
	}
	return &Directory{store: s, opts: opts, now: time.Now}
}

// Snapshot returns the current view. The first call, and the first after MaxAge, refresh it;
// a cold directory makes every caller wait for its first load. A failed refresh keeps the
// previous snapshot (the next try is MaxAge later) and returns the error only when there is
// none.
func (d *Directory) Snapshot(ctx context.Context) (*Snapshot, error) {
	d.mu.Lock()
	snap, now := d.snap, d.now()
	if snap != nil && (now.Sub(d.tried) < d.opts.MaxAge || d.loading != nil) {
		d.mu.Unlock()
		return snap, nil
	}
	if call := d.loading; call != nil { // cold: wait for the first load
		d.mu.Unlock()
		select {
		case <-call.done:
			return call.snap, call.err
		case <-ctx.Done():
			return nil, fmt.Errorf("tree directory: %w", ctx.Err())
		}
	}
	call := &dirLoad{done: make(chan struct{})}
	d.loading, d.tried = call, now
	d.mu.Unlock()

	next, err := d.load(ctx, snap, now)
	d.mu.Lock()
	d.loading = nil
	if err == nil {
		d.snap = next
	}
	call.snap, call.err = d.snap, err
	if d.snap != nil {
		call.err = nil // a previous snapshot serves
	}
	d.mu.Unlock()
	close(call.done)
	return call.snap, call.err
}

// load reads every version's metadata and builds the snapshot of the ticks from now − Window,
// reusing prev's trees.
func (d *Directory) load(ctx context.Context, prev *Snapshot, now time.Time) (*Snapshot, error) {
	all, err := d.store.AllVersions(ctx)
	if err != nil {
		return nil, fmt.Errorf("tree directory: %w", err)
	}
	from := tree.AlignTick(now.Add(-d.opts.Window), tree.DefaultTick)
	byProject := map[string][]Version{}
	for _, v := range all {
		byProject[v.Project] = append(byProject[v.Project], v)
	}
	s := &Snapshot{from: from, versions: map[string][]Version{}, trees: map[cacheKey]*tree.Tree{}}
	for project, vs := range byProject {
		live := liveVersions(vs, from)
		s.versions[project] = live
		for _, v := range live {
			k := cacheKey{project, v.Version}
			t := prev.tree(k)
			if t == nil {
				if t, err = d.store.Load(ctx, project, v.Version); err != nil {
					return nil, fmt.Errorf("tree directory: %w", err)
				}
			}
			s.trees[k] = t
		}
	}
	if prev != nil && sameKeys(prev.trees, s.trees) {
		s.owners = prev.owners
	} else {
		s.owners = owners(s.trees)
	}
	return s, nil
}

// liveVersions returns the versions of one project that apply to some tick from from on, in
// effect order: the one in effect at from and every later-effective one, without those
// replaced by a larger version effective from the same tick.
func liveVersions(vs []Version, from time.Time) []Version {
	slices.SortFunc(vs, func(a, b Version) int {
		return cmp.Or(a.EffectiveFrom.Compare(b.EffectiveFrom), cmp.Compare(a.Version, b.Version))
	})
	var out []Version
	for i, v := range vs {
		if i+1 < len(vs) && vs[i+1].EffectiveFrom.Equal(v.EffectiveFrom) {
			continue // replaced from the same tick
		}
		if i+1 < len(vs) && !vs[i+1].EffectiveFrom.After(from) {
			continue // a later version is in effect at from already
		}
		out = append(out, v)
	}
	return out
}

func sameKeys(a, b map[cacheKey]*tree.Tree) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// owners indexes the node ids of trees.
func owners(trees map[cacheKey]*tree.Tree) map[string][]cacheKey {
	out := map[string][]cacheKey{}
	for k, t := range trees {
		for _, n := range t.Nodes() {
			out[n.ID] = append(out[n.ID], k)
		}
	}
	return out
}

// Snapshot is an immutable view of every project's tree versions that apply to ticks from a
// point on. Its methods are map reads; it is safe for concurrent use.
type Snapshot struct {
	from     time.Time
	versions map[string][]Version // per project, live versions in effect order
	trees    map[cacheKey]*tree.Tree
	owners   map[string][]cacheKey // node id → the live versions holding it
}

// SnapshotOf returns a snapshot in which each tree is version 1 of its project, in effect from
// effective on (a Directory without a store, for tests and tools).
func SnapshotOf(effective time.Time, trees ...*tree.Tree) *Snapshot {
	s := &Snapshot{versions: map[string][]Version{}, trees: map[cacheKey]*tree.Tree{}}
	for _, t := range trees {
		s.versions[t.Project()] = []Version{{Project: t.Project(), Version: 1, EffectiveFrom: effective.UTC(), Nodes: t.Len()}}
		s.trees[cacheKey{t.Project(), 1}] = t
	}
	s.owners = owners(s.trees)
	return s
}

func (s *Snapshot) tree(k cacheKey) *tree.Tree {
	if s == nil {
		return nil
	}
	return s.trees[k]
}

// Covers reports whether the snapshot knows the trees of tick (not before its window).
func (s *Snapshot) Covers(tick time.Time) bool { return !tick.Before(s.from) }

// versionAt returns the version of project in effect at tick (0 when none).
func (s *Snapshot) versionAt(project string, tick time.Time) int {
	vs := s.versions[project]
	// The last version effective at or before tick (vs is in effect order).
	i, _ := slices.BinarySearchFunc(vs, tick, func(v Version, t time.Time) int {
		if v.EffectiveFrom.After(t) {
			return 1
		}
		return -1
	})
	if i == 0 {
		return 0
	}
	return vs[i-1].Version
}

// TreeAt returns the tree of project in effect at tick and its version (nil and 0 when none);
// tick must be covered (Covers).
func (s *Snapshot) TreeAt(project string, tick time.Time) (*tree.Tree, int) {
	v := s.versionAt(project, tick)
	if v == 0 {
		return nil, 0
	}
	return s.trees[cacheKey{project, v}], v
}

// OtherOwner returns a project other than project whose tree in effect at tick holds node id,
// or "" when there is none; tick must be covered (Covers).
func (s *Snapshot) OtherOwner(project, id string, tick time.Time) string {
	for _, k := range s.owners[id] {
		if k.project != project && s.versionAt(k.project, tick) == k.version {
			return k.project
		}
	}
	return ""
}

// AllVersions returns every committed version of every project's tree, by project and
// version (the metadata only, not the nodes).
func (s *Store) AllVersions(ctx context.Context) ([]Version, error) {
	cur, err := s.db.Collection(TreesCollection).Find(ctx, bson.D{},
		options.Find().SetSort(bson.D{{Key: FieldProject, Value: 1}, {Key: FieldVersion, Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("list tree versions: %w", err)
	}
	var docs []treeDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("list tree versions: %w", err)
	}
	out := make([]Version, len(docs))
	for i, d := range docs {
		out[i] = d.version()
	}
	return out, nil
}
