package watcher

import (
	"context"
	"time"

	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// maxTrackedTicks bounds the (project, tick) pairs a completion tracks; past it the tracker
// starts afresh (the ticks it forgot only lose their early flush).
const maxTrackedTicks = 4096

// completion tracks, per (project, tick), which leaves of the tick's tree a partition's stream
// has delivered, so that the batch that completes a tick ends its burst at once instead of
// after an empty getMore (MaxAwait later): the last leaf of a tick is then rolled up as soon
// as it is read. It only decides when a burst ends, which is always safe (a burst ends at a
// batch boundary, and every parent write is idempotent); a leaf seen twice counts once, and a
// tick whose tree cannot be read, or whose leaves do not all report, never completes and waits
// for the quiet stream as before. Not safe for concurrent use: one per partition's stream.
type completion struct {
	trees   treedb.TreeSource
	ticks   map[tickKey]*tickSeen
	batches int // addAll calls
}

// tickKey is one project's tick.
type tickKey struct {
	project string
	tick    time.Time
}

// tickSeen is the leaves of one (project, tick) delivered so far.
type tickSeen struct {
	key  tickKey
	tr   *tree.Tree // nil: no tree (or it could not be read): never complete
	seen []uint64   // bit per tree node (Ref)
	n    int        // distinct leaves seen
	want int        // leaves of the tree
	// batch is the addAll call that last touched the tick, and batchN its leaves in it.
	batch, batchN int
}

// tickProgress is what a batch brought to one (project, tick): its leaves in the batch, and
// the tick's leaves not seen yet after it (0: complete; -1: unknown, the tick never completes).
type tickProgress struct {
	key       tickKey
	n         int
	remaining int
}

func newCompletion(trees treedb.TreeSource) *completion {
	return &completion{trees: trees, ticks: map[tickKey]*tickSeen{}}
}

// addAll records leaves (a batch) and reports whether one of them completed its (project,
// tick) or belongs to one already complete, and the progress of each tick the batch touched.
// The trees of the ticks it starts tracking come from one TreesAt call per tick when the
// source answers for many projects at once.
func (c *completion) addAll(ctx context.Context, leaves []store.Leaf) (complete bool, progress []tickProgress) {
	if c == nil || c.trees == nil || len(leaves) == 0 {
		return false, nil
	}
	c.prefetch(ctx, leaves)
	c.batches++
	var touched []*tickSeen
	for _, l := range leaves {
		done, s := c.add(ctx, l)
		if done {
			complete = true
		}
		if s.batch != c.batches {
			s.batch, s.batchN = c.batches, 0
			touched = append(touched, s)
		}
		s.batchN++
	}
	progress = make([]tickProgress, len(touched))
	for i, s := range touched {
		progress[i] = tickProgress{key: s.key, n: s.batchN, remaining: -1}
		if s.tr != nil {
			progress[i].remaining = s.want - s.n
		}
	}
	return complete, progress
}

// prefetch starts tracking the (project, tick) pairs of leaves not tracked yet, with their
// trees from one TreesAt call per tick (nothing when the source cannot batch, or for a single
// pair: add looks it up).
func (c *completion) prefetch(ctx context.Context, leaves []store.Leaf) {
	bs, ok := c.trees.(treedb.BatchTreeSource)
	if !ok {
		return
	}
	missing := map[time.Time][]string{}
	seen := map[tickKey]bool{}
	for _, l := range leaves {
		k := tickKey{l.Project, l.Tick}
		if c.ticks[k] != nil || seen[k] {
			continue
		}
		seen[k] = true
		missing[l.Tick] = append(missing[l.Tick], l.Project)
	}
	if len(seen) < 2 {
		return
	}
	if len(c.ticks)+len(seen) > maxTrackedTicks {
		clear(c.ticks)
	}
	for tick, projects := range missing {
		got, err := bs.TreesAt(ctx, tick, projects)
		if err != nil {
			return // add looks each up (an error costs the early flush only)
		}
		for _, p := range projects {
			c.ticks[tickKey{p, tick}] = newTickSeen(tickKey{p, tick}, got[p].Tree)
		}
	}
}

// newTickSeen tracks the leaves of tick k of tree tr (nil: never complete).
func newTickSeen(k tickKey, tr *tree.Tree) *tickSeen {
	if tr == nil {
		return &tickSeen{key: k}
	}
	return &tickSeen{key: k, tr: tr, want: tr.LeafCountAt(mustRoot(tr)), seen: make([]uint64, (tr.Len()+63)/64)}
}

// add records leaf l and reports whether l is the last leaf of its (project, tick) to be seen
// (or a leaf of a tick already complete: a late rewrite, rolled up at once too), with the
// tick's record.
func (c *completion) add(ctx context.Context, l store.Leaf) (bool, *tickSeen) {
	k := tickKey{l.Project, l.Tick}
	s := c.ticks[k]
	if s == nil {
		if len(c.ticks) >= maxTrackedTicks {
			clear(c.ticks)
		}
		// One tree lookup per (project, tick) for as long as it is tracked; an error only
		// costs this tick its early flush.
		tr, _, err := c.trees.TreeAt(ctx, l.Project, l.Tick)
		if err != nil {
			tr = nil
		}
		s = newTickSeen(k, tr)
		c.ticks[k] = s
	}
	if s.tr == nil {
		return false, s
	}
	if s.n == s.want {
		return true, s
	}
	r, ok := s.tr.Lookup(l.ID)
	if !ok || !s.tr.IsLeafAt(r) {
		return false, s // an orphan: the engine counts it
	}
	w, bit := int(r)/64, uint64(1)<<(uint(r)%64)
	if s.seen[w]&bit != 0 {
		return false, s
	}
	s.seen[w] |= bit
	s.n++
	if s.n == s.want {
		s.seen = nil // complete: the bits are no longer needed
		return true, s
	}
	return false, s
}

// mustRoot is the Ref of tr's root.
func mustRoot(tr *tree.Tree) tree.Ref {
	r, _ := tr.Lookup(tr.Root().ID)
	return r
}
