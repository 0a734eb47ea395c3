package storage

import (
	"sort"
	"sync"
	"time"
)

// entryOverhead approximates the memory an oplog entry costs beyond its document.
const entryOverhead = 256

// oplog is the retained, commit-ordered list of entries. Entries are appended under the
// engine's exclusive lock (so in OpTime order); the backing array's elements in [head, len)
// are never modified in place, so a captured slice of it is an immutable view.
type oplog struct {
	mu       sync.RWMutex
	ents     []Entry
	head     int
	bytes    int64
	maxBytes int64
	maxAge   time.Duration

	notifyMu sync.Mutex
	notify   chan struct{}
}

func tsU64(t OpTime) uint64 { return uint64(t.T)<<32 | uint64(t.I) }

func tsLess(a, b OpTime) bool { return tsU64(a) < tsU64(b) }

func (o *oplog) append(ent Entry, now time.Time) {
	o.mu.Lock()
	o.ents = append(o.ents, ent)
	o.bytes += ent.size
	o.trimLocked(now)
	o.mu.Unlock()
}

// trimLocked drops the oldest entries beyond the retention limits (keeping the newest).
func (o *oplog) trimLocked(now time.Time) {
	for len(o.ents)-o.head > 1 {
		old := &o.ents[o.head]
		if o.bytes <= o.maxBytes && (o.maxAge <= 0 || now.Sub(old.Wall) <= o.maxAge) {
			break
		}
		o.bytes -= old.size
		o.head++
	}
	if o.head > 1024 && o.head > len(o.ents)/2 {
		// Copy into a new array (never in place: captured views share the old one).
		n := make([]Entry, len(o.ents)-o.head, (len(o.ents)-o.head)*2)
		copy(n, o.ents[o.head:])
		o.ents, o.head = n, 0
	}
}

// view returns the retained entries as an immutable slice.
func (o *oplog) view() []Entry {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.ents[o.head:len(o.ents):len(o.ents)]
}

// after returns up to limit (<= 0: all) entries with after < TS <= durable.
func (o *oplog) after(after, durable OpTime, limit int) []Entry {
	o.mu.RLock()
	defer o.mu.RUnlock()
	ents := o.ents[o.head:]
	a, d := tsU64(after), tsU64(durable)
	i := sort.Search(len(ents), func(i int) bool { return tsU64(ents[i].TS) > a })
	var out []Entry
	for ; i < len(ents) && tsU64(ents[i].TS) <= d; i++ {
		if limit > 0 && len(out) >= limit {
			break
		}
		out = append(out, ents[i])
	}
	return out
}

func (o *oplog) rangeTS(durable OpTime) (first, last OpTime) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	ents := o.ents[o.head:]
	if len(ents) == 0 || tsLess(durable, ents[0].TS) {
		return OpTime{}, OpTime{}
	}
	d := tsU64(durable)
	i := sort.Search(len(ents), func(i int) bool { return tsU64(ents[i].TS) > d })
	return ents[0].TS, ents[i-1].TS
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
