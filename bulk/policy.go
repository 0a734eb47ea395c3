package bulk

import "time"

// policy decides when pending items become a batch (see "Batching policy" in docs/design/ingest.md). It is
// pure: every time it needs is passed in, so it is table-tested without a clock.
type policy struct {
	maxBatch int
	maxDelay time.Duration
	idleGap  time.Duration
}

// pendingSet describes the pending items as the policy sees them.
type pendingSet struct {
	n      int       // items pending
	oldest time.Time // arrival of the oldest pending item
	newest time.Time // the last arrival (the idle gap counts from it)
}

// cut is asked while a worker is free. inFlight is the number of batches being written, and
// idleSince the time the last of them finished (or Run started). It returns how many pending
// items to send now, or 0 and how long until the answer can change without an arrival or a
// finished batch (0: only those can change it).
//
//   - A full batch (maxBatch items) goes at once.
//   - drain: whatever is pending goes at once.
//   - A partial batch never goes while a batch is in flight: items keep coming while the
//     store is busy, and the finishing batch releases its submitters, who are about to submit
//     more.
//   - Once nothing is in flight, a partial batch goes when no item arrived for idleGap, or
//     when it has been held for maxDelay. Both count from idleSince at the earliest: time spent
//     waiting for the store is not time spent holding the batch.
func (p policy) cut(now, idleSince time.Time, inFlight int, s pendingSet, drain bool) (int, time.Duration) {
	switch {
	case s.n == 0:
		return 0, 0
	case s.n >= p.maxBatch:
		return p.maxBatch, 0
	case drain:
		return s.n, 0
	case inFlight > 0:
		return 0, 0
	}
	held := later(s.oldest, idleSince)  // the batch could have been sent from here on
	quiet := later(s.newest, idleSince) // the last sign of producers
	deadline := held.Add(p.maxDelay)
	if idle := quiet.Add(p.idleGap); idle.Before(deadline) {
		deadline = idle
	}
	if wait := deadline.Sub(now); wait > 0 {
		return 0, wait
	}
	return s.n, 0
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// clock is the writer's time source; tests substitute a fake one to drive the policy
// deterministically.
type clock interface {
	now() time.Time
	// after returns a channel that receives once d has passed, and a function that cancels it.
	after(d time.Duration) (<-chan time.Time, func())
}

type realClock struct{}

func (realClock) now() time.Time { return time.Now() }

func (realClock) after(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}
