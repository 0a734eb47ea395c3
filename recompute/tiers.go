package recompute

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/sourcegraph/conc/pool"
)

// bucketKey is one summary bucket: a node of a project (by id and type) over the hour or day
// starting at start.
type bucketKey struct {
	project, id, typ string
	start            time.Time
}

func compareBuckets(a, b bucketKey) int {
	return cmp.Or(cmp.Compare(a.project, b.project), a.start.Compare(b.start), cmp.Compare(a.id, b.id), cmp.Compare(a.typ, b.typ))
}

func (k bucketKey) storeKey() store.Key { return store.Key{ID: k.id, Type: k.typ, Tick: k.start} }

// Dirty is the set of hourly buckets whose 5-minute parents a round wrote or found current:
// what Summarize brings up to date (their days too). It is not safe for concurrent use.
type Dirty struct {
	hours map[bucketKey]struct{}
	since time.Time
}

// NewDirty returns an empty set.
func NewDirty() *Dirty { return &Dirty{hours: map[bucketKey]struct{}{}} }

// Len is the number of hourly buckets in the set.
func (d *Dirty) Len() int { return len(d.hours) }

// Since is when the oldest bucket in the set was added (zero when it is empty).
func (d *Dirty) Since() time.Time { return d.since }

// add records the hour of a 5-minute parent (project, id, typ) at tick.
func (d *Dirty) add(project, id, typ string, tick time.Time) {
	if len(d.hours) == 0 {
		d.since = time.Now()
	}
	d.hours[bucketKey{project, id, typ, store.BucketStart(store.Tier1h, tick)}] = struct{}{}
}

func (d *Dirty) reset() {
	clear(d.hours)
	d.since = time.Time{}
}

// Summarize brings the hourly summaries of every bucket of d, and then the daily summaries of
// their days, up to date with absolute, rev-guarded writes (one unordered BulkWrite per tier
// and chunk of Options.TierChunk buckets), and empties d. Each bucket is recomputed whole
// from its sources as stored now — an hour from its 5-minute parent documents, a day from its
// hourly summaries — so it may be repeated at any time: after a crash between the 5-minute
// writes and these, the redelivered burst finds its parents current, adds them to the set
// again, and this repairs the summaries.
func (e *Engine) Summarize(ctx context.Context, d *Dirty) error {
	if d.Len() == 0 {
		return nil
	}
	if crash := e.opts.Knobs.BeforeTiers; crash != nil && crash() {
		return ErrCrashed
	}
	hours := make([]bucketKey, 0, len(d.hours))
	days := map[bucketKey]struct{}{}
	for k := range d.hours {
		hours = append(hours, k)
		k.start = store.BucketStart(store.Tier1d, k.start)
		days[k] = struct{}{}
	}
	if _, err := e.summarize(ctx, store.Tier1h, hours, nil, nil); err != nil {
		return err
	}
	dayKeys := make([]bucketKey, 0, len(days))
	for k := range days {
		dayKeys = append(dayKeys, k)
	}
	if _, err := e.summarize(ctx, store.Tier1d, dayKeys, nil, nil); err != nil {
		return err
	}
	d.reset()
	return nil
}

// overlay replaces or adds sources of the daily tier's bucket computation as recomputed from
// the tier below (verify): hourly stats by bucket.
type overlay struct {
	hours map[bucketKey]rollup.Stats
}

// bucketState is a bucket's stored summary and what its sources give.
type bucketState struct {
	key     bucketKey
	stored  rollup.Summary
	exists  bool
	invalid error // the stored document does not decode
	want    rollup.Stats
}

// changed reports whether writing want would change the bucket (an absent bucket with no tick
// is not created).
func (b bucketState) changed() bool {
	if b.invalid != nil {
		return false
	}
	if !b.exists {
		return b.want.Count() > 0
	}
	return b.stored.Stats != b.want
}

// summarize recomputes the buckets keys of tier t. With write it writes the changed ones
// (guarded by the revision read before the sources, re-reading and recomputing the ones that
// lost a race) and returns nothing; without, it returns every bucket's state, computed with
// ov applied, writing nothing. keys may repeat and be in any order.
func (e *Engine) summarize(ctx context.Context, t store.Tier, keys []bucketKey, ov *overlay, out func(bucketState) error) (int64, error) {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, compareBuckets)
	keys = slices.Compact(keys)
	// Buckets are read and written TierChunk at a time, of one project or of many: a chunk's
	// stored summaries and its sources are each one query (ids are unique within a type and
	// tick), so the flush of a burst of 1,000 small projects is a handful of commands, not
	// 1,000 projects' reads.
	chunks := slices.Collect(slices.Chunk(keys, e.opts.TierChunk))
	if out != nil {
		for _, chunk := range chunks {
			states, err := e.bucketStates(ctx, t, chunk, ov)
			if err != nil {
				return 0, err
			}
			for _, st := range states {
				if err := out(st); err != nil {
					return 0, err
				}
			}
		}
		return 0, nil
	}
	// The chunks are other documents: up to TierWorkers are written at once.
	var writes atomic.Int64
	p := pool.New().WithErrors().WithContext(ctx).WithFirstError().WithMaxGoroutines(e.opts.TierWorkers)
	for _, chunk := range chunks {
		p.Go(func(ctx context.Context) error {
			w, err := e.writeBuckets(ctx, t, chunk)
			writes.Add(w)
			return err
		})
	}
	err := p.Wait()
	return writes.Load(), err
}

// writeBuckets recomputes and writes the buckets keys, retrying the ones that lose the rev
// guard.
func (e *Engine) writeBuckets(ctx context.Context, t store.Tier, keys []bucketKey) (int64, error) {
	coll := e.tiers[t].Collection()
	var writes int64
	pending := keys
	unknown := 0
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt > e.opts.MaxConflicts {
			return writes, fmt.Errorf("write %s summaries: %d still conflicting after %d attempts (first %s at %s)",
				t, len(pending), attempt, pending[0].id, pending[0].start.Format(time.RFC3339))
		}
		states, err := e.bucketStates(ctx, t, pending, nil)
		if err != nil {
			return writes, err
		}
		var ws []guardedWrite
		var wkeys []bucketKey
		now := e.now()
		for _, st := range states {
			if st.invalid != nil {
				e.stats.invalid.Add(1)
				e.log.Warn("skipping a summary: its key holds a document that is not a summary document",
					zap.String("tier", string(t)), zap.String("id", st.key.id), zap.String("type", st.key.typ),
					zap.Time("start", st.key.start), zap.Error(st.invalid))
				continue
			}
			if !st.changed() {
				continue
			}
			next := rollup.Summary{ID: st.key.id, Type: st.key.typ, Project: st.key.project, Start: st.key.start,
				Rev: st.stored.Rev + 1, Stats: st.want}
			ws = append(ws, guardedWrite{key: st.key.storeKey(), exists: st.exists, rev: st.stored.Rev,
				update: store.SummaryUpdate(t, next, now)})
			wkeys = append(wkeys, st.key)
		}
		if len(ws) == 0 {
			return writes, nil
		}
		writes += int64(len(ws))
		e.stats.tierWrites.Add(int64(len(ws)))
		conflicts, err := e.writeFenced(ctx, coll, string(t)+" summaries", ws)
		if errors.Is(err, errUnknownOutcome) && ctx.Err() == nil && unknown < maxUnknown {
			unknown++
			e.log.Warn("summary writes have an unknown outcome; recomputing them", zap.String("tier", string(t)),
				zap.Int("buckets", len(ws)), zap.Error(err))
			pending = wkeys
			continue
		}
		if err != nil {
			return writes, err
		}
		unknown = 0
		e.stats.tierConflicts.Add(int64(len(conflicts)))
		pending = pending[:0:0]
		for _, i := range conflicts {
			pending = append(pending, wkeys[i])
		}
	}
	return writes, nil
}

// bucketStates reads the stored summaries of keys (of one project or many) and then their
// sources, and returns each bucket's state in the order of keys. The stored revisions are
// read first, so a source written after them is either in the sources read or makes the
// guarded write conflict.
func (e *Engine) bucketStates(ctx context.Context, t store.Tier, keys []bucketKey, ov *overlay) ([]bucketState, error) {
	sk := make([]store.Key, len(keys))
	for i, k := range keys {
		sk[i] = k.storeKey()
	}
	stored, err := e.tiers[t].ByKeys(ctx, sk)
	if err != nil {
		return nil, err
	}
	want, err := e.sources(ctx, t, keys, ov)
	if err != nil {
		return nil, err
	}
	out := make([]bucketState, len(keys))
	for i, k := range keys {
		st := bucketState{key: k, want: want[k]}
		if raw, ok := stored[sk[i]]; ok {
			st.exists = true
			st.stored, st.invalid = store.DecodeSummary(t, raw)
		}
		out[i] = st
	}
	return out, nil
}

// sources computes the stats of keys (of one project or many) from the tier below: an hour
// from the node's 5-minute parent documents of the hour, counting only the ticks whose tree
// has the node as a parent or root of that type (what the read API's 5-minute series shows); a
// day from the node's hourly summaries. Each tier's sources are one query for every key.
// Sources that do not decode are skipped and counted as invalid (verify lists them).
func (e *Engine) sources(ctx context.Context, t store.Tier, keys []bucketKey, ov *overlay) (map[bucketKey]rollup.Stats, error) {
	want := make(map[bucketKey]bool, len(keys))
	projectSet, idSet, typeSet := map[string]bool{}, map[string]bool{}, map[string]bool{}
	from, to := keys[0].start, keys[0].start
	for _, k := range keys {
		want[k], projectSet[k.project], idSet[k.id], typeSet[k.typ] = true, true, true, true
		from = minTime(from, k.start)
		to = maxTime(to, k.start)
	}
	projects := slices.Sorted(maps.Keys(projectSet))
	ids, types := slices.Sorted(maps.Keys(idSet)), slices.Sorted(maps.Keys(typeSet))
	to = to.Add(store.BucketSpan(t))
	out := make(map[bucketKey]rollup.Stats, len(keys))
	switch t {
	case store.Tier1h:
		docs := map[sourceKey]store.Node{}
		err := e.counts.ParentsIn(ctx, projects, ids, types, from, to, func(n store.Node, err error) error {
			if err != nil {
				e.stats.invalid.Add(1)
				return nil
			}
			if want[bucketKey{n.Project, n.ID, n.Type, store.BucketStart(t, n.Tick)}] {
				docs[sourceKey{n.Project, store.Key{ID: n.ID, Type: n.Type, Tick: n.Tick}}] = n
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read the sources of hourly summaries: %w", err)
		}
		if err := e.addTicks(ctx, docs, out); err != nil {
			return nil, err
		}
	case store.Tier1d:
		hours := map[bucketKey]rollup.Stats{}
		err := e.tiers[store.Tier1h].In(ctx, projects, ids, types, from, to, func(k store.Key, s rollup.Summary, err error) error {
			if err != nil {
				e.stats.invalid.Add(1)
				return nil
			}
			hours[bucketKey{s.Project, k.ID, k.Type, k.Tick}] = s.Stats
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read the sources of daily summaries: %w", err)
		}
		if ov != nil {
			for k, s := range ov.hours {
				hours[k] = s
			}
		}
		for h, s := range hours {
			day := bucketKey{h.project, h.id, h.typ, store.BucketStart(t, h.start)}
			if !want[day] {
				continue
			}
			acc := out[day]
			if !acc.Merge(s, int(h.start.Sub(day.start)/store.SummaryTick)) {
				return nil, fmt.Errorf("daily summary of %s (%s) at %s: hour %s does not fit", h.id, h.typ,
					day.start.Format(time.RFC3339), h.start.Format(time.RFC3339))
			}
			out[day] = acc
		}
	default:
		return nil, fmt.Errorf("tier %q has no summaries", t)
	}
	return out, nil
}

// sourceKey is a 5-minute parent document of a project.
type sourceKey struct {
	project string
	key     store.Key
}

// addTicks adds every 5-minute document of docs to its hour's stats in out, if the tree in
// effect at its tick has the node as a parent or root of that type.
func (e *Engine) addTicks(ctx context.Context, docs map[sourceKey]store.Node, out map[bucketKey]rollup.Stats) error {
	ticks := map[string][]time.Time{}
	for sk := range docs {
		ticks[sk.project] = append(ticks[sk.project], sk.key.Tick)
	}
	trees, err := e.treesAt(ctx, ticks)
	if err != nil {
		return err
	}
	for sk, n := range docs {
		k := sk.key
		tr := trees[tickKey{sk.project, k.Tick}]
		if tr == nil || tr.IsLeaf(k.ID) {
			continue
		}
		if nd, ok := tr.Node(k.ID); !ok || nd.Type != k.Type {
			continue
		}
		bk := bucketKey{sk.project, k.ID, k.Type, store.BucketStart(store.Tier1h, k.Tick)}
		slot, ok := store.BucketSlot(store.Tier1h, bk.start, k.Tick)
		if !ok {
			continue // not a tick start: not one of the 5-minute series' ticks
		}
		acc := out[bk]
		acc.Add(slot, n.Online, n.Reported, n.Expected)
		out[bk] = acc
	}
	return nil
}

// treesAt returns the tree in effect at each tick of ticks (by project, in any order; the
// lists are sorted in place). For each project it asks the TreeSource about the first and the
// last tick of a run and, when both have the same version, gives it to every tick between (the
// version in effect only grows with time); otherwise it splits the run. The first and last
// ticks of every project are asked together (treesByTick) when the TreeSource answers for many
// projects at once: a chunk of 1,000 projects' hours with one tree version each costs two
// questions.
func (e *Engine) treesAt(ctx context.Context, ticks map[string][]time.Time) (map[tickKey]*tree.Tree, error) {
	asked := map[tickKey]tickTree{}
	ends := map[time.Time][]string{}
	for p, ts := range ticks {
		slices.SortFunc(ts, time.Time.Compare)
		ts = slices.Compact(ts)
		ticks[p] = ts
		ends[ts[0]] = append(ends[ts[0]], p)
		if last := ts[len(ts)-1]; !last.Equal(ts[0]) {
			ends[last] = append(ends[last], p)
		}
	}
	if len(ticks) > 1 {
		if err := e.treesByTick(ctx, ends, asked); err != nil {
			return nil, err
		}
	}
	get := func(k tickKey) (tickTree, error) {
		if a, ok := asked[k]; ok {
			return a, nil
		}
		tr, v, err := e.trees.TreeAt(ctx, k.project, k.tick)
		if err != nil {
			return tickTree{}, err
		}
		asked[k] = tickTree{tr, v}
		return asked[k], nil
	}
	out := make(map[tickKey]*tree.Tree)
	var fill func(p string, ts []time.Time) error
	fill = func(p string, ts []time.Time) error {
		a, err := get(tickKey{p, ts[0]})
		if err != nil {
			return err
		}
		b, err := get(tickKey{p, ts[len(ts)-1]})
		if err != nil {
			return err
		}
		out[tickKey{p, ts[0]}], out[tickKey{p, ts[len(ts)-1]}] = a.tr, b.tr
		switch {
		case a.v == b.v:
			for _, tick := range ts {
				out[tickKey{p, tick}] = a.tr
			}
			return nil
		case len(ts) <= 2:
			return nil
		}
		mid := len(ts) / 2
		if err := fill(p, ts[:mid+1]); err != nil {
			return err
		}
		return fill(p, ts[mid:])
	}
	for p, ts := range ticks {
		if err := fill(p, ts); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rebuildBuckets recomputes every bucket of tier t of project starting in [from, to): those
// of every node with a source there and every stored one (emptied when its sources are gone),
// writing the changed ones, or, with out, passing each state to it with ov applied and
// writing nothing. It returns the buckets considered and the writes.
func (e *Engine) rebuildBuckets(ctx context.Context, t store.Tier, project string, from, to time.Time, ov *overlay, out func(bucketState) error) (int, int64, error) {
	keys := map[bucketKey]struct{}{}
	var err error
	switch t {
	case store.Tier1h:
		err = e.counts.ProjectParents(ctx, project, from, to, func(n store.Node, err error) error {
			if err == nil && n.ID != "" {
				keys[bucketKey{project, n.ID, n.Type, store.BucketStart(t, n.Tick)}] = struct{}{}
			}
			return nil
		})
	case store.Tier1d:
		err = e.tiers[store.Tier1h].Project(ctx, project, from, to, func(k store.Key, _ rollup.Summary, err error) error {
			if k.ID != "" {
				keys[bucketKey{project, k.ID, k.Type, store.BucketStart(t, k.Tick)}] = struct{}{}
			}
			return nil
		})
		if ov != nil {
			for k := range ov.hours {
				if !k.start.Before(from) && k.start.Before(to) {
					keys[bucketKey{project, k.id, k.typ, store.BucketStart(t, k.start)}] = struct{}{}
				}
			}
		}
	default:
		return 0, 0, fmt.Errorf("tier %q has no summaries", t)
	}
	if err != nil {
		return 0, 0, err
	}
	err = e.tiers[t].Project(ctx, project, from, to, func(k store.Key, _ rollup.Summary, _ error) error {
		if k.ID != "" {
			keys[bucketKey{project, k.ID, k.Type, k.Tick}] = struct{}{}
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	list := make([]bucketKey, 0, len(keys))
	for k := range keys {
		list = append(list, k)
	}
	writes, err := e.summarize(ctx, t, list, ov, out)
	return len(list), writes, err
}

// writeFenced is writeGuarded for the engine on coll: a lease holder's writes carry its term,
// and after any conflict or unknown outcome the lease is checked, so a stale holder stops (an
// error wrapping lease.ErrFenced) instead of re-merging over its successor's work.
func (e *Engine) writeFenced(ctx context.Context, coll *mongo.Collection, what string, ws []guardedWrite) ([]int, error) {
	if e.fence == nil {
		return writeGuarded(ctx, coll, what, ws)
	}
	for i := range ws {
		ws[i].term = e.fence.Term
	}
	conflicts, err := writeGuarded(ctx, coll, what, ws)
	if len(conflicts) > 0 || errors.Is(err, errUnknownOutcome) {
		if ferr := e.fence.Check(ctx); ferr != nil {
			if isFenced(ferr) {
				e.stats.fenced.Add(1)
			}
			return nil, ferr
		}
	}
	return conflicts, err
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
