package bulk

import (
	"errors"
	"fmt"
	"time"

	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/store"
)

// ErrUnavailable reports that the store could not be reached, or did not confirm a write, after
// the retry policy (the driver's one retry, then one idempotent resend of the batch). The
// outcome of the affected items is unknown; resending them is always safe (absolute values and
// a version guard), so callers answer 503 and let the agent resend.
var ErrUnavailable = errors.New("store unavailable")

// ErrClosed reports that the writer stopped accepting items because its Run returned or is
// draining (shutdown). It wraps ErrUnavailable: nothing of the refused items was accepted, and
// resending to a running writer is safe.
var ErrClosed = fmt.Errorf("bulk writer closed: %w", ErrUnavailable)

// Key identifies one leaf document: the unique (id, type, timestamp) of the counts collection.
type Key struct {
	// ID is the node id.
	ID string
	// Type is the count type.
	Type string
	// Timestamp is the tick, aligned by the caller (UTC).
	Timestamp time.Time
}

// Item is one leaf count to write.
type Item struct {
	Key
	// Project is the project that owns the node.
	Project string
	// Online is the absolute count (never an increment).
	Online int64
	// Version is the agent's observation time in unix nanoseconds: the write applies only if
	// the stored version is lower.
	Version int64
	// SubmissionID is the agent's submission id, stored for tracing.
	SubmissionID string
}

// Outcome is what happened to one submitted item.
type Outcome int

const (
	// OutcomeUnknown means the item's outcome is not known: the store was unavailable (the
	// Result's Err wraps ErrUnavailable) or the writer stopped. A resend is safe.
	OutcomeUnknown Outcome = iota
	// OutcomeApplied means the item's value is durably stored.
	OutcomeApplied
	// OutcomeStale means a same-or-newer version of the key is stored; nothing to do (a resend
	// of an already applied item reports stale).
	OutcomeStale
	// OutcomeRejected means the store refused the item permanently; Err says why.
	OutcomeRejected
)

// String returns the lowercase name of o as the API reports it.
func (o Outcome) String() string {
	switch o {
	case OutcomeApplied:
		return "applied"
	case OutcomeStale:
		return "stale"
	case OutcomeRejected:
		return "rejected"
	default:
		return "unknown"
	}
}

// Result is the outcome of one item.
type Result struct {
	// Outcome is what happened.
	Outcome Outcome
	// Err is set for OutcomeRejected (the write error) and OutcomeUnknown (wraps ErrUnavailable
	// or ErrClosed).
	Err error
}

// Options tune a Writer. Zero fields take their defaults.
type Options struct {
	// MaxBatch is the most operations in one BulkWrite (default 1000). A batch is sent as
	// soon as MaxBatch items are pending and a worker is free; see "Batching policy" in docs/design/ingest.md
	// for partial batches.
	MaxBatch int
	// MaxDelay bounds how long a partial batch is held for more items once no batch is in
	// flight (default 100ms). Time spent waiting for the store to finish earlier batches
	// does not count: items arriving meanwhile join the batch at no cost.
	MaxDelay time.Duration
	// IdleGap sends a partial batch before MaxDelay once no batch is in flight and no item
	// arrived for this long (default MaxDelay/DefaultIdleGapDivisor, 20ms by default): the
	// producers have stopped or all wait for results. It is the latency of a lone Submit on an
	// idle writer. An IdleGap above MaxDelay has no effect.
	IdleGap time.Duration
	// MaxPending bounds the items accepted but not yet finished (queued or in flight); a
	// Submit that does not fit blocks (default 100,000).
	MaxPending int
	// Workers is how many BulkWrites may be in flight at once (default DefaultWorkers: half
	// the cores, 2 to 8; see store.WritesInFlightFor). Only full batches overlap: a partial
	// batch waits until nothing is in flight.
	Workers int
	// AttemptTimeout bounds each BulkWrite attempt (the driver's own retry included) with the
	// writer's own timer, never a context deadline (see "Retry policy" in docs/design/ingest.md); a timeout
	// counts as an unknown outcome. 0: only the client's server selection timeout applies.
	AttemptTimeout time.Duration
	// ProbeInterval is the least time between two probes of the store while it is down
	// (default 200ms): a Submit during an outage waits at most this long plus ProbeTimeout.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe of the store (default 1s).
	ProbeTimeout time.Duration
	// StoreMonitor, when set, is the driver's view of the deployment of the collection's
	// client: the writer then marks the store down as soon as the driver has seen no writable
	// server for a second, ending the writes that wait for one, and probes as soon as it sees
	// one again (see StoreMonitor).
	StoreMonitor *StoreMonitor
	// Tracker receives the writer's readiness (default: a new tracker of component "bulk");
	// see Writer.Tracker.
	Tracker *status.Tracker
	// RecordOutages makes the writer record each store outage it saw, once the store takes
	// writes again, as an event (store.EventOutage, for every project) in the events
	// collection of its collection's database, named by Instance: see OutageEvent.
	RecordOutages bool
	// Instance names this process in the outages it records (serve's --instance-id).
	Instance string
	// DrainTimeout bounds how long Run keeps writing pending items after its context is done
	// (default 5s); items still unwritten then end as OutcomeUnknown.
	DrainTimeout time.Duration
}

// Defaults of Options.
const (
	DefaultMaxBatch = 1000
	DefaultMaxDelay = 100 * time.Millisecond
	// DefaultIdleGapDivisor derives the default IdleGap from MaxDelay (MaxDelay/5), so that a
	// writer tuned by MaxDelay alone keeps both in proportion.
	DefaultIdleGapDivisor = 5
	DefaultMaxPending     = 100_000
	DefaultDrainTimeout   = 5 * time.Second
	DefaultProbeInterval  = 200 * time.Millisecond
	DefaultProbeTimeout   = time.Second
)

// DefaultWorkers is the default of Options.Workers: store.DefaultWritesInFlight, half the
// cores Go runs on, 2 to 8.
func DefaultWorkers() int { return store.DefaultWritesInFlight() }

func (o Options) withDefaults() Options {
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = DefaultMaxDelay
	}
	if o.IdleGap <= 0 {
		o.IdleGap = o.MaxDelay / DefaultIdleGapDivisor
	}
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers()
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = DefaultProbeInterval
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	return o
}
