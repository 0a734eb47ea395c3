package embedded

import (
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// maxBatchBytes bounds the documents of one reply batch, as mongod's 16 MiB reply limit does.
const maxBatchBytes = 16*1024*1024 - 64*1024

// cursor is a materialized query result being returned in batches. A change-stream cursor
// has a nil docs and a non-nil stream.
type cursor struct {
	id       int64
	ns       string // db.coll
	docs     []bson.Raw
	pos      int
	lastUsed time.Time
	stream   *changeStream
}

type cursorRegistry struct {
	mu      sync.Mutex
	next    int64
	cursors map[int64]*cursor
}

func newCursorRegistry() *cursorRegistry {
	return &cursorRegistry{next: time.Now().UnixNano() & 0x7fffffffffff, cursors: map[int64]*cursor{}}
}

func (cr *cursorRegistry) add(c *cursor) int64 {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.next++
	c.id = cr.next
	c.lastUsed = time.Now()
	cr.cursors[c.id] = c
	return c.id
}

// take removes a cursor for exclusive use by one getMore; put returns it.
func (cr *cursorRegistry) take(id int64, ns string) (*cursor, error) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	c, ok := cr.cursors[id]
	if !ok {
		return nil, mongoerr.New(mongoerr.CursorNotFound, "cursor id %d not found", id)
	}
	if c.ns != ns {
		return nil, mongoerr.New(mongoerr.Unauthorized, "Requested getMore on namespace '%s', but cursor belongs to a different namespace %s", ns, c.ns)
	}
	delete(cr.cursors, id)
	return c, nil
}

func (cr *cursorRegistry) put(c *cursor) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	c.lastUsed = time.Now()
	cr.cursors[c.id] = c
}

// kill removes cursors and reports which existed.
func (cr *cursorRegistry) kill(ids []int64) (killed, notFound []int64) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	for _, id := range ids {
		if _, ok := cr.cursors[id]; ok {
			delete(cr.cursors, id)
			killed = append(killed, id)
		} else {
			notFound = append(notFound, id)
		}
	}
	return killed, notFound
}

func (cr *cursorRegistry) reap(now time.Time, idle time.Duration) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	for id, c := range cr.cursors {
		if now.Sub(c.lastUsed) > idle {
			delete(cr.cursors, id)
		}
	}
}

// nextBatch returns up to n documents (n <= 0: no count limit) within the byte limit.
func (c *cursor) nextBatch(n int) bson.A {
	batch := bson.A{}
	size := 0
	for c.pos < len(c.docs) && (n <= 0 || len(batch) < n) {
		d := c.docs[c.pos]
		if len(batch) > 0 && size+len(d) > maxBatchBytes {
			break
		}
		batch = append(batch, d)
		size += len(d)
		c.pos++
	}
	return batch
}

func (c *cursor) exhausted() bool { return c.stream == nil && c.pos >= len(c.docs) }

// cursorReply builds the {cursor: {firstBatch|nextBatch, id, ns}} reply fields.
func cursorReply(id int64, ns, batchKey string, batch bson.A, extra ...bson.E) bson.D {
	cur := bson.D{{Key: batchKey, Value: batch}}
	cur = append(cur, extra...)
	cur = append(cur, bson.E{Key: "id", Value: id}, bson.E{Key: "ns", Value: ns})
	return bson.D{{Key: "cursor", Value: cur}}
}

// getMoreError returns err as a getMore on c answers it: on a change stream, an error the
// stream can resume from carries the ResumableChangeStreamError label, as mongod adds it
// (drivers resume on the label, not on the code).
func (c *cursor) getMoreError(err error) error {
	if err == nil || c.stream == nil {
		return err
	}
	e := mongoerr.As(err)
	if !isResumableStreamCode(e.Code) || slices.Contains(e.Labels, resumableLabel) {
		return err
	}
	labeled := *e
	labeled.Labels = append(slices.Clip(e.Labels), resumableLabel)
	return &labeled
}

const resumableLabel = "ResumableChangeStreamError"

// isResumableStreamCode reports the codes mongod labels ResumableChangeStreamError on a
// change stream's getMore: retriable, network, "not primary", shutdown, stale-shard and
// retarget errors (the change-streams spec's allow list).
func isResumableStreamCode(code int32) bool {
	switch code {
	case 6, 7, 89, 91, 133, 150, 189, 234, 262, 9001, 10107, 11600, 11602, 13388, 13435, 13436, 63:
		return true
	}
	return false
}

// cursorBatchSize reads cursor.batchSize of a command that returns a cursor.
func cursorBatchSize(r *request) int64 {
	cv, _ := r.arg("cursor")
	if bs, ok := bsonval.Get(asDoc(cv), "batchSize"); ok {
		if n, ok := toInt64(bs); ok && n >= 0 {
			return n
		}
	}
	return defaultFirstBatch
}

func encodeAll[T any](items []T, toDoc func(T) bson.D) ([]bson.Raw, error) {
	out := make([]bson.Raw, 0, len(items))
	for _, it := range items {
		raw, err := bsonval.Encode(toDoc(it))
		if err != nil {
			return nil, mongoerr.New(mongoerr.InternalError, "encode: %v", err)
		}
		out = append(out, raw)
	}
	return out, nil
}

// defaultFirstBatch is mongod's default number of documents in a first batch.
const defaultFirstBatch = 101

// firstBatch returns the first batch of docs and registers a cursor for the rest.
func (s *Server) firstBatch(ns string, docs []bson.Raw, batchSize int64, single bool) bson.D {
	c := &cursor{ns: ns, docs: docs}
	if batchSize == 0 && !single {
		// batchSize 0: an empty first batch and an open cursor, as mongod (which has not run
		// the query yet); the documents come with getMore.
		return cursorReply(s.cursors.add(c), ns, "firstBatch", bson.A{})
	}
	batch := c.nextBatch(int(batchSize))
	var id int64
	if !single && !c.exhausted() {
		id = s.cursors.add(c)
	}
	return cursorReply(id, ns, "firstBatch", batch)
}
