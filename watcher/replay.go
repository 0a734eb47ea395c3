package watcher

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree/treedb"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"
)

// recoverWindow recomputes, from the collection, the leaves written since s.from (all leaves
// when s.from is zero): the window whose events the stream can no longer deliver.
func (w *Watcher) recoverWindow(ctx context.Context, s *streamState) error {
	w.log.Warn("replaying leaves the change stream cannot deliver",
		zap.String("reason", s.reason), zap.Time("written_since", s.from), zap.Time("until", w.now().UTC()))
	n, err := w.replayLeavesSince(ctx, s.from)
	if err != nil {
		return fmt.Errorf("replay lost window: %w", err)
	}
	if n > 0 || !s.from.IsZero() {
		w.stats.replays.Add(1)
	}
	w.log.Warn("lost window replayed", zap.String("reason", s.reason), zap.Time("written_since", s.from), zap.Int64("leaves", n))
	return nil
}

// replayLeavesSince feeds every leaf written at or after from through the normal recompute, in
// rounds of Options.ReplayChunk leaves, and returns how many it read.
func (e *engine) replayLeavesSince(ctx context.Context, from time.Time) (int64, error) {
	filter := bson.D{{Key: store.FieldRollup, Value: bson.D{{Key: "$ne", Value: true}}}}
	if !from.IsZero() {
		filter = append(filter, bson.E{Key: store.FieldWrittenAt, Value: bson.D{{Key: "$gte", Value: from}}})
	}
	if f := e.part.projectFilter(); f != nil {
		filter = append(filter, bson.E{Key: store.FieldProject, Value: f})
	}
	cur, err := e.counts.Find(ctx, filter)
	if err != nil {
		return 0, fmt.Errorf("find leaves: %w", err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	var n int64
	batch := make([]store.Leaf, 0, e.opts.ReplayChunk)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		r := newRound()
		if err := e.addLeaves(ctx, r, batch); err != nil {
			return err
		}
		if err := e.recompute(ctx, r); err != nil {
			return err
		}
		e.stats.events.Add(int64(len(batch)))
		batch = batch[:0]
		return nil
	}
	for cur.Next(ctx) {
		n++
		l, err := store.DecodeLeaf(cur.Current)
		if err != nil {
			e.stats.invalid.Add(1)
			continue
		}
		if !e.part.owns(l.Project) {
			continue
		}
		batch = append(batch, l)
		if len(batch) >= e.opts.ReplayChunk {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := cur.Err(); err != nil {
		return n, fmt.Errorf("find leaves: %w", err)
	}
	return n, flush()
}

// ReplayOptions tune Replay.
type ReplayOptions struct {
	// Options tune the writes (ChunkSize, Workers, MaxConflicts); the stream fields are unused.
	Options
	// Progress, if set, is called after each tick is durably recomputed.
	Progress func(ReplayProgress)
	// Logger receives the replay's logs (nil: none).
	Logger *zap.Logger
}

// ReplayProgress reports one finished tick.
type ReplayProgress struct {
	// Tick is the tick just finished; every tick of the window before it is finished too, so
	// an interrupted replay resumes with from = Tick plus one tick.
	Tick time.Time
	// Done and Total count the ticks of the window that have leaves or parents.
	Done, Total int
	// Stats are the totals so far.
	Stats ReplayStats
}

// ReplayStats are the totals of a Replay.
type ReplayStats struct {
	// Ticks is the number of ticks recomputed.
	Ticks int64
	// Leaves is the number of leaf documents read.
	Leaves int64
	// ParentWrites is the number of parent writes sent (conflicting ones included).
	ParentWrites int64
	// Conflicts is the number of parent writes that lost the rev guard to a concurrent writer.
	Conflicts int64
	// Orphans is the number of leaves not in their tick's tree (excluded from totals).
	Orphans int64
	// Invalid is the number of malformed leaves or parent documents skipped.
	Invalid int64
	// LastTick is the last tick finished (zero if none).
	LastTick time.Time
}

// Replay recomputes every parent of project for the ticks in [from, to) from the leaves (a
// full recompute, for operators and the `rollup replay` command). It is idempotent and may
// run while the watcher runs; an interrupted replay can resume from the tick after the last
// one Progress reported (or simply start again).
//
// Semantics, per tick t and tree version of t (trees from treedb.TreeSource):
//   - The tick's parent documents are read first, then its leaves. Each parent of the tree
//     that has leaves under it, or a stored document, is rebuilt bottom-up: its children
//     set is REPLACED by the contributions of its children as just read and rebuilt (a child
//     with nothing under it any more, a child not in the tree, a stale value: all gone);
//     its totals follow, and its rev becomes stored rev + 1 when anything differs.
//   - Each write is guarded by the rev read before the leaves. If a concurrent writer (the
//     watcher) changed the document since, the write conflicts and is redone as a merge
//     (newest version per child wins, nothing removed) into the document as it is then, so a
//     concurrent newer leaf is never lost; such a parent is only brought up to date, not
//     cleaned, and running the replay again replaces it.
//   - Parent documents of nodes that are not parents in the tick's tree are left alone.
func Replay(ctx context.Context, db *mongo.Database, trees treedb.TreeSource, project string, from, to time.Time, opts ReplayOptions) (ReplayStats, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	e := &engine{
		counts: countsCollection(db),
		trees:  trees,
		opts:   opts.withDefaults(),
		log:    log.Named("replay"),
		stats:  &counters{},
		now:    time.Now,
	}
	var st ReplayStats
	ticks, err := e.ticks(ctx, project, from, to)
	if err != nil {
		return st, err
	}
	for i, tick := range ticks {
		n, err := e.replayTick(ctx, project, tick)
		st.Leaves += n
		c := e.stats.snapshot()
		st.ParentWrites, st.Conflicts, st.Orphans, st.Invalid = c.ParentWrites, c.Conflicts, c.Orphans, c.Invalid
		if err != nil {
			return st, fmt.Errorf("replay %s at %s: %w", project, tick.Format(time.RFC3339), err)
		}
		st.Ticks++
		st.LastTick = tick
		if opts.Progress != nil {
			opts.Progress(ReplayProgress{Tick: tick, Done: i + 1, Total: len(ticks), Stats: st})
		}
	}
	return st, nil
}

// ticks returns the distinct ticks of project's documents in [from, to), ascending.
func (e *engine) ticks(ctx context.Context, project string, from, to time.Time) ([]time.Time, error) {
	res := e.counts.Distinct(ctx, store.FieldTimestamp, bson.D{
		{Key: store.FieldProject, Value: project},
		{Key: store.FieldTimestamp, Value: bson.D{{Key: "$gte", Value: from}, {Key: "$lt", Value: to}}},
	})
	var raw []bson.DateTime
	if err := res.Decode(&raw); err != nil {
		return nil, fmt.Errorf("list ticks: %w", err)
	}
	out := make([]time.Time, len(raw))
	for i, d := range raw {
		out[i] = d.Time().UTC()
	}
	slices.SortFunc(out, time.Time.Compare)
	return slices.Compact(out), nil
}

// replayTick rebuilds every parent of project at tick (see Replay) and returns the number of
// leaves read.
func (e *engine) replayTick(ctx context.Context, project string, tick time.Time) (int64, error) {
	r := newRound()
	tt, err := e.treeAt(ctx, r, project, tick)
	if err != nil {
		return 0, err
	}
	base := bson.D{{Key: store.FieldProject, Value: project}, {Key: store.FieldTimestamp, Value: tick}}
	// Parents first: a leaf written after this read is either in the leaf read below or
	// reached a parent through the watcher after it, which the rev guard detects.
	r.snapshot = map[docKey]bson.Raw{}
	err = e.each(ctx, append(slices.Clone(base), bson.E{Key: store.FieldRollup, Value: true}), func(doc bson.Raw) {
		if k, ok := keyOf(doc); ok {
			r.snapshot[k] = slices.Clone(doc)
		}
	})
	if err != nil {
		return 0, fmt.Errorf("read parents: %w", err)
	}
	var leaves []store.Leaf
	var n int64
	err = e.each(ctx, append(slices.Clone(base), bson.E{Key: store.FieldRollup, Value: bson.D{{Key: "$ne", Value: true}}}), func(doc bson.Raw) {
		n++
		l, err := store.DecodeLeaf(doc)
		if err != nil {
			e.stats.invalid.Add(1)
			return
		}
		leaves = append(leaves, l)
	})
	if err != nil {
		return n, fmt.Errorf("read leaves: %w", err)
	}
	if err := e.addLeaves(ctx, r, leaves); err != nil {
		return n, err
	}
	if tt.tr != nil {
		// Stored parents with nothing under them any more are rebuilt (to empty) too.
		for k := range r.snapshot {
			node, ok := tt.tr.Node(k.ID)
			if ok && node.Type == k.Type && !tt.tr.IsLeaf(k.ID) {
				r.add(pkey{project, k.ID, tick}, tt, node)
			}
		}
	}
	return n, e.recompute(ctx, r)
}

// each calls fn for every document of the counts collection matching filter.
func (e *engine) each(ctx context.Context, filter bson.D, fn func(bson.Raw)) error {
	cur, err := e.counts.Find(ctx, filter)
	if err != nil {
		return err
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	for cur.Next(ctx) {
		fn(cur.Current)
	}
	return cur.Err()
}
