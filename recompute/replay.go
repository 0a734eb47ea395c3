package recompute

import (
	"context"
	"fmt"
	"slices"
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
	// TiersOnly rebuilds only the hourly and daily summaries of the window, from the
	// 5-minute parents as stored (after an upgrade that added the summaries, or what verify
	// finds wrong in them alone); the parents and leaves are not read.
	TiersOnly bool
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
	// Invalid is the number of malformed leaves, parent or summary documents skipped.
	Invalid int64
	// LastTick is the last tick finished (zero if none).
	LastTick time.Time
	// Hours and Days are the hourly and daily buckets rebuilt; TierWrites the summary writes
	// sent (conflicting ones included).
	Hours, Days, TierWrites int64
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
//   - A window whose sources start before their retention horizon (the leaves of the
//     5-minute parents, the 5-minute parents of its hours, the hours of its days) is refused
//     with a *HorizonError before anything is written; a tick that retention reaches while the
//     replay reads it (the horizon is read again after its leaves) ends the replay with one,
//     that tick unwritten.
//   - The hourly and daily summaries of every bucket that overlaps the window are rebuilt
//     from their sources (an hour once all its ticks of the window are done, a day once its
//     hours are), with the same rev-guarded absolute writes as the watcher's: the buckets of
//     every node with a source there, and every stored bucket, emptied when its sources are
//     gone. With TiersOnly only they are rebuilt.
func Replay(ctx context.Context, db *mongo.Database, trees treedb.TreeSource, project string, from, to time.Time, opts ReplayOptions) (ReplayStats, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	var st ReplayStats
	if err := CheckProject(ctx, db, project); err != nil {
		return st, err
	}
	horizons := store.NewHorizons(db)
	if err := checkHorizons(ctx, horizons, project, from, to, replayTiers(opts.TiersOnly)); err != nil {
		return st, err
	}
	e := New(db, trees, opts.Options, log.Named("replay"))
	var ticks []time.Time
	if !opts.TiersOnly {
		var err error
		if ticks, err = e.counts.Ticks(ctx, project, from, to); err != nil {
			return st, err
		}
	}
	hours, err := e.tierHours(ctx, project, from, to, ticks, !opts.TiersOnly)
	if err != nil {
		return st, err
	}
	sync := func() {
		c := e.Stats()
		st.ParentWrites, st.Conflicts, st.Orphans, st.Invalid, st.TierWrites = c.ParentWrites, c.Conflicts, c.Orphans, c.Invalid, c.TierWrites
	}
	i := 0
	for hi, h := range hours {
		end := h.Add(time.Hour)
		for ; i < len(ticks) && ticks[i].Before(end); i++ {
			tick := ticks[i]
			// After the tick's leaves are read: a horizon still at or before the tick means
			// they were read whole (retention advances it before it deletes).
			whole := func(ctx context.Context) error {
				return checkHorizons(ctx, horizons, project, tick, to, replayTiers(false))
			}
			n, err := e.replayTick(ctx, project, tick, whole)
			st.Leaves += n
			sync()
			if err != nil {
				return st, fmt.Errorf("replay %s at %s: %w", project, tick.Format(time.RFC3339), err)
			}
			st.Ticks++
			st.LastTick = tick
			if opts.Progress != nil {
				opts.Progress(ReplayProgress{Tick: tick, Done: i + 1, Total: len(ticks), Stats: st})
			}
		}
		// A bucket's sources are checked again before it is rebuilt (retention may have
		// advanced a horizon since the window was checked).
		if err := checkHorizons(ctx, horizons, project, h, to, []store.Tier{store.Tier1h}); err != nil {
			return st, err
		}
		n, _, err := e.rebuildBuckets(ctx, store.Tier1h, project, h, end, nil, nil)
		st.Hours += int64(n)
		sync()
		if err != nil {
			return st, fmt.Errorf("replay %s: hourly summaries at %s: %w", project, h.Format(time.RFC3339), err)
		}
		day := store.BucketStart(store.Tier1d, h)
		if hi == len(hours)-1 || !store.BucketStart(store.Tier1d, hours[hi+1]).Equal(day) {
			if err := checkHorizons(ctx, horizons, project, day, to, []store.Tier{store.Tier1d}); err != nil {
				return st, err
			}
			n, _, err := e.rebuildBuckets(ctx, store.Tier1d, project, day, day.Add(24*time.Hour), nil, nil)
			st.Days += int64(n)
			sync()
			if err != nil {
				return st, fmt.Errorf("replay %s: daily summaries at %s: %w", project, day.Format(time.RFC3339), err)
			}
		}
	}
	return st, nil
}

// tierHours are the hours whose summaries a replay of [from, to) rebuilds, ascending: every
// hour that overlaps the window and holds a tick of ticks, a 5-minute parent, or a stored
// hourly summary, and an hour of every day that overlaps the window and holds a stored daily
// summary (so a day whose hours are all gone is emptied too). known says ticks are the
// window's ticks with documents (else they are read).
func (e *Engine) tierHours(ctx context.Context, project string, from, to time.Time, ticks []time.Time, known bool) ([]time.Time, error) {
	hFrom, hTo := store.BucketStart(store.Tier1h, from), store.BucketStart(store.Tier1h, to.Add(-time.Nanosecond)).Add(time.Hour)
	set := map[time.Time]bool{}
	for _, t := range ticks {
		set[store.BucketStart(store.Tier1h, t)] = true
	}
	// The ticks of the window are known (or, for TiersOnly, read here); those of its first
	// and last hour outside it are read.
	ranges := [][2]time.Time{{hFrom, from}, {to, hTo}}
	if !known {
		ranges = [][2]time.Time{{hFrom, hTo}}
	}
	for _, r := range ranges {
		if !r[0].Before(r[1]) {
			continue
		}
		more, err := e.counts.Ticks(ctx, project, r[0], r[1])
		if err != nil {
			return nil, err
		}
		for _, t := range more {
			set[store.BucketStart(store.Tier1h, t)] = true
		}
	}
	for _, t := range []store.Tier{store.Tier1h, store.Tier1d} {
		bFrom, bTo := store.BucketStart(t, from), store.BucketStart(t, to.Add(-time.Nanosecond)).Add(store.BucketSpan(t))
		starts, err := e.tiers[t].Starts(ctx, project, bFrom, bTo)
		if err != nil {
			return nil, err
		}
		for _, s := range starts {
			if t == store.Tier1h {
				set[s] = true
				continue
			}
			// A stored day: one of its hours in the window brings it into the loop.
			set[maxTime(s, hFrom)] = true
		}
	}
	out := make([]time.Time, 0, len(set))
	for h := range set {
		if !h.Before(hFrom) && h.Before(hTo) {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out, nil
}

// replayTick rebuilds every parent of project at tick (see Replay) and returns the number of
// leaf documents read; whole is called once the leaves are read, and its error ends the tick
// before anything is written.
func (e *Engine) replayTick(ctx context.Context, project string, tick time.Time, whole func(context.Context) error) (int64, error) {
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
	if err := whole(ctx); err != nil {
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
