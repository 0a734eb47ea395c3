package storage

import (
	"bytes"
	"time"

	"github.com/google/btree"
)

// A long scan does not hold the engine's read lock for its whole length: a Go RWMutex blocks
// new readers once a writer waits, so a find over a million documents under the lock would
// stall every other command (writes and reads) for seconds. A scan of a yielding Reader (see
// Engine.ReadYielding) reads under the lock for at most yieldAfterEntries entries or
// yieldAfter, then takes a lazy copy-on-write clone of the index tree (O(1), still under the
// lock), releases the lock and continues strictly after the last entry it visited on the
// clone. Documents are immutable, so the scan returns exactly the documents of the moment
// the lock was released: a point-in-time view (stronger than MongoDB, whose yielding scans
// may return a document changed during the scan twice or not at all). The collection may be
// written, dropped or renamed meanwhile; the scan neither sees nor minds it.
const (
	yieldAfterEntries = 1024
	yieldAfter        = 2 * time.Millisecond
	// yieldCheckEvery is how often (entries) a scan under the lock reads the clock.
	yieldCheckEvery = 64
)

// scanner walks the entries of one index tree for a scan; see the comment above.
type scanner struct {
	r     *Reader
	tree  *btree.BTreeG[entry]
	yield bool // may release the lock (a yielding Reader)
	// unlocked is set once the scan runs on a clone without the lock.
	unlocked bool
	n        int
	start    time.Time
	last     []byte // key of the last entry visited
	paused   bool   // the iteration stopped to release the lock
	stopped  bool   // the visitor asked to stop
}

func (r *Reader) scanner(tree *btree.BTreeG[entry]) *scanner {
	return &scanner{r: r, tree: tree, yield: r.yield}
}

// finish re-acquires the read lock if the scan released it (Engine.ReadYielding releases it
// when fn returns). Call it deferred: a panicking visitor still leaves the lock held.
func (s *scanner) finish() {
	if s.unlocked {
		s.unlocked = false
		s.r.e.mu.RLock()
	}
}

// release clones the tree and releases the read lock: the rest of the scan runs on the clone.
func (s *scanner) release() {
	e := s.r.e
	// Clone writes the tree's copy-on-write context: concurrent readers must not clone at once.
	e.cloneMu.Lock()
	s.tree = s.tree.Clone()
	e.cloneMu.Unlock()
	s.unlocked = true
	e.mu.RUnlock()
}

// visited counts an entry and reports whether the scan should now release the lock.
func (s *scanner) visited(key []byte) bool {
	s.last = key
	if !s.yield || s.unlocked {
		return false
	}
	s.n++
	if s.n == 1 {
		s.start = time.Now()
	}
	return s.n >= yieldAfterEntries || s.n%yieldCheckEvery == 0 && time.Since(s.start) >= yieldAfter
}

// visit wraps fn for one pass of a scan: it skips the entry at from when skip (the last one
// visited before a pause), records stopped when fn stops, and pauses (returns false with
// paused set) when the scan should release the lock.
func (s *scanner) visit(from []byte, skip bool, fn func(e entry) bool) func(e entry) bool {
	return func(e entry) bool {
		if skip && bytes.Equal(e.key, from) {
			return true
		}
		if !fn(e) {
			s.stopped = true
			return false
		}
		if s.visited(e.key) {
			s.paused = true
			return false
		}
		return true
	}
}

// ascend calls fn for the entries with key in [lo, hi) (hi nil: no upper bound) in order,
// until fn returns false; it reports false then.
func (s *scanner) ascend(lo, hi []byte, fn func(e entry) bool) bool {
	from, skip := lo, false
	for {
		s.paused = false
		it := s.visit(from, skip, fn)
		if hi == nil {
			s.tree.AscendGreaterOrEqual(entry{key: from}, it)
		} else {
			s.tree.AscendRange(entry{key: from}, entry{key: hi}, it)
		}
		if s.stopped {
			return false
		}
		if !s.paused {
			return true
		}
		s.release()
		from, skip = s.last, true
	}
}

// descend calls fn for the entries with key <= hi (hi nil: all) in reverse order, until fn
// returns false.
func (s *scanner) descend(hi []byte, fn func(e entry) bool) {
	from, skip := hi, false
	for {
		s.paused = false
		it := s.visit(from, skip, fn)
		if from == nil {
			s.tree.Descend(it)
		} else {
			s.tree.DescendLessOrEqual(entry{key: from}, it)
		}
		if s.stopped || !s.paused {
			return
		}
		s.release()
		from, skip = s.last, true
	}
}
