package watcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sourcegraph/conc/pool"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// engine recomputes parents from contributions: the part shared by the watcher's batches,
// the recovery of a lost window and Replay.
type engine struct {
	counts *mongo.Collection // w:majority, j:true
	trees  treedb.TreeSource
	opts   Options
	log    *zap.Logger
	stats  *counters
	now    func() time.Time
	// crash, set by tests only, is called before each level's writes; when it returns true the
	// round is abandoned as by a crash: nothing more is written and no checkpoint is saved.
	crash func() bool
	// fence, for a leader of a lease, fences its parent writes by its term (nil: unfenced).
	fence *fence
	// part is the partition whose leaves the engine recomputes (zero: every project).
	part Partition
	// pause, set by tests only, is called before each fenced BulkWrite (to freeze a leader).
	pause func()
}

// maxUnknown is how many unknown outcomes in a row writeChunk re-reads at once before it
// returns the error.
const maxUnknown = 1

// errCrashed is what a round abandoned by the test crash hook returns.
var errCrashed = errors.New("watcher: simulated crash")

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
	snapshot map[docKey]bson.Raw
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

// treeAt returns the tree of (project, tick), asking the treedb.TreeSource once per round.
func (e *engine) treeAt(ctx context.Context, r *round, project string, tick time.Time) (tickTree, error) {
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

// addLeaf adds a leaf's contribution to its parent. It reports false for an orphan: the
// project has no tree at the tick, or the id is not a leaf of it with that type.
func (e *engine) addLeaf(ctx context.Context, r *round, l store.Leaf) (bool, error) {
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
func (e *engine) addLeaves(ctx context.Context, r *round, leaves []store.Leaf) error {
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
func (e *engine) recompute(ctx context.Context, r *round) error {
	maxDepth := -1
	for _, dp := range r.dirty {
		maxDepth = max(maxDepth, dp.depth)
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
		if e.crash != nil && e.crash() {
			return errCrashed
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
func (e *engine) writeChunk(ctx context.Context, r *round, keys []pkey) (map[pkey]rollup.Parent, error) {
	done := make(map[pkey]rollup.Parent, len(keys))
	pending := keys
	unknown := 0
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt > e.opts.MaxConflicts {
			return done, fmt.Errorf("write parents: %d still conflicting after %d attempts (first %s at %s)",
				len(pending), attempt, pending[0].id, pending[0].tick.Format(time.RFC3339))
		}
		rebuild := attempt == 0 && r.snapshot != nil
		var stored map[docKey]bson.Raw
		if rebuild {
			stored = r.snapshot
		} else {
			var err error
			if stored, err = e.readParents(ctx, r, pending); err != nil {
				return done, err
			}
		}
		var ws []guardedWrite
		var wkeys []pkey
		var next []rollup.Parent
		now := e.now()
		for _, k := range pending {
			dp := r.dirty[k]
			dk := docKey{k.id, dp.node.Type, k.tick}
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
			ws = append(ws, guardedWrite{key: dk, exists: exists, rev: cur.Rev, update: store.ParentUpdate(n, now)})
			wkeys = append(wkeys, k)
			next = append(next, n)
		}
		if len(ws) == 0 {
			return done, nil
		}
		e.stats.parentWrites.Add(int64(len(ws)))
		conflicts, err := e.writeParents(ctx, ws)
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

// readParents reads the stored documents of keys with one find on the unique index.
func (e *engine) readParents(ctx context.Context, r *round, keys []pkey) (map[docKey]bson.Raw, error) {
	want := make(map[docKey]bool, len(keys))
	var ids, types, ticks bson.A
	seenType := map[string]bool{}
	seenTick := map[time.Time]bool{}
	for _, k := range keys {
		dp := r.dirty[k]
		want[docKey{k.id, dp.node.Type, k.tick}] = true
		ids = append(ids, k.id)
		if !seenType[dp.node.Type] {
			seenType[dp.node.Type] = true
			types = append(types, dp.node.Type)
		}
		if !seenTick[k.tick] {
			seenTick[k.tick] = true
			ticks = append(ticks, k.tick)
		}
	}
	cur, err := e.counts.Find(ctx, bson.D{
		{Key: store.FieldID, Value: bson.D{{Key: "$in", Value: ids}}},
		{Key: store.FieldType, Value: bson.D{{Key: "$in", Value: types}}},
		{Key: store.FieldTimestamp, Value: bson.D{{Key: "$in", Value: ticks}}},
	})
	if err != nil {
		return nil, fmt.Errorf("read parents: %w", err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	out := make(map[docKey]bson.Raw, len(keys))
	for cur.Next(ctx) {
		k, ok := keyOf(cur.Current)
		if ok && want[k] {
			out[k] = slices.Clone(cur.Current)
		}
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("read parents: %w", err)
	}
	return out, nil
}

// keyOf returns the unique key of a counts document.
func keyOf(doc bson.Raw) (docKey, bool) {
	id, ok1 := doc.Lookup(store.FieldID).StringValueOK()
	typ, ok2 := doc.Lookup(store.FieldType).StringValueOK()
	ms, ok3 := doc.Lookup(store.FieldTimestamp).DateTimeOK()
	return docKey{id, typ, time.UnixMilli(ms).UTC()}, ok1 && ok2 && ok3
}
