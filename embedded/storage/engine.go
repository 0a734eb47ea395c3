package storage

import (
	"context"
	"crypto/rand"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
)

// Engine is the storage engine. It is safe for concurrent use.
type Engine struct {
	opts   Options
	logger *zap.Logger
	now    func() time.Time

	// mu guards st, lastTS, closed and scratch; Write holds it exclusively.
	mu      sync.RWMutex
	st      *state
	lastTS  OpTime
	closed  bool
	scratch []byte
	// cloneMu serializes the tree clones that yielding scans take under the read lock
	// (btree's Clone writes the tree's copy-on-write context).
	cloneMu sync.Mutex

	oplog   oplog
	durable atomic.Uint64 // tsU64 of the last durable OpTime

	// cmu guards the commit pipeline below (lock order: mu before cmu).
	cmu        sync.Mutex
	ccond      *sync.Cond
	pending    []byte // framed log records not yet written
	spare      []byte
	pendingTS  OpTime
	syncing    bool
	werr       error // sticky log failure
	wal        *walFile
	closing    bool
	bg         sync.WaitGroup
	compacting atomic.Bool
	lock       *dirLock
	syncs      atomic.Int64 // log writes (for tests: group commit shares them)
	beforeSync func()       // test hook run by the commit leader before writing
}

// Open opens (or creates) the engine. With a data directory it loads the newest snapshot
// and replays the logs after it; a torn or corrupt tail of the last log is truncated with a
// warning saying how many bytes were dropped.
func Open(opts Options) (*Engine, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CompactAfterBytes <= 0 {
		opts.CompactAfterBytes = DefaultCompactAfterBytes
	}
	if opts.OplogMaxBytes <= 0 {
		opts.OplogMaxBytes = DefaultOplogMaxBytes
	}
	e := &Engine{opts: opts, logger: opts.Logger, now: opts.Now, st: newState()}
	e.ccond = sync.NewCond(&e.cmu)
	e.oplog.maxBytes = opts.OplogMaxBytes
	e.oplog.maxAge = opts.OplogMaxAge
	if opts.Dir != "" {
		if err := e.recover(); err != nil {
			return nil, err
		}
	}
	e.durable.Store(tsU64(e.lastTS))
	return e, nil
}

// Close flushes pending writes and closes the log. It is idempotent.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()

	e.cmu.Lock()
	e.closing = true
	e.cmu.Unlock()
	e.bg.Wait()

	e.mu.Lock()
	defer e.mu.Unlock()
	err := e.waitDurable(e.lastTS)
	e.cmu.Lock()
	w := e.wal
	e.wal = nil
	e.cmu.Unlock()
	if w != nil {
		if cerr := w.close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if e.lock != nil {
		e.lock.release()
	}
	return err
}

// Read runs fn with shared access: fn sees a consistent state. fn must not keep the Reader.
func (e *Engine) Read(fn func(r *Reader)) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	r := Reader{e: e}
	fn(&r)
}

// ReadYielding is Read for one long scan: a Find or FindInOrder of fn's Reader that runs
// past a few milliseconds releases the lock for the rest of the scan and continues on a
// point-in-time clone of the index (see scanner), so writers and other readers are not
// blocked behind it. The scan returns the documents of one consistent moment, but the state
// fn sees in later calls (after a Find returns) may be newer: fn must not rely on two calls
// agreeing. Use Read when it must. The Find callbacks may run without the lock: they must
// not use the Reader.
func (e *Engine) ReadYielding(fn func(r *Reader)) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	r := Reader{e: e, yield: true}
	fn(&r)
}

// Write runs fn with exclusive access (fn may let others in between its mutations:
// Writer.Yield). Each mutation fn makes takes effect immediately and on
// its own: there is no rollback, mutations made before fn returns an error stay. Write returns
// once every mutation of fn is durable (fsync'd when Options.Dir != "" and !NoSync), with the
// OpTime of the last mutation (zero if none) and fn's error. Concurrent Writes share fsyncs,
// which happen outside the exclusive lock. ctx is checked before fn runs; once fn has run,
// Write waits for durability regardless of ctx. After a log write failure every Write fails.
func (e *Engine) Write(ctx context.Context, fn func(w *Writer) error) (OpTime, error) {
	if err := ctx.Err(); err != nil {
		return OpTime{}, err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return OpTime{}, ErrClosed
	}
	if err := e.failure(); err != nil {
		e.mu.Unlock()
		return OpTime{}, err
	}
	if err := ctx.Err(); err != nil {
		e.mu.Unlock()
		return OpTime{}, err
	}
	w := Writer{Reader: Reader{e: e}, rec: e.scratch[:0]}
	if e.wal != nil {
		w.rec = beginRecord(w.rec)
	}
	fnErr := e.run(fn, &w)
	w.logRecord()
	if w.n == 0 {
		e.mu.Unlock()
		return OpTime{}, fnErr
	}
	ts, logged := w.last, e.wal != nil // e.wal changes under the lock (compaction)
	e.mu.Unlock()
	e.oplog.flush() // the entries queued under the lock (oplog.appendLater), before they are published
	if logged {
		if err := e.waitDurable(ts); err != nil {
			return ts, err
		}
		e.maybeCompact()
	} else {
		e.publish(ts)
	}
	return ts, fnErr
}

// run calls fn, turning a panic into an error: the mutations fn made before panicking are
// still logged, and the lock is released normally.
func (e *Engine) run(fn func(w *Writer) error, w *Writer) (err error) {
	defer func() {
		if p := recover(); p != nil {
			e.logger.Error("storage: panic in Write", zap.Any("panic", p), zap.Stack("stack"))
			err = mongoerr.New(mongoerr.InternalError, "panic during write: %v", p)
		}
	}()
	return fn(w)
}

func (e *Engine) failure() error {
	e.cmu.Lock()
	defer e.cmu.Unlock()
	return e.werr
}

// publish makes the oplog up to ts visible (ts is durable).
func (e *Engine) publish(ts OpTime) {
	v := tsU64(ts)
	for {
		cur := e.durable.Load()
		if cur >= v {
			return
		}
		if e.durable.CompareAndSwap(cur, v) {
			break
		}
	}
	e.oplog.wake()
}

// waitDurable returns once every record up to ts is written (and synced). The first waiter
// that finds no write in progress becomes the leader and writes everything pending.
func (e *Engine) waitDurable(ts OpTime) error {
	e.cmu.Lock()
	defer e.cmu.Unlock()
	for {
		if e.werr != nil {
			return e.werr
		}
		if e.wal == nil || len(e.pending) == 0 && !e.syncing {
			return nil
		}
		if tsU64(ts) <= e.durable.Load() {
			return nil
		}
		if e.syncing {
			e.ccond.Wait()
			continue
		}
		e.syncing = true
		buf, target, w := e.pending, e.pendingTS, e.wal
		e.pending = e.spare[:0]
		e.cmu.Unlock()
		if e.beforeSync != nil {
			e.beforeSync()
		}
		e.syncs.Add(1)
		err := w.write(buf, !e.opts.NoSync)
		e.cmu.Lock()
		e.spare = buf[:0]
		e.syncing = false
		if err != nil {
			e.werr = fmt.Errorf("write log: %w", err)
			e.logger.Error("storage: log write failed; refusing further writes", zap.Error(err))
		} else {
			e.publish(target)
		}
		e.ccond.Broadcast()
	}
}

// LastOpTime returns the OpTime of the last mutation (visible to Read; possibly not yet durable).
func (e *Engine) LastOpTime() OpTime {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.lastTS
}

// OplogRange returns the TS of the first and last durable retained entries (zero if none).
func (e *Engine) OplogRange() (first, last OpTime) {
	return e.oplog.rangeTS(e.durableTS())
}

// OplogAfter returns up to limit (<= 0: no limit) durable entries with TS > after, in commit
// order. Entries are shared: do not modify them or their documents.
func (e *Engine) OplogAfter(after OpTime, limit int) []Entry {
	return e.oplog.after(after, e.durableTS(), limit)
}

// OplogAfterRaw is OplogAfter without decoding the entries: each RawEntry reads its fields or
// decodes itself on demand.
func (e *Engine) OplogAfterRaw(after OpTime, limit int) []RawEntry {
	return e.oplog.afterRaw(after, e.durableTS(), limit)
}

// OplogNotify returns a channel that is closed when new oplog entries become durable (visible
// to OplogAfter). Take the channel before calling OplogAfter to not miss a wake-up.
func (e *Engine) OplogNotify() <-chan struct{} { return e.oplog.notifyChan() }

func (e *Engine) durableTS() OpTime {
	v := e.durable.Load()
	return OpTime{T: uint32(v >> 32), I: uint32(v)}
}

// nextTS returns the OpTime the next mutation gets (not yet taken).
func (e *Engine) nextTS(now time.Time) OpTime {
	secs := uint32(now.Unix())
	switch {
	case secs > e.lastTS.T:
		return OpTime{T: secs, I: 1}
	case e.lastTS.I == math.MaxUint32:
		return OpTime{T: e.lastTS.T + 1, I: 1}
	}
	return OpTime{T: e.lastTS.T, I: e.lastTS.I + 1}
}

func newUUID() bson.Binary {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return bson.Binary{Subtype: 4, Data: b[:]}
}

// Reader gives read access to the engine's state during Engine.Read or Engine.Write.
type Reader struct {
	e     *Engine
	iter  int    // Find callbacks running
	yield bool   // a long Find may release the lock (ReadYielding)
	conds []cond // Find's scratch space
}

// Databases lists the databases that have collections, by name.
func (r *Reader) Databases() []DatabaseInfo {
	names := make([]string, 0, len(r.e.st.dbs))
	for n := range r.e.st.dbs {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]DatabaseInfo, 0, len(names))
	for _, n := range names {
		di := DatabaseInfo{Name: n}
		docs := 0
		for _, c := range r.e.st.dbs[n].colls {
			di.SizeOnDisk += c.size
			docs += c.count()
		}
		di.Empty = docs == 0
		out = append(out, di)
	}
	return out
}

// Collections lists a database's collections by name.
func (r *Reader) Collections(db string) []CollectionInfo {
	cs := r.e.st.sortedColls(db)
	out := make([]CollectionInfo, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.info())
	}
	return out
}

// Collection describes one collection.
func (r *Reader) Collection(db, coll string) (CollectionInfo, bool) {
	c := r.e.st.coll(db, coll)
	if c == nil {
		return CollectionInfo{}, false
	}
	return c.info(), true
}

// Find calls fn for every document that might match filter (a superset: the caller matches
// exactly), each at most once, until fn returns false. It uses an index when the filter
// constrains an index prefix with top-level equality ({f: v}, {f: {$eq: v}}, {f: {$in: [..]}})
// and/or a range ($gt/$gte/$lt/$lte) on the next key field, also inside a top-level $and;
// otherwise it scans in _id order. fn must not mutate the engine (a Writer refuses to).
func (r *Reader) Find(db, coll string, filter bson.D, fn func(d *Doc) bool) {
	c := r.e.st.coll(db, coll)
	if c == nil {
		return
	}
	p := c.planFor(filter, &r.conds)
	r.iter++
	defer func() { r.iter-- }()
	c.scan(r, p, fn)
}

// FindInOrder is Find for a query sorted by one field, path, ascending (or descending, desc):
// when the index Find would use yields the candidates in that order (a range condition on
// path right after the index's equality prefix, see plan.inOrderOf) it calls fn with them in
// order, so a sorted query with a limit reads only what it returns, and reports true. It
// reports false without calling fn otherwise: the caller finds and sorts.
func (r *Reader) FindInOrder(db, coll string, filter bson.D, path string, desc bool, fn func(d *Doc) bool) bool {
	c := r.e.st.coll(db, coll)
	if c == nil {
		return true
	}
	p := c.planFor(filter, &r.conds)
	if !p.inOrderOf(path) {
		return false
	}
	r.iter++
	defer func() { r.iter-- }()
	if desc {
		c.scanDesc(r, p, fn)
	} else {
		c.scan(r, p, fn)
	}
	return true
}

// Get returns the document with the given _id.
func (r *Reader) Get(db, coll string, id any) (*Doc, bool) {
	c := r.e.st.coll(db, coll)
	if c == nil {
		return nil, false
	}
	d := c.get(keyOfID(id))
	return d, d != nil
}

// Count returns the number of documents of a collection.
func (r *Reader) Count(db, coll string) int {
	c := r.e.st.coll(db, coll)
	if c == nil {
		return 0
	}
	return c.count()
}
