package storage

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gameops/rollup/embedded/bsonval"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

const (
	// segSize is the size of the oplog's byte segments.
	segSize = 1 << 20
	// refOverhead approximates the memory of an entry's reference.
	refOverhead = 32
	// refChunk is how many references one chunk of the oplog's reference list holds (128 KiB).
	refChunk = 1 << 12
)

// opRef locates one encoded entry. It holds no pointers, so the retained oplog costs the
// garbage collector nothing to scan however large it is.
type opRef struct {
	ts   uint64
	wall int64 // unix ms
	seg  uint64
	off  uint32
	n    uint32
}

// oplog is the retained, commit-ordered oplog. Entries are stored encoded (the log form) in
// append-only byte segments and decoded when read. Entries are appended or queued
// (appendLater) under the engine's exclusive lock (so in OpTime order) and never change once
// written, so a captured view (the reference slice and segment headers) is immutable.
type oplog struct {
	mu       sync.RWMutex
	refs     refList  // refs.at(head)... retained
	head     int      // global index of the oldest retained entry
	segs     [][]byte // segs[i] is segment segBase+i
	segBase  uint64
	bytes    int64
	maxBytes int64
	maxAge   time.Duration

	// queue holds the entries committed by appendLater but not yet copied into the
	// segments, in commit order (qmu guards it and queued, its length for a lock-free check).
	qmu    sync.Mutex
	queue  []queuedEntry
	spareQ []queuedEntry
	queued atomic.Int64

	notifyMu sync.Mutex
	notify   chan struct{}
}

// entryBufs recycles the buffers of entries encoded before a Write (IndexSet.Prepare) once
// the oplog has copied them, so that encoding outside the lock does not add an allocation
// per insert.
var entryBufs sync.Pool

// maxPooledEntry bounds the buffers kept: a rare large document's is left to the collector.
const maxPooledEntry = 16 << 10

// getEntryBuf returns an empty buffer of at least n bytes' capacity.
func getEntryBuf(n int) []byte {
	if b, ok := entryBufs.Get().(*[]byte); ok && cap(*b) >= n {
		return (*b)[:0]
	}
	return make([]byte, 0, max(n, 512))
}

func putEntryBuf(b []byte) {
	if cap(b) <= maxPooledEntry {
		b = b[:0]
		entryBufs.Put(&b)
	}
}

// queuedEntry is an entry appendLater took: its encoding (owned by the oplog from then on).
type queuedEntry struct {
	enc  []byte
	ts   OpTime
	wall time.Time
}

// refList is the oplog's list of references, in fixed-size chunks addressed by a global
// index that only grows: appending never moves a reference (a flat slice grown by doubling
// copied the whole retained list into a new array twice its size, hundreds of MB for a large
// oplog), and the chunks before the oldest retained entry are released whole. A reference is
// never modified once appended, so a copy of the chunk headers is an immutable view of the
// references appended so far.
type refList struct {
	chunks [][]opRef // chunks[k][j] has global index base + k*refChunk + j
	base   int
	n      int // global index after the last reference
}

func (l *refList) at(i int) opRef {
	j := i - l.base
	return l.chunks[j/refChunk][j%refChunk]
}

func (l *refList) push(r opRef) {
	last := len(l.chunks) - 1
	if last < 0 || len(l.chunks[last]) == refChunk {
		l.chunks = append(l.chunks, make([]opRef, 0, refChunk))
		last++
	}
	l.chunks[last] = append(l.chunks[last], r) // within capacity: never moves
	l.n++
}

// release drops the chunks wholly before global index head.
func (l *refList) release(head int) {
	for head-l.base >= refChunk {
		l.chunks[0] = nil
		l.chunks = l.chunks[1:]
		l.base += refChunk
	}
}

// oplogView is an immutable sequence of encoded entries: the references from global index
// head to refs.n when it was taken.
type oplogView struct {
	refs    refList
	head    int
	segs    [][]byte
	segBase uint64
}

func (v *oplogView) len() int { return v.refs.n - v.head }

func (v *oplogView) raw(i int) []byte {
	r := v.refs.at(v.head + i)
	return v.segs[r.seg-v.segBase][r.off : r.off+r.n]
}

func tsU64(t OpTime) uint64 { return uint64(t.T)<<32 | uint64(t.I) }

func tsFromU64(v uint64) OpTime { return OpTime{T: uint32(v >> 32), I: uint32(v)} }

func tsLess(a, b OpTime) bool { return tsU64(a) < tsU64(b) }

// append adds an encoded entry (copied), after the entries queued by appendLater.
func (o *oplog) append(enc []byte, ts OpTime, wall, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flushLocked()
	o.appendLocked(enc, ts, wall, now)
}

// appendLater adds an encoded entry that the caller gives up (it is not copied now): it is
// queued, in the order of the calls, and copied into the segments by the next flush, append
// or read, so that the copy is not made under the engine's exclusive lock. The engine
// flushes after every Write and Yield before it publishes their entries, and every read of
// the oplog flushes first, so a reader sees exactly what it saw when append copied at once.
func (o *oplog) appendLater(enc []byte, ts OpTime, wall time.Time) {
	o.qmu.Lock()
	o.queue = append(o.queue, queuedEntry{enc: enc, ts: ts, wall: wall})
	o.queued.Add(1)
	o.qmu.Unlock()
}

// flush copies the queued entries into the segments.
func (o *oplog) flush() {
	if o.queued.Load() == 0 {
		return
	}
	o.mu.Lock()
	o.flushLocked()
	o.mu.Unlock()
}

// flushLocked is flush under o.mu (which keeps two flushes from interleaving their entries).
func (o *oplog) flushLocked() {
	if o.queued.Load() == 0 {
		return
	}
	o.qmu.Lock()
	q := o.queue
	o.queue = o.spareQ[:0]
	o.queued.Store(0)
	o.qmu.Unlock()
	for i := range q {
		o.appendLocked(q[i].enc, q[i].ts, q[i].wall, q[i].wall)
		putEntryBuf(q[i].enc)
		q[i] = queuedEntry{}
	}
	o.spareQ = q[:0]
}

// appendLocked is append under o.mu.
func (o *oplog) appendLocked(enc []byte, ts OpTime, wall, now time.Time) {
	last := len(o.segs) - 1
	if last < 0 || len(o.segs[last])+len(enc) > cap(o.segs[last]) {
		o.segs = append(o.segs, make([]byte, 0, max(segSize, len(enc))))
		last++
	}
	seg := o.segs[last]
	o.refs.push(opRef{
		ts: tsU64(ts), wall: wall.UnixMilli(), seg: o.segBase + uint64(last), off: uint32(len(seg)), n: uint32(len(enc)),
	})
	o.segs[last] = append(seg, enc...) // within capacity: never moves
	o.bytes += int64(len(enc)) + refOverhead
	o.trimLocked(now)
}

// trimLocked drops the oldest entries beyond the retention limits (keeping the newest).
func (o *oplog) trimLocked(now time.Time) {
	minWall := int64(-1 << 63)
	if o.maxAge > 0 {
		minWall = now.Add(-o.maxAge).UnixMilli()
	}
	for o.refs.n-o.head > 1 {
		r := o.refs.at(o.head)
		if o.bytes <= o.maxBytes && r.wall >= minWall {
			break
		}
		o.bytes -= int64(r.n) + refOverhead
		o.head++
	}
	// Release segments no retained entry uses (views keep their own segment headers).
	if o.refs.n > o.head {
		for o.segBase < o.refs.at(o.head).seg {
			o.segs[0] = nil
			o.segs = o.segs[1:]
			o.segBase++
		}
	}
	o.refs.release(o.head)
}

// view returns the retained entries as an immutable view.
func (o *oplog) view() oplogView {
	o.flush()
	o.mu.RLock()
	defer o.mu.RUnlock()
	refs := o.refs
	refs.chunks = append([][]opRef(nil), o.refs.chunks...)
	return oplogView{
		refs:    refs,
		head:    o.head,
		segs:    append([][]byte(nil), o.segs...),
		segBase: o.segBase,
	}
}

func (o *oplog) rawLocked(i int) []byte {
	r := o.refs.at(i)
	return o.segs[r.seg-o.segBase][r.off : r.off+r.n]
}

// search returns the index of the first retained entry with TS > ts.
func (o *oplog) search(ts uint64) int {
	return o.head + sort.Search(o.refs.n-o.head, func(i int) bool { return o.refs.at(o.head+i).ts > ts })
}

// after returns up to limit (<= 0: all) entries with after < TS <= durable, decoded.
func (o *oplog) after(after, durable OpTime, limit int) []Entry {
	o.flush()
	o.mu.RLock()
	defer o.mu.RUnlock()
	d := tsU64(durable)
	var out []Entry
	for i := o.search(tsU64(after)); i < o.refs.n; i++ {
		if o.refs.at(i).ts > d || limit > 0 && len(out) >= limit {
			break
		}
		ent, err := decodeOplogEntry(o.rawLocked(i))
		if err != nil {
			// Entries are encoded by this process; a failure is a bug, not user input.
			continue
		}
		out = append(out, ent)
	}
	return out
}

// afterRaw is after without decoding: views of the encoded entries.
func (o *oplog) afterRaw(after, durable OpTime, limit int) []RawEntry {
	o.flush()
	o.mu.RLock()
	defer o.mu.RUnlock()
	d := tsU64(durable)
	var out []RawEntry
	for i := o.search(tsU64(after)); i < o.refs.n; i++ {
		if o.refs.at(i).ts > d || limit > 0 && len(out) >= limit {
			break
		}
		out = append(out, RawEntry{TS: tsFromU64(o.refs.at(i).ts), raw: o.rawLocked(i)})
	}
	return out
}

// RawEntry is a retained oplog entry as the oplog holds it, encoded: a change stream reads a
// few of its fields to decide whether the entry is an event it shows before it pays for
// decoding the whole entry (a document of hundreds of fields, its update description).
type RawEntry struct {
	TS  OpTime
	raw []byte // shared with the oplog: never modified
}

// Field returns a top-level field of the entry ("op", "db", "c", "d" for the document...).
func (r RawEntry) Field(name string) (bsoncore.Value, bool) {
	v, err := bsoncore.Document(r.raw).LookupErr(name)
	return v, err == nil
}

// Op returns the entry's operation (one of the Op* constants).
func (r RawEntry) Op() string { return r.str("op") }

// DB returns the entry's database.
func (r RawEntry) DB() string { return r.str("db") }

// Coll returns the entry's collection ("" for database-wide entries).
func (r RawEntry) Coll() string { return r.str("c") }

func (r RawEntry) str(name string) string {
	v, ok := r.Field(name)
	if !ok {
		return ""
	}
	s, _ := v.StringValueOK()
	return s
}

// Doc returns the encoding of the entry's document (the post-image of an insert, update or
// replace; nil when the entry has none).
func (r RawEntry) Doc() bson.Raw {
	v, ok := r.Field("d")
	if !ok {
		return nil
	}
	d, _ := v.DocumentOK()
	return bson.Raw(d)
}

// Bytes returns the entry's encoding (the log form), shared with the oplog: do not modify it.
func (r RawEntry) Bytes() []byte { return r.raw }

// Decode decodes the entry, as OplogAfter returns it.
func (r RawEntry) Decode() (Entry, error) { return decodeOplogEntry(r.raw) }

func (o *oplog) rangeTS(durable OpTime) (first, last OpTime) {
	o.flush()
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.refs.n == o.head || durable.IsZero() || tsU64(durable) < o.refs.at(o.head).ts {
		return OpTime{}, OpTime{}
	}
	i := o.search(tsU64(durable))
	return tsFromU64(o.refs.at(o.head).ts), tsFromU64(o.refs.at(i - 1).ts)
}

func (o *oplog) notifyChan() <-chan struct{} {
	o.notifyMu.Lock()
	defer o.notifyMu.Unlock()
	if o.notify == nil {
		o.notify = make(chan struct{})
	}
	return o.notify
}

func (o *oplog) wake() {
	o.notifyMu.Lock()
	if o.notify != nil {
		close(o.notify)
		o.notify = nil
	}
	o.notifyMu.Unlock()
}

// decodeOplogEntry decodes a retained entry, with its document decoded into independent
// values.
func decodeOplogEntry(raw []byte) (Entry, error) {
	ent, err := decodeEntry(raw)
	if err != nil {
		return ent, err
	}
	if ent.raw != nil {
		if ent.Doc, err = bsonval.Decode(ent.raw); err != nil {
			return ent, err
		}
		if len(ent.Doc) > 0 && ent.DocKey == nil {
			ent.DocKey = bson.D{ent.Doc[0]}
		}
	}
	return ent, nil
}

// entryTimes reads the OpTime and wall clock of an encoded entry.
func entryTimes(raw []byte) (OpTime, time.Time, error) {
	doc := bsoncore.Document(raw)
	tsv, err := doc.LookupErr("ts")
	if err != nil {
		return OpTime{}, time.Time{}, fmt.Errorf("entry without ts: %w", err)
	}
	t, i, ok := tsv.TimestampOK()
	if !ok {
		return OpTime{}, time.Time{}, fmt.Errorf("entry ts is not a timestamp")
	}
	var wall time.Time
	if wv, err := doc.LookupErr("w"); err == nil {
		if ms, ok := wv.DateTimeOK(); ok {
			wall = time.UnixMilli(ms)
		}
	}
	return OpTime{T: t, I: i}, wall, nil
}
