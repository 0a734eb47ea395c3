package status

import (
	"sync"
	"time"
)

// State is a snapshot of one component's readiness.
type State struct {
	// Component names the component ("bulk", "watcher", "migrations", …).
	Component string `json:"component"`
	// Ready says the component is making progress.
	Ready bool `json:"ready"`
	// Since is when Ready last changed (or the tracker was made).
	Since time.Time `json:"since"`
	// Reason says why it is not ready (the last error, "waiting for the store", …).
	Reason string `json:"reason,omitempty"`
}

// Tracker holds one component's State. Its methods are safe for concurrent use and do nothing
// on a nil *Tracker.
type Tracker struct {
	mu  sync.Mutex
	st  State
	now func() time.Time
}

// New returns a tracker of component that starts not ready, for reason (e.g. "starting").
func New(component, reason string) *Tracker {
	return newAt(component, reason, time.Now)
}

func newAt(component, reason string, now func() time.Time) *Tracker {
	return &Tracker{st: State{Component: component, Since: now(), Reason: reason}, now: now}
}

// Ready records that the component is making progress. Since changes only when it was not
// ready before.
func (t *Tracker) Ready() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.st.Ready {
		t.st.Ready, t.st.Since = true, t.now()
	}
	t.st.Reason = ""
}

// NotReady records that the component cannot make progress, and why. Since keeps the start of
// the outage when it was not ready already; the reason is updated.
func (t *Tracker) NotReady(reason string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.st.Ready {
		t.st.Ready, t.st.Since = false, t.now()
	}
	t.st.Reason = reason
}

// State returns a snapshot (the zero State for a nil tracker).
func (t *Tracker) State() State {
	if t == nil {
		return State{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st
}

// States returns the snapshots of ts, skipping nil trackers.
func States(ts ...*Tracker) []State {
	out := make([]State, 0, len(ts))
	for _, t := range ts {
		if t != nil {
			out = append(out, t.State())
		}
	}
	return out
}
