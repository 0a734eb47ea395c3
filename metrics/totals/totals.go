package totals

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// Defaults of Options.
const (
	// DefaultGrace is how long after a tick ends it counts as complete.
	DefaultGrace = 2 * time.Minute
	// DefaultInterval is the refresh period.
	DefaultInterval = 30 * time.Second
	// DefaultMaxProjects caps the projects exported.
	DefaultMaxProjects = 100
	// DefaultMaxGroups caps the groups exported per project.
	DefaultMaxGroups = 50
	// DefaultTimeout bounds one refresh.
	DefaultTimeout = 10 * time.Second
	// DefaultMinBackoff is the first retry delay after a failed refresh.
	DefaultMinBackoff = time.Second
)

// AllProjects in Options.GroupProjects exports the groups of every project.
const AllProjects = "*"

// maxInRoots bounds the root ids of one query on counts.
const maxInRoots = 1000

// Options configure a Reader; zero values take the defaults.
type Options struct {
	// Tick is the reporting period (default tree.DefaultTick).
	Tick time.Duration
	// Grace is how long after its end a tick counts as complete (default DefaultGrace; a
	// negative value means 0).
	Grace time.Duration
	// Interval is the time between two refreshes (default DefaultInterval).
	Interval time.Duration
	// MaxProjects caps the projects in a Snapshot: the first ones by name are kept, the
	// others counted in Snapshot.DroppedProjects (default DefaultMaxProjects).
	MaxProjects int
	// GroupProjects are the projects whose groups (the root's children) are exported too;
	// AllProjects opts every project in.
	GroupProjects []string
	// MaxGroups caps the groups of one project: the first ones by id are kept, the others
	// counted in Snapshot.DroppedGroups (default DefaultMaxGroups).
	MaxGroups int
	// Timeout bounds one refresh (default DefaultTimeout). It is enforced by cancelling,
	// not by a context deadline, so the driver retries a read at most once.
	Timeout time.Duration
	// MinBackoff is the delay before the first retry of a failed refresh; it doubles per
	// failure up to Interval, with jitter (default DefaultMinBackoff).
	MinBackoff time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Trees is where the trees come from (default: a treedb.Store of the Reader's own).
	// serve passes the Store its API and watcher load every project's tree from, so a tree is
	// read from the store once per process, not once more for the business metrics (at 1M
	// nodes that second read took longer than Timeout on a busy store, and was retried every
	// Interval).
	Trees *treedb.Store
}

func (o Options) withDefaults() Options {
	if o.Tick <= 0 {
		o.Tick = tree.DefaultTick
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	o.Grace = max(o.Grace, 0)
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.MaxProjects <= 0 {
		o.MaxProjects = DefaultMaxProjects
	}
	if o.MaxGroups <= 0 {
		o.MaxGroups = DefaultMaxGroups
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// LastCompleteTick returns the start of the latest tick that ended at least grace before
// now: AlignTick(now − grace − tick).
func LastCompleteTick(now time.Time, tick, grace time.Duration) time.Time {
	return tree.AlignTick(now.Add(-grace-tick), tick)
}

// Snapshot is what the last refreshes found.
type Snapshot struct {
	// Tick is the last complete tick of the last successful refresh (zero before one).
	Tick time.Time
	// Projects are the projects with a tree at Tick, by name, at most MaxProjects.
	Projects []Project
	// DroppedProjects counts the projects with a tree at Tick left out by MaxProjects.
	DroppedProjects int
	// DroppedGroups counts the groups of opted-in projects left out by MaxGroups.
	DroppedGroups int
	// Invalid counts root documents that could not be decoded (their projects are left out).
	Invalid int
	// Refreshes and Failures count the refreshes that succeeded and failed since New.
	Refreshes, Failures int64
	// LastSuccess is when the last successful refresh started (zero before one).
	LastSuccess time.Time
	// LastDuration is how long the last successful refresh took.
	LastDuration time.Duration
	// Stale says the last refresh failed, or none has succeeded yet: the values are the
	// last good ones.
	Stale bool
	// LastError is the error of the last failed refresh ("" after a success).
	LastError string
}

// Counts are a node's numbers at the tick.
type Counts struct {
	// Online is the node's total.
	Online int64
	// Reported and Expected are the leaves under the node that reported, and that the tree
	// has.
	Reported, Expected int64
}

// Completeness is Reported / Expected (0 when nothing is expected).
func (c Counts) Completeness() float64 {
	if c.Expected <= 0 {
		return 0
	}
	return float64(c.Reported) / float64(c.Expected)
}

// Project is one project's numbers at the tick.
type Project struct {
	// Name is the project.
	Name string
	// Counts are its root's; a tick without a root document has Online 0, Reported 0.
	Counts
	// Groups are its root's children, by id, at most MaxGroups, when the project is opted
	// in (Options.GroupProjects); nil otherwise.
	Groups []Group
}

// Group is one child of a project's root at the tick.
type Group struct {
	// ID is the child's node id.
	ID string
	// Counts are the child's; a child none of whose leaves reported has Online 0, Reported 0.
	Counts
}

// Reader refreshes the Snapshot. Create it with New, run it with Run.
type Reader struct {
	counts store.Counts
	trees  *treedb.Store
	opts   Options
	groups map[string]bool
	log    *zap.Logger

	refreshMu sync.Mutex           // one refresh at a time; guards roots and invalid
	roots     map[rootKey]rootInfo // (project, version) → its root, for the versions in use
	invalid   map[string]bool      // projects whose root document was invalid at the last refresh

	mu   sync.Mutex
	snap Snapshot
}

type rootKey struct {
	project string
	version int
}

// rootInfo is what a refresh needs of one tree version.
type rootInfo struct {
	id, typ string
	leaf    bool // the tree is its root alone: the root document is a leaf's
	leaves  int64
	groups  []groupInfo // by id
}

type groupInfo struct {
	id, typ string
	leaves  int64
}

// New returns a Reader of db's counts and trees. Its reads use db's read concern and
// preference.
func New(db *mongo.Database, opts Options, log *zap.Logger) *Reader {
	opts = opts.withDefaults()
	groups := make(map[string]bool, len(opts.GroupProjects))
	for _, p := range opts.GroupProjects {
		groups[p] = true
	}
	trees := opts.Trees
	if trees == nil {
		trees = treedb.New(db)
	}
	return &Reader{
		counts:  store.NewCounts(db),
		trees:   trees,
		opts:    opts,
		groups:  groups,
		log:     log,
		roots:   map[rootKey]rootInfo{},
		invalid: map[string]bool{},
		snap:    Snapshot{Stale: true},
	}
}

// Snapshot returns the last refreshes' results. It never touches the store.
func (r *Reader) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.snap
	s.Projects = slices.Clone(s.Projects) // the Groups slices are never modified after a refresh
	return s
}

// Run refreshes every Interval until ctx is done, retrying a failed refresh with backoff; it
// returns nil when ctx is done and never returns a store error.
func (r *Reader) Run(ctx context.Context) error {
	failures := 0
	var failedSince time.Time
	for {
		err := r.Refresh(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := r.opts.Interval
		switch {
		case err != nil:
			failures++
			wait = r.backoff(failures)
			if failures == 1 {
				failedSince = r.opts.Now()
				r.log.Warn("business metrics refresh failed: keeping the last values, marked stale",
					zap.Error(err), zap.Duration("retry_in", wait))
			} else {
				r.log.Debug("business metrics refresh failed again", zap.Error(err), zap.Int("failures", failures), zap.Duration("retry_in", wait))
			}
		case failures > 0:
			r.log.Info("business metrics refreshed again", zap.Int("failures", failures), zap.Duration("stale_for", r.opts.Now().Sub(failedSince)))
			failures = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// backoff returns the delay before the retry after n consecutive failures: MinBackoff
// doubled per failure, capped at Interval, of which a random half.
func (r *Reader) backoff(n int) time.Duration {
	d := r.opts.MinBackoff
	for i := 1; i < n && d < r.opts.Interval; i++ {
		d *= 2
	}
	d = min(d, r.opts.Interval)
	return d/2 + rand.N(d/2+1)
}

// Refresh reads the last complete tick's numbers once and updates the Snapshot: on success
// its values, on failure only its staleness and error. It is what Run calls; calls are
// serialized.
func (r *Reader) Refresh(ctx context.Context) error {
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	// A context without a deadline, cancelled by a timer: with a deadline the driver would
	// retry a failing read until the deadline instead of once.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := time.AfterFunc(r.opts.Timeout, cancel)
	defer timer.Stop()

	start := r.opts.Now()
	res, err := r.read(ctx, start)
	if err != nil && !timer.Stop() && ctx.Err() != nil {
		err = fmt.Errorf("refresh took longer than %s: %w", r.opts.Timeout, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.snap.Failures++
		r.snap.Stale = true
		r.snap.LastError = err.Error()
		return err
	}
	res.Refreshes, res.Failures = r.snap.Refreshes+1, r.snap.Failures
	res.LastSuccess, res.LastDuration = start, r.opts.Now().Sub(start)
	r.snap = res
	return nil
}

// read computes a Snapshot's values at now.
func (r *Reader) read(ctx context.Context, now time.Time) (Snapshot, error) {
	tick := LastCompleteTick(now, r.opts.Tick, r.opts.Grace)
	s := Snapshot{Tick: tick}
	names, err := r.trees.Projects(ctx)
	if err != nil {
		return s, err
	}
	versions, err := r.trees.VersionsAt(ctx, names, tick)
	if err != nil {
		return s, err
	}
	projects := make([]string, 0, len(versions))
	for p := range versions {
		projects = append(projects, p)
	}
	slices.Sort(projects)
	if len(projects) > r.opts.MaxProjects {
		s.DroppedProjects = len(projects) - r.opts.MaxProjects
		projects = projects[:r.opts.MaxProjects]
	}
	infos := make([]rootInfo, len(projects))
	used := make(map[rootKey]bool, len(projects))
	for i, p := range projects {
		k := rootKey{p, versions[p].Version}
		if infos[i], err = r.root(ctx, k); err != nil {
			return s, err
		}
		used[k] = true
	}
	for k := range r.roots {
		if !used[k] {
			delete(r.roots, k) // versions no longer effective: the cache stays bounded
		}
	}
	docs, err := r.rootDocs(ctx, infos, tick)
	if err != nil {
		return s, err
	}
	invalid := map[string]bool{}
	for i, p := range projects {
		info := infos[i]
		proj, err := r.project(p, info, docs[nodeKey(info.id, info.typ)])
		if err != nil {
			s.Invalid++
			invalid[p] = true
			if !r.invalid[p] { // once, not at every refresh
				r.log.Warn("root document not exported", zap.String("project", p), zap.Time("tick", tick), zap.Error(err))
			}
			continue
		}
		if (r.groups[p] || r.groups[AllProjects]) && len(proj.Groups) > r.opts.MaxGroups {
			s.DroppedGroups += len(proj.Groups) - r.opts.MaxGroups
			proj.Groups = proj.Groups[:r.opts.MaxGroups]
		}
		s.Projects = append(s.Projects, proj)
	}
	r.invalid = invalid
	return s, nil
}

// root returns the root of a tree version, loading the tree the first time.
func (r *Reader) root(ctx context.Context, k rootKey) (rootInfo, error) {
	if info, ok := r.roots[k]; ok {
		return info, nil
	}
	t, err := r.trees.Load(ctx, k.project, k.version)
	if err != nil {
		return rootInfo{}, err
	}
	root := t.Root()
	info := rootInfo{id: root.ID, typ: root.Type, leaf: t.IsLeaf(root.ID), leaves: int64(t.LeafCount(root.ID))}
	for _, c := range t.Children(root.ID) {
		info.groups = append(info.groups, groupInfo{id: c.ID, typ: c.Type, leaves: int64(t.LeafCount(c.ID))})
	}
	slices.SortFunc(info.groups, func(a, b groupInfo) int { return cmp.Compare(a.id, b.id) })
	r.roots[k] = info
	return info, nil
}

func nodeKey(id, typ string) string { return id + "\x00" + typ }

// rootDocs reads the documents of the roots at tick through the unique {id, type, timestamp}
// index: one query per maxInRoots roots.
func (r *Reader) rootDocs(ctx context.Context, infos []rootInfo, tick time.Time) (map[string]bson.Raw, error) {
	out := make(map[string]bson.Raw, len(infos))
	for chunk := range slices.Chunk(infos, maxInRoots) {
		keys := make([]store.Key, len(chunk))
		for i, in := range chunk {
			keys[i] = store.Key{ID: in.id, Type: in.typ, Tick: tick}
		}
		docs, err := r.counts.ByKeys(ctx, keys)
		if err != nil {
			return nil, fmt.Errorf("read root documents: %w", err)
		}
		for k, doc := range docs {
			out[nodeKey(k.ID, k.Type)] = doc
		}
	}
	return out, nil
}

// errLeafDoc marks a root-alone tree's document that is not a leaf document.
var errLeafDoc = errors.New("leaf document")

// project returns the numbers of project p from its root's document (nil: none at the tick).
func (r *Reader) project(p string, info rootInfo, doc bson.Raw) (Project, error) {
	proj := Project{Name: p, Counts: Counts{Expected: info.leaves}}
	var children map[string]rollup.ChildState
	switch {
	case doc == nil:
	case info.leaf:
		online, ok := store.Count(doc.Lookup(store.FieldOnline))
		if !ok {
			return proj, fmt.Errorf("%w: field %s is not an integer", errLeafDoc, store.FieldOnline)
		}
		proj.Online, proj.Reported = online, 1
	default:
		parent, err := store.DecodeParent(doc)
		if err != nil {
			return proj, err
		}
		// As stored: a document computed with another tree version keeps its own expectation.
		proj.Counts = Counts{Online: parent.Online, Reported: parent.Reported, Expected: parent.Expected}
		children = parent.Children
	}
	if !r.groups[p] && !r.groups[AllProjects] {
		return proj, nil
	}
	proj.Groups = make([]Group, 0, len(info.groups))
	for _, g := range info.groups {
		c := Counts{Expected: g.leaves}
		if st, ok := children[g.id]; ok && st.Type == g.typ {
			c = Counts{Online: st.Online, Reported: st.Reported, Expected: st.Expected}
		}
		proj.Groups = append(proj.Groups, Group{ID: g.id, Counts: c})
	}
	return proj, nil
}
