package bulk

import (
	"slices"
	"time"
)

// fairQueue is the pending set: one FIFO per project, served round-robin. A batch is filled
// with an equal share of every project that has items pending (a project with fewer gives its
// unused share to the others), starting after the project that was served last, so one
// project's backlog delays another project's items by at most the batches already in flight
// and part of the next one, never by the backlog itself. Within a project items stay in
// arrival order. Writes need no order across projects: each item is an absolute value guarded
// by its version, and the keys of two projects never meet in one document's successful write.
type fairQueue struct {
	flows  map[string]*flow // projects with items pending
	ring   []*flow          // the same, in serving order: ring[0] is served first
	spare  []*flow          // scratch for take's new ring (keeps its array)
	free   []*flow          // emptied flows, kept for reuse (at most keepFlows)
	n      int              // items pending
	newest time.Time        // the last arrival (pushes are in time order)
}

// flow is one project's pending items.
type flow struct {
	project string
	q       queue
	newest  time.Time // the flow's last arrival
}

// keepFlows bounds the emptied flows kept for reuse, and keepFlowOps the array one keeps:
// a steady load of many small projects then allocates no flow per batch, and at most
// keepFlows*keepFlowOps ops (~9 MB) stay allocated between bursts.
const (
	keepFlows   = 64
	keepFlowOps = DefaultMaxBatch
)

func (q *fairQueue) len() int { return q.n }

// oldestAt is the arrival of the oldest pending item (the oldest head of a flow); the queue
// must not be empty.
func (q *fairQueue) oldestAt() time.Time {
	oldest := q.ring[0].q.oldest().at
	for _, f := range q.ring[1:] {
		if at := f.q.oldest().at; at.Before(oldest) {
			oldest = at
		}
	}
	return oldest
}

// newestAt is the last arrival, which the policy's idle gap counts from. It may have been
// taken already while older items of other projects wait (with one FIFO it was always the
// newest pending item).
func (q *fairQueue) newestAt() time.Time { return q.newest }

// push appends o to its project's flow; a project with nothing pending joins the end of the
// serving order.
func (q *fairQueue) push(o op) {
	f, ok := q.flows[o.item.Project]
	if !ok {
		if q.flows == nil {
			q.flows = make(map[string]*flow)
		}
		if k := len(q.free); k > 0 {
			f, q.free[k-1] = q.free[k-1], nil
			q.free = q.free[:k-1]
		} else {
			f = &flow{}
		}
		f.project = o.item.Project
		q.flows[f.project] = f
		q.ring = append(q.ring, f)
	}
	f.q.push(o)
	f.newest = o.at
	q.n++
	q.newest = o.at
}

// split describes the pending items of every project but heavy (the light ones) as the policy
// sees them, and returns heavy's flow (nil when it has nothing pending). The light set's
// newest is the last arrival of a light item still pending: an item taken since is in a batch
// that the policy waits for (its idle clock starts at that batch's end at the earliest).
func (q *fairQueue) split(heavy string, isHeavy bool) (light pendingSet, hf *flow) {
	if isHeavy {
		hf = q.flows[heavy]
	}
	for _, f := range q.ring {
		if f == hf {
			continue
		}
		light.n += f.q.len()
		if at := f.q.oldest().at; light.oldest.IsZero() || at.Before(light.oldest) {
			light.oldest = at
		}
		if f.newest.After(light.newest) {
			light.newest = f.newest
		}
	}
	return light, hf
}

// takeFlow appends the n oldest ops of f (n must not exceed its pending count) to dst and
// removes them; an emptied f leaves the serving order, which is otherwise unchanged.
func (q *fairQueue) takeFlow(dst []op, f *flow, n int) []op {
	dst = f.q.take(dst, n)
	q.n -= n
	if f.q.len() == 0 {
		q.ring = slices.DeleteFunc(q.ring, func(g *flow) bool { return g == f }) // clears the tail
		q.forget(f)
	}
	return dst
}

// forget removes an emptied flow from the map and keeps it for reuse.
func (q *fairQueue) forget(f *flow) {
	delete(q.flows, f.project)
	if len(q.free) < keepFlows {
		if cap(f.q.ops) > keepFlowOps {
			f.q.ops = nil
		}
		f.project = ""
		q.free = append(q.free, f)
	}
}

// take appends n pending ops of every project but skip's (n must not exceed what they have
// pending; skip may be nil) to dst and removes them: passes over the projects in serving
// order, each pass giving every project with items left an equal share of what is still to
// take (at least one), until n are taken. The serving order then starts after the last
// project served, and emptied projects leave it.
func (q *fairQueue) take(dst []op, n int, skip *flow) []op {
	k := len(q.ring)
	last := k - 1 // ring index of the last project served
	active := k
	if skip != nil {
		active--
	}
	for n > 0 {
		share := max(1, n/active)
		for i := 0; i < k && n > 0; i++ {
			f := q.ring[i]
			if f == skip {
				continue
			}
			m := min(share, f.q.len(), n)
			if m == 0 {
				continue
			}
			dst = f.q.take(dst, m)
			n -= m
			q.n -= m
			last = i
			if f.q.len() == 0 {
				active--
			}
		}
	}
	q.spare = q.spare[:0]
	for j := range k {
		f := q.ring[(last+1+j)%k]
		if f.q.len() > 0 {
			q.spare = append(q.spare, f)
			continue
		}
		q.forget(f)
	}
	clear(q.ring)
	q.ring, q.spare = q.spare, q.ring[:0]
	return dst
}
