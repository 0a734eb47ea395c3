package bulk

import (
	"sync"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// queue is a FIFO of pending ops (one project's: see fairQueue). Its backing array is
// reused: taken ops are cleared (the queue keeps no request alive), and once the array is
// full and at least half of it is taken, the pending ops move to its front instead of the
// array growing. Each op is so copied a bounded number of times on average, where a slice cut
// from its front reallocates and copies everything pending on every growth. An emptied queue
// drops an array grown past keepOps.
type queue struct {
	ops  []op // ops[head:] are pending, oldest first
	head int
}

// keepOps is the largest backing array an emptied queue keeps for the next burst.
const keepOps = 8 * DefaultMaxBatch

func (q *queue) len() int { return len(q.ops) - q.head }

// oldest is the first op of the queue; it must not be empty.
func (q *queue) oldest() *op { return &q.ops[q.head] }

func (q *queue) push(o op) {
	if len(q.ops) == cap(q.ops) && q.head > 0 && q.head >= len(q.ops)/2 {
		n := copy(q.ops, q.ops[q.head:])
		clear(q.ops[n:])
		q.ops, q.head = q.ops[:n], 0
	}
	q.ops = append(q.ops, o)
}

// take appends the n oldest ops to dst and removes them from the queue.
func (q *queue) take(dst []op, n int) []op {
	taken := q.ops[q.head : q.head+n]
	dst = append(dst, taken...)
	clear(taken)
	q.head += n
	if q.head == len(q.ops) {
		q.ops, q.head = q.ops[:0], 0
		if cap(q.ops) > keepOps {
			q.ops = nil
		}
	}
	return dst
}

// batch is one batch cut from the queue and the memory that writing it needs. Batches are
// recycled through batchPool: at most Options.Workers are in use at once, so under a steady
// load flushing allocates none of this.
type batch struct {
	ops []op

	// flush: the items, their deduplication and where each winner's result is.
	items   []Item
	order   []int // dedup: item indices by key
	winners []int // dedup: one item per key, in key order
	owner   []int // dedup: item → its key's winner
	unique  []Item
	pos     []int // item index of a winner → position in unique

	// write: the encoded filters and updates of every op, the models that point at them,
	// and the results.
	buf     []byte
	updates []mongo.UpdateOneModel
	models  []mongo.WriteModel
	all     []int
	sub     []mongo.WriteModel
	res     []Result
	upsert  bool
}

// batchPool recycles batches. A batch whose memory grew past what maxOps ops of ordinary size
// need is dropped (left to the GC) rather than kept.
type batchPool struct {
	maxOps int
	pool   sync.Pool
}

func (p *batchPool) get() *batch {
	if b, ok := p.pool.Get().(*batch); ok {
		return b
	}
	return &batch{upsert: true}
}

// put clears what b refers to (requests, strings, encoded documents) and keeps it.
func (p *batchPool) put(b *batch) {
	if cap(b.ops) > p.maxOps || cap(b.buf) > p.maxOps*1024 {
		return
	}
	b.ops = clearSlice(b.ops)
	b.items = clearSlice(b.items)
	b.unique = clearSlice(b.unique)
	b.updates = clearSlice(b.updates)
	b.models = clearSlice(b.models)
	b.sub = clearSlice(b.sub)
	b.res = clearSlice(b.res)
	b.buf = b.buf[:0]
	p.pool.Put(b)
}

// clearSlice zeroes s up to its length and returns it empty, keeping its capacity.
func clearSlice[T any](s []T) []T {
	clear(s)
	return s[:0]
}

// grow returns s with length n, reusing its array when it is large enough. The contents are
// not cleared.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
