package recompute

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree/treedb"
)

// ReplayOptions tune Replay.
type ReplayOptions struct {
	// Options tune the writes (ChunkSize, Workers, MaxConflicts).
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
// one Progress reported (or simply start again). An unknown project (see CheckProject) is an
// *UnknownProjectError.
//
// Semantics, per tick t and tree version of t (trees from a TreeSource):
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
//   - Parent documents of nodes that are not parents in the tick's tree are left alone, and
//     so are documents that do not decode (counted as Invalid: verify names them, and only
//     fixing them by hand repairs them).
func Replay(ctx context.Context, db *mongo.Database, trees treedb.TreeSource, project string, from, to time.Time, opts ReplayOptions) (ReplayStats, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	var st ReplayStats
	if err := CheckProject(ctx, db, project); err != nil {
		return st, err
	}
	e := New(db, trees, opts.Options, log.Named("replay"))
	ticks, err := e.counts.Ticks(ctx, project, from, to)
	if err != nil {
		return st, err
	}
	for i, tick := range ticks {
		n, err := e.replayTick(ctx, project, tick)
		st.Leaves += n
		c := e.Stats()
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

// replayTick rebuilds every parent of project at tick (see Replay) and returns the number of
// leaf documents read.
func (e *Engine) replayTick(ctx context.Context, project string, tick time.Time) (int64, error) {
	r := newRound()
	tt, err := e.treeAt(ctx, r, project, tick)
	if err != nil {
		return 0, err
	}
	// Parents first: a leaf written after this read is either in the leaf read below or
	// reached a parent through the watcher after it, which the rev guard detects.
	parents, err := e.counts.TickParents(ctx, project, tick)
	if err != nil {
		return 0, err
	}
	r.snapshot = make(map[store.Key]bson.Raw, len(parents))
	for k, docs := range parents {
		r.snapshot[k] = docs[len(docs)-1]
	}
	leaves, invalid, err := e.counts.TickLeaves(ctx, project, tick)
	n := int64(len(leaves) + len(invalid))
	if err != nil {
		return n, err
	}
	e.stats.invalid.Add(int64(len(invalid)))
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
