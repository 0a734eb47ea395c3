package watcher

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gameops/rollup/internal/status"
)

// PartitionState is one partition as this instance sees it, for metrics (leader state).
type PartitionState struct {
	// Partition is the partition's name ("" for the partition of every project).
	Partition string
	// ID is its lease and checkpoint id.
	ID string
	// Leader says this instance runs the partition now.
	Leader bool
	// Term is the lease term it leads with (0 without leases, or when not leading).
	Term int64
	// Since is when it became the leader (zero when not leading).
	Since time.Time
}

// partHealth is what the status needs to know of one partition beyond PartitionState.
type partHealth struct {
	// streaming: its stream is open and made progress since it last failed.
	streaming bool
	// problem is the last failure of its stream while leading.
	problem string
	// elsewhere: another owner holds its lease; standby: this instance leads its maximum.
	elsewhere, standby bool
}

// leadership is the live PartitionState of every partition, and the watcher's status.
type leadership struct {
	mu     sync.Mutex
	parts  []PartitionState
	health []partHealth
	// blocked says why the watcher cannot lead anything now ("" when it can).
	blocked string
	// leased: partitions are led under leases (not leading one can be legitimate).
	leased  bool
	tracker *status.Tracker
}

func newLeadership(opts Options) *leadership {
	l := &leadership{
		parts:   make([]PartitionState, len(opts.Partitions)),
		health:  make([]partHealth, len(opts.Partitions)),
		leased:  opts.Leases,
		tracker: opts.Status,
	}
	for i, p := range opts.Partitions {
		l.parts[i] = PartitionState{Partition: p.Name, ID: p.id(opts.Name)}
	}
	return l
}

func (l *leadership) set(i int, leader bool, term int64, since time.Time) {
	l.update(func() {
		l.parts[i].Leader, l.parts[i].Term, l.parts[i].Since = leader, term, since
		l.health[i].streaming, l.health[i].problem = false, ""
		if leader {
			l.health[i].elsewhere, l.health[i].standby = false, false
		}
	})
}

// drop records that this instance no longer leads partition i with term (a newer
// leadership is left alone).
func (l *leadership) drop(i int, term int64) {
	l.update(func() {
		if l.parts[i].Term == term {
			l.parts[i].Leader, l.parts[i].Term, l.parts[i].Since = false, 0, time.Time{}
			l.health[i].streaming, l.health[i].problem = false, ""
		}
	})
}

// streaming records that partition i's stream made progress (ok) or failed with problem.
func (l *leadership) streaming(i int, ok bool, problem string) {
	l.update(func() { l.health[i].streaming, l.health[i].problem = ok, problem })
}

// away records why this instance does not lead partition i: another owner holds it
// (elsewhere), or this instance leads its maximum (standby).
func (l *leadership) away(i int, elsewhere, standby bool) {
	l.update(func() { l.health[i].elsewhere, l.health[i].standby = elsewhere, standby })
}

// block records why the watcher cannot lead now ("" clears it).
func (l *leadership) block(why string) {
	l.update(func() { l.blocked = why })
}

// update runs f under the lock, then reports the status.
func (l *leadership) update(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
	if l.tracker == nil {
		return
	}
	if reason := l.reason(); reason != "" {
		l.tracker.NotReady(reason)
	} else {
		l.tracker.Ready()
	}
}

// reason says why the watcher is not ready ("" when it is): ready means every partition this
// instance leads has a stream making progress, and every other partition is held by another
// live owner (or this instance already leads its maximum).
func (l *leadership) reason() string {
	var why []string
	if l.blocked != "" {
		why = append(why, l.blocked)
	}
	for i, p := range l.parts {
		h := l.health[i]
		switch {
		case p.Leader && h.streaming:
		case p.Leader && h.problem != "":
			why = append(why, fmt.Sprintf("partition %s: %s", p.ID, h.problem))
		case p.Leader:
			why = append(why, fmt.Sprintf("partition %s: starting its change stream", p.ID))
		case l.leased && (h.elsewhere || h.standby):
		case l.leased:
			why = append(why, fmt.Sprintf("partition %s: no leader yet", p.ID))
		default:
			why = append(why, fmt.Sprintf("partition %s: not running", p.ID))
		}
	}
	if len(why) > maxReasons {
		why = append(why[:maxReasons], fmt.Sprintf("and %d more", len(why)-maxReasons))
	}
	return strings.Join(why, "; ")
}

// maxReasons bounds the problems the status lists.
const maxReasons = 5

// Leadership returns the state of every partition (Options.Partitions order): whether this
// instance leads it, with which term, since when.
func (w *Watcher) Leadership() []PartitionState {
	w.leaders.mu.Lock()
	defer w.leaders.mu.Unlock()
	return append([]PartitionState(nil), w.leaders.parts...)
}
