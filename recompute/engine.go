package recompute

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/conc/pool"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.uber.org/zap"

	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// Options tune an Engine. Zero fields take their defaults.
type Options struct {
	// ChunkSize is the most parents read with one find and written with one BulkWrite
	// (default 100).
	ChunkSize int
	// Workers is how many chunks of one level are recomputed at once (default DefaultWorkers:
	// half the cores, 2 to 8; see store.WritesInFlightFor).
	Workers int
	// MaxConflicts bounds the re-reads of one chunk after conflicting or unknown-outcome
	// writes before the round fails (default 20).
	MaxConflicts int
	// ReplayChunk is the number of leaves recomputed together by LeavesWrittenSince (default
	// 10,000).
	ReplayChunk int
	// TierChunk is the most summary buckets read and written together by Summarize and the
	// replay (default 5,000): one find of the stored summaries, one of their sources and one
	// unordered BulkWrite.
	TierChunk int
	// TierWorkers is how many chunks of summaries are written at once (default 8).
	TierWorkers int
	// Knobs are test hooks (nil in production).
	Knobs *Knobs
}

// Knobs are the test hooks of the package.
type Knobs struct {
	// BeforeLevel is called before each level's writes; when it returns true the round is
	// abandoned as by a crash (ErrCrashed): nothing more is written.
	BeforeLevel func() bool
	// BeforeFencedWrite is called before each fenced BulkWrite of parents (to freeze a
	// leader); the summaries' writes, fenced the same way, do not call it.
	BeforeFencedWrite func()
	// BeforeTiers is called before Summarize writes; when it returns true Summarize is
	// abandoned as by a crash between the 5-minute writes and the summaries' (ErrCrashed).
	BeforeTiers func() bool
}

// Defaults of Options.
const (
	DefaultChunkSize    = 100
	DefaultMaxConflicts = 20
	DefaultReplayChunk  = 10_000
	DefaultTierChunk    = 5_000
	DefaultTierWorkers  = 8
)

// DefaultWorkers is the default of Options.Workers: store.DefaultWritesInFlight, half the
// cores Go runs on, 2 to 8.
func DefaultWorkers() int { return store.DefaultWritesInFlight() }

func (o Options) withDefaults() Options {
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers()
	}
	if o.MaxConflicts <= 0 {
		o.MaxConflicts = DefaultMaxConflicts
	}
	if o.ReplayChunk <= 0 {
		o.ReplayChunk = DefaultReplayChunk
	}
	if o.TierChunk <= 0 {
		o.TierChunk = DefaultTierChunk
	}
	if o.TierWorkers <= 0 {
		o.TierWorkers = DefaultTierWorkers
	}
	if o.Knobs == nil {
		o.Knobs = &Knobs{}
	}
	return o
}

// Stats are an Engine's counters since New (shared by its fenced copies).
type Stats struct {
	// Events is the number of leaves recomputed (Leaves and LeavesWrittenSince).
	Events int64
	// ParentWrites is the number of parent and root document writes sent (conflicting and
	// resent ones included).
	ParentWrites int64
	// Conflicts is the number of parent writes that lost the rev guard and were re-merged.
	Conflicts int64
	// Orphans is the number of leaves whose id is not a leaf of the tree version of their
	// tick (or has another type there, or whose project has no tree): excluded from totals.
	Orphans int64
	// Invalid is the number of documents skipped because they do not decode: leaves read by
	// LeavesWrittenSince or Replay, and documents at a parent's key that are not parents.
	Invalid int64
	// Fenced is the number of fenced writes refused because a newer lease term holds.
	Fenced int64
	// TierWrites is the number of hourly and daily summary writes sent (conflicting and resent
	// ones included); TierConflicts the number that lost the rev guard and were recomputed.
	TierWrites, TierConflicts int64
}

type counters struct {
	events, parentWrites, conflicts, orphans, invalid, fenced atomic.Int64
	tierWrites, tierConflicts                                 atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Events: c.events.Load(), ParentWrites: c.parentWrites.Load(), Conflicts: c.conflicts.Load(),
		Orphans: c.orphans.Load(), Invalid: c.invalid.Load(), Fenced: c.fenced.Load(),
		TierWrites: c.tierWrites.Load(), TierConflicts: c.tierConflicts.Load(),
	}
}

// Engine recomputes parents from contributions, level by level, with rev-guarded absolute
// writes: the part shared by the watcher's bursts, the replay of a lost window and Replay.
// It is safe for concurrent use.
type Engine struct {
	counts store.Counts // w:majority, j:true, read concern majority
	// tiers are the hourly and daily summaries, written and read like counts.
	tiers map[store.Tier]store.Summaries
	trees treedb.TreeSource
	opts  Options
	log   *zap.Logger
	stats *counters
	now   func() time.Time
	// fence, for a lease holder, fences its parent writes by its term (nil: unfenced).
	fence *Fence
}

// New returns an engine over db's counts collection and summaries. It writes parents and
// summaries with w:majority, j:true and reads them with read concern majority, whatever db's
// defaults.
func New(db *mongo.Database, trees treedb.TreeSource, opts Options, log *zap.Logger) *Engine {
	if log == nil {
		log = zap.NewNop()
	}
	tiers := map[store.Tier]store.Summaries{}
	for _, t := range []store.Tier{store.Tier1h, store.Tier1d} {
		tiers[t], _ = store.NewSummaries(db, t, store.Durable().SetReadConcern(readconcern.Majority()))
	}
	return &Engine{
		counts: store.NewCounts(db, store.Durable().SetReadConcern(readconcern.Majority())),
		tiers:  tiers,
		trees:  trees,
		opts:   opts.withDefaults(),
		log:    log,
		stats:  &counters{},
		now:    time.Now,
	}
}

// WithFence returns a copy of e whose parent writes carry f's term and stop with an error
// wrapping lease.ErrFenced once a newer term holds (nil f: unfenced), logging to log; it
// shares e's counters.
func (e *Engine) WithFence(f *Fence, log *zap.Logger) *Engine {
	c := *e
	c.fence = f
	if log != nil {
		c.log = log
	}
	return &c
}

// Stats returns the counters since New.
func (e *Engine) Stats() Stats { return e.stats.snapshot() }

// CountInvalid counts n documents the caller skipped because they do not decode.
func (e *Engine) CountInvalid(n int64) { e.stats.invalid.Add(n) }

// ErrCrashed is what a round abandoned by Knobs.BeforeLevel returns.
var ErrCrashed = errors.New("recompute: simulated crash")

// maxUnknown is how many unknown outcomes in a row writeChunk re-reads at once before it
// returns the error.
const maxUnknown = 1

// Leaves recomputes every ancestor of leaves, in one round: each dirty (parent, tick) is
// written at most once, deepest level first, plus conflict retries; then the hourly and
// daily summaries of those parents (Summarize). Leaves not in their tick's tree are counted
// as orphans and skipped.
func (e *Engine) Leaves(ctx context.Context, leaves []store.Leaf) error {
	d := NewDirty()
	if err := e.Parents(ctx, leaves, d); err != nil {
		return err
	}
	return e.Summarize(ctx, d)
}

// Parents is Leaves without the summaries: every parent it wrote or found current is added to
// d, whose summaries the caller brings up to date with Summarize before it considers the
// leaves done (the watcher: before its checkpoint moves past them).
func (e *Engine) Parents(ctx context.Context, leaves []store.Leaf, d *Dirty) error {
	r := newRound()
	r.summaries = d
	if err := e.addLeaves(ctx, r, leaves); err != nil {
		return err
	}
	if err := e.recompute(ctx, r); err != nil {
		return err
	}
	e.stats.events.Add(int64(len(leaves)))
	return nil
}

// pkey is one parent document to recompute: a node of a project's tree at a tick.
type pkey struct {
	project string
	id      string
	tick    time.Time
}

// dirtyParent is a parent to recompute and the contributions it received in this round.
type dirtyParent struct {
	tr    *tree.Tree
	tv    int
	node  tree.Node
	depth int
	in    []rollup.Contribution
}

// round is one recompute: the dirty parents of every level, filled from leaves first and then
// level by level from the parents written below.
type round struct {
	dirty map[pkey]*dirtyParent
	trees map[tickKey]tickTree
	// snapshot, for a rebuild (Replay), holds the parent documents read before the leaves;
	// nil for a merge.
	snapshot map[store.Key]bson.Raw
	// summaries collects the hour of every parent written or found current (nil: none).
	summaries *Dirty
	// stored, in a merge, holds the documents of every parent the round may write, read with
	// one find before the first level (readAncestors): the keys in read that stored lacks have
	// none. A level then needs no find of its own; a write that lost its guard re-reads.
	stored map[store.Key]bson.Raw
	read   map[store.Key]bool
}

type tickKey struct {
	project string
	tick    time.Time
}

type tickTree struct {
	tr *tree.Tree
	v  int
}

func newRound() *round {
	return &round{dirty: map[pkey]*dirtyParent{}, trees: map[tickKey]tickTree{}}
}

// treeAt returns the tree of (project, tick), asking the TreeSource once per round.
func (e *Engine) treeAt(ctx context.Context, r *round, project string, tick time.Time) (tickTree, error) {
	k := tickKey{project, tick}
	if tt, ok := r.trees[k]; ok {
		return tt, nil
	}
	tr, v, err := e.trees.TreeAt(ctx, project, tick)
	if err != nil {
		return tickTree{}, err
	}
	tt := tickTree{tr, v}
	r.trees[k] = tt
	return tt, nil
}

// prefetchTrees fills r's trees for every (project, tick) of leaves with one TreesAt call per
// tick when the TreeSource answers for many projects at once (a burst of 1,000 projects' leaves
// then costs one versions query, not 1,000); otherwise treeAt asks per (project, tick).
func (e *Engine) prefetchTrees(ctx context.Context, r *round, leaves []store.Leaf) error {
	if _, ok := e.trees.(treedb.BatchTreeSource); !ok {
		return nil // not worth collecting the burst's (project, tick)s
	}
	missing := map[time.Time][]string{}
	seen := map[tickKey]bool{}
	for _, l := range leaves {
		k := tickKey{l.Project, l.Tick}
		if _, ok := r.trees[k]; ok || seen[k] {
			continue
		}
		seen[k] = true
		missing[l.Tick] = append(missing[l.Tick], l.Project)
	}
	if len(seen) < 2 {
		return nil // one (project, tick): TreeAt is one query too
	}
	return e.treesByTick(ctx, missing, r.trees)
}

// treesByTick asks a BatchTreeSource for the trees of the projects of each tick of byTick, one
// TreesAt per tick, into trees (a project without a tree at the tick gets a nil one). It asks
// nothing of another TreeSource: its callers then ask TreeAt per (project, tick).
func (e *Engine) treesByTick(ctx context.Context, byTick map[time.Time][]string, trees map[tickKey]tickTree) error {
	bs, ok := e.trees.(treedb.BatchTreeSource)
	if !ok {
		return nil
	}
	for tick, projects := range byTick {
		got, err := bs.TreesAt(ctx, tick, projects)
		if err != nil {
			return err
		}
		for _, p := range projects {
			tv := got[p] // absent: no tree at the tick (every leaf an orphan)
			trees[tickKey{p, tick}] = tickTree{tv.Tree, tv.Version}
		}
	}
	return nil
}

// addLeaf adds a leaf's contribution to its parent. It reports false for an orphan: the
// project has no tree at the tick, or the id is not a leaf of it with that type.
func (e *Engine) addLeaf(ctx context.Context, r *round, l store.Leaf) (bool, error) {
	tt, err := e.treeAt(ctx, r, l.Project, l.Tick)
	if err != nil {
		return false, err
	}
	if tt.tr == nil || !tt.tr.IsLeaf(l.ID) {
		return false, nil
	}
	if n, _ := tt.tr.Node(l.ID); n.Type != l.Type {
		return false, nil
	}
	p, ok := tt.tr.Parent(l.ID)
	if !ok {
		return true, nil // a tree of one node: the leaf is its own root, nothing to roll up
	}
	r.add(pkey{l.Project, p.ID, l.Tick}, tt, p, rollup.LeafContribution(l.ID, l.Type, l.Online, l.Version))
	return true, nil
}

// add records contribution c for parent node n of tree tt at key k.
func (r *round) add(k pkey, tt tickTree, n tree.Node, c ...rollup.Contribution) {
	dp := r.dirty[k]
	if dp == nil {
		dp = &dirtyParent{tr: tt.tr, tv: tt.v, node: n, depth: tt.tr.Depth(n.ID)}
		r.dirty[k] = dp
	}
	dp.in = append(dp.in, c...)
}

// addLeaves adds the contributions of leaves to r, counting orphans.
func (e *Engine) addLeaves(ctx context.Context, r *round, leaves []store.Leaf) error {
	if err := e.prefetchTrees(ctx, r, leaves); err != nil {
		return err
	}
	for _, l := range leaves {
		ok, err := e.addLeaf(ctx, r, l)
		if err != nil {
			return err
		}
		if !ok {
			e.stats.orphans.Add(1)
		}
	}
	return nil
}

// recompute writes every dirty parent of r, deepest level first; each written (or already
// current) parent then contributes to its own parent, up to the root. Each (parent, tick) is
// written at most once per round, plus conflict retries. The current state of a parent is
// passed up even when it did not change, so a round redone after a crash completes the
// ancestors a previous run did not reach.
func (e *Engine) recompute(ctx context.Context, r *round) error {
	maxDepth := -1
	for _, dp := range r.dirty {
		maxDepth = max(maxDepth, dp.depth)
	}
	if r.snapshot == nil {
		if err := e.readAncestors(ctx, r); err != nil {
			return err
		}
	}
	for depth := maxDepth; depth >= 0; depth-- {
		var level []pkey
		for k, dp := range r.dirty {
			if dp.depth == depth {
				level = append(level, k)
			}
		}
		if len(level) == 0 {
			continue
		}
		slices.SortFunc(level, func(a, b pkey) int {
			return cmp.Or(a.tick.Compare(b.tick), cmp.Compare(a.project, b.project), cmp.Compare(a.id, b.id))
		})
		if crash := e.opts.Knobs.BeforeLevel; crash != nil && crash() {
			return ErrCrashed
		}
		var mu sync.Mutex
		done := make(map[pkey]rollup.Parent, len(level))
		p := pool.New().WithErrors().WithContext(ctx).WithMaxGoroutines(e.opts.Workers)
		for chunk := range slices.Chunk(level, e.opts.ChunkSize) {
			p.Go(func(ctx context.Context) error {
				res, err := e.writeChunk(ctx, r, chunk)
				mu.Lock()
				for k, v := range res {
					done[k] = v
				}
				mu.Unlock()
				return err
			})
		}
		if err := p.Wait(); err != nil {
			return err
		}
		for _, k := range level {
			cur, ok := done[k]
			if !ok {
				continue
			}
			dp := r.dirty[k]
			if r.summaries != nil {
				r.summaries.add(k.project, k.id, dp.node.Type, k.tick)
			}
			gp, ok := dp.tr.Parent(k.id)
			if !ok {
				continue
			}
			r.add(pkey{k.project, gp.ID, k.tick}, tickTree{dp.tr, dp.tv}, gp, cur.Contribution())
		}
	}
	return nil
}

// childSet is the rollup view of node n's children in tree tr.
func childSet(dp *dirtyParent) rollup.ChildSet {
	tr, id := dp.tr, dp.node.ID
	return rollup.ChildSet{
		Child: func(child string) (string, bool) {
			p, ok := tr.Parent(child)
			if !ok || p.ID != id {
				return "", false
			}
			n, _ := tr.Node(child)
			return n.Type, true
		},
		Expected:    int64(tr.LeafCount(id)),
		TreeVersion: dp.tv,
	}
}

// writeChunk merges and writes the parents keys (all of one level) and returns the state of
// each one that has a document after it. A write that lost the rev guard is re-read and
// re-merged; so is every write of a BulkWrite whose outcome is unknown.
func (e *Engine) writeChunk(ctx context.Context, r *round, keys []pkey) (map[pkey]rollup.Parent, error) {
	done := make(map[pkey]rollup.Parent, len(keys))
	pending := keys
	unknown := 0
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt > e.opts.MaxConflicts {
			return done, fmt.Errorf("write parents: %d still conflicting after %d attempts (first %s at %s)",
				len(pending), attempt, pending[0].id, pending[0].tick.Format(time.RFC3339))
		}
		rebuild := attempt == 0 && r.snapshot != nil
		var stored map[store.Key]bson.Raw
		switch {
		case rebuild:
			stored = r.snapshot
		case attempt == 0 && r.allRead(pending):
			stored = r.stored
		default:
			var err error
			if stored, err = e.readParents(ctx, r, pending); err != nil {
				return done, err
			}
		}
		cw := e.mergeAttempt(r, pending, stored, rebuild, done)
		ws, wkeys, next := cw.writes, cw.keys, cw.next
		if len(ws) == 0 {
			return done, nil
		}
		e.stats.parentWrites.Add(int64(len(ws)))
		if pause := e.opts.Knobs.BeforeFencedWrite; pause != nil && e.fence != nil {
			pause()
		}
		conflicts, err := e.writeFenced(ctx, e.counts.Collection(), "parents", ws)
		if errors.Is(err, errUnknownOutcome) && ctx.Err() == nil && unknown < maxUnknown {
			// Once more at once (a blip); a second unknown outcome in a row is an outage,
			// left to the caller's backoff.
			unknown++
			e.log.Warn("parent writes have an unknown outcome; re-reading them", zap.Int("parents", len(ws)), zap.Error(err))
			pending = wkeys
			continue
		}
		if err != nil {
			return done, err
		}
		unknown = 0
		e.stats.conflicts.Add(int64(len(conflicts)))
		lost := make(map[int]bool, len(conflicts))
		pending = pending[:0:0]
		for _, i := range conflicts {
			lost[i] = true
			pending = append(pending, wkeys[i])
		}
		for i, k := range wkeys {
			if !lost[i] {
				done[k] = next[i]
			}
		}
	}
	return done, nil
}

// chunkWrites are the guarded writes of one attempt of writeChunk, with each write's key and
// the parent state it writes.
type chunkWrites struct {
	writes []guardedWrite
	keys   []pkey
	next   []rollup.Parent
}

// mergeAttempt merges (Rebuild with rebuild, else Merge) the round's contributions into the
// stored documents of the pending keys and returns the writes that change one. A key whose
// document does not change is set in done; one whose document does not decode is counted
// invalid and skipped.
func (e *Engine) mergeAttempt(r *round, pending []pkey, stored map[store.Key]bson.Raw, rebuild bool, done map[pkey]rollup.Parent) chunkWrites {
	var cw chunkWrites
	now := e.now()
	for _, k := range pending {
		dp := r.dirty[k]
		dk := store.Key{ID: k.id, Type: dp.node.Type, Tick: k.tick}
		cur := rollup.Parent{ID: k.id, Type: dp.node.Type, Project: k.project, Timestamp: k.tick}
		raw, exists := stored[dk]
		if exists {
			p, err := store.DecodeParent(raw)
			if err != nil {
				e.stats.invalid.Add(1)
				e.log.Warn("skipping a parent: its key holds a document that is not a parent document",
					zap.String("id", k.id), zap.String("type", dp.node.Type), zap.Time("tick", k.tick), zap.Error(err))
				continue
			}
			cur = p
		}
		merge := rollup.Merge
		if rebuild {
			merge = rollup.Rebuild
		}
		n, changed := merge(cur, dp.in, childSet(dp))
		if !changed {
			if exists {
				done[k] = cur
			}
			continue
		}
		cw.writes = append(cw.writes, guardedWrite{key: dk, exists: exists, rev: cur.Rev, update: store.ParentUpdate(n, now)})
		cw.keys = append(cw.keys, k)
		cw.next = append(cw.next, n)
	}
	return cw
}

// readAncestors reads, with one find, the stored documents of the round's dirty parents and
// of all their ancestors: the parents every level of the round may write. The levels are
// written one after the other and each waits for the store (behind the leaf writes, on a busy
// store: issue 25), so reading them all at once saves a round trip per level above the first;
// a document another writer changed in between fails its write's guard and is re-read.
func (e *Engine) readAncestors(ctx context.Context, r *round) error {
	r.read = map[store.Key]bool{}
	var keys []store.Key
	for k, dp := range r.dirty {
		for n, ok := dp.node, true; ok; n, ok = dp.tr.Parent(n.ID) {
			sk := store.Key{ID: n.ID, Type: n.Type, Tick: k.tick}
			if r.read[sk] {
				break // its ancestors are in too
			}
			r.read[sk] = true
			keys = append(keys, sk)
		}
	}
	out, err := e.counts.ByKeys(ctx, keys)
	if err != nil {
		return fmt.Errorf("read parents: %w", err)
	}
	r.stored = out
	return nil
}

// allRead reports whether readAncestors read every key of keys.
func (r *round) allRead(keys []pkey) bool {
	for _, k := range keys {
		if !r.read[store.Key{ID: k.id, Type: r.dirty[k].node.Type, Tick: k.tick}] {
			return false
		}
	}
	return true
}

// readParents reads the stored documents of keys with one find on the unique index.
func (e *Engine) readParents(ctx context.Context, r *round, keys []pkey) (map[store.Key]bson.Raw, error) {
	ks := make([]store.Key, len(keys))
	for i, k := range keys {
		ks[i] = store.Key{ID: k.id, Type: r.dirty[k].node.Type, Tick: k.tick}
	}
	out, err := e.counts.ByKeys(ctx, ks)
	if err != nil {
		return nil, fmt.Errorf("read parents: %w", err)
	}
	return out, nil
}
