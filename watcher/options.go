package watcher

import (
	"sync/atomic"
	"time"

	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/lease"
	"github.com/gameops/rollup/recompute"
	"github.com/gameops/rollup/retry"
)

// Options tune a Watcher. Zero fields take their defaults.
type Options struct {
	// Name is the checkpoint's _id in the checkpoints collection (default "watcher").
	Name string
	// BatchSize is the change stream's batch size (0 = the server's default).
	BatchSize int32
	// MaxAwait is how long a getMore waits for events (default 100ms). An empty getMore ends
	// a burst, so this is also how long the stream must be quiet before a burst is written.
	MaxAwait time.Duration
	// MaxBurstDelay bounds how long leaves of a burst wait for the burst to end while the
	// stream's reader stays ahead of the writes (a backlog; default 300ms).
	MaxBurstDelay time.Duration
	// MinBurstDelay is how long a burst keeps taking the batches the stream delivers once
	// every batch read so far is in it (default 10ms), or longer: as long as the previous
	// burst's writes took; see MaxBurstDelay.
	MinBurstDelay time.Duration
	// MaxBurst bounds the leaves of a burst (default 200,000).
	MaxBurst int
	// CheckpointInterval is the least time between two checkpoint saves while events flow or
	// the stream is idle (default 1s). Checkpoints are also saved after a recovery and at
	// shutdown.
	CheckpointInterval time.Duration
	// ReplayMargin is subtracted from the last checkpoint's time when a lost history window is
	// replayed from the leaves' written_at (default 5m): it covers clock skew between the
	// writers and the server and writes that took long between their written_at and their
	// commit.
	ReplayMargin time.Duration
	// ChunkSize, Workers and MaxConflicts tune the parent writes (recompute.Options).
	ChunkSize, Workers, MaxConflicts int
	// MaxTierDelay bounds how long the hourly and daily summaries of written parents wait
	// while events keep flowing (default 5s); they are written at once when the stream is
	// quiet. The checkpoint never moves past leaves whose summaries are not written.
	MaxTierDelay time.Duration
	// MaxTierBuckets bounds the hourly buckets waiting for their summaries (default 200,000).
	MaxTierBuckets int
	// ShutdownTimeout bounds how long the batch in progress may still be written after the
	// Run context is done (default 10s).
	ShutdownTimeout time.Duration
	// Backoff spaces the restarts of a failing stream and the lease rounds while the store
	// fails (default: retry.Backoff's defaults). Run retries store errors for as long as its
	// context lives.
	Backoff retry.Backoff
	// Status, when set, says whether the watcher makes progress (see Run); nil reports
	// nowhere.
	Status *status.Tracker
	// ReplayChunk is the number of leaves recomputed together when a lost window is replayed
	// (recompute.Options; default 10,000).
	ReplayChunk int

	// Partitions split the projects over several streams, each with its own checkpoint (and
	// lease); see ParsePartitions (default: one partition of every project). Every instance
	// sharing a database must use the same partitions.
	Partitions []Partition
	// Leases makes the watcher run only the partitions whose lease it holds (see Run), so
	// several instances can run it: exactly one leads each partition and a standby takes
	// over within LeaseTTL of the leader's death.
	Leases bool
	// LeaseTTL is how long a lease lasts without renewal (default 10s); it is renewed every
	// LeaseTTL/3, and standbys try to take expired leases as often.
	LeaseTTL time.Duration
	// Owner identifies this instance in lease and instance documents (default host name,
	// pid and a random suffix). A stable Owner lets a restarted instance reclaim its leases at
	// once; Run refuses to start while another live process uses it.
	Owner string
	// Heartbeat is how often a leased watcher proves its Owner is alive (default 1s); a
	// process that finds the heartbeat moving refuses the Owner.
	Heartbeat time.Duration
	// MaxPartitions bounds how many partitions this instance leads at once (default: all).
	MaxPartitions int

	// Knobs are test hooks; nil in production.
	Knobs *Knobs
}

// Knobs are the watcher's test hooks, with those of the packages it runs.
type Knobs struct {
	// Recompute are the engine's: a crash between two levels of a burst, a frozen fenced
	// write.
	Recompute recompute.Knobs
	// Lease are the instance id's: another host or pid, a frozen heartbeat.
	Lease lease.Knobs
	// BeforeLeaseRound is called before each round of lease renewals (to freeze a leader).
	BeforeLeaseRound func()
	// WritePastExpiry keeps a leader writing after its lease expired, as a process paused
	// past its timers would, to test the fencing.
	WritePastExpiry bool
}

// Defaults of Options.
const (
	DefaultName               = "watcher"
	DefaultMaxAwait           = 100 * time.Millisecond
	DefaultMaxBurstDelay      = 300 * time.Millisecond
	DefaultMinBurstDelay      = 10 * time.Millisecond
	DefaultMaxBurst           = 200_000
	DefaultCheckpointInterval = time.Second
	DefaultReplayMargin       = 5 * time.Minute
	DefaultShutdownTimeout    = 10 * time.Second
	DefaultHeartbeat          = time.Second
	DefaultLeaseTTL           = 10 * time.Second
	DefaultMaxTierDelay       = 5 * time.Second
	DefaultMaxTierBuckets     = 200_000
)

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.MaxAwait <= 0 {
		o.MaxAwait = DefaultMaxAwait
	}
	if o.MaxBurstDelay <= 0 {
		o.MaxBurstDelay = DefaultMaxBurstDelay
	}
	if o.MinBurstDelay <= 0 {
		o.MinBurstDelay = DefaultMinBurstDelay
	}
	if o.MaxBurst <= 0 {
		o.MaxBurst = DefaultMaxBurst
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if o.ReplayMargin <= 0 {
		o.ReplayMargin = DefaultReplayMargin
	}
	if o.MaxTierDelay <= 0 {
		o.MaxTierDelay = DefaultMaxTierDelay
	}
	if o.MaxTierBuckets <= 0 {
		o.MaxTierBuckets = DefaultMaxTierBuckets
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Knobs == nil {
		o.Knobs = &Knobs{}
	}
	if len(o.Partitions) == 0 {
		o.Partitions = []Partition{{}}
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.MaxPartitions <= 0 || o.MaxPartitions > len(o.Partitions) {
		o.MaxPartitions = len(o.Partitions)
	}
	return o
}

// Stats are the watcher's counters since New, for the metrics layer.
type Stats struct {
	// Events is the number of leaf events processed (replayed leaves included).
	Events int64
	// Decoded is the number of leaf documents of change events decoded: a hash partition's
	// stream carries every partition's leaves and decodes only its own (the others are
	// dropped from their project field).
	Decoded int64
	// Batches is the number of non-empty server batches read (the stream is read ahead of the
	// burst being written).
	Batches int64
	// ParentWrites is the number of parent and root document writes sent (conflicting and
	// resent ones included).
	ParentWrites int64
	// Conflicts is the number of parent writes that lost the rev guard and were re-merged.
	Conflicts int64
	// TierWrites is the number of hourly and daily summary writes sent (conflicting and
	// resent ones included); TierConflicts the number that lost the rev guard.
	TierWrites, TierConflicts int64
	// Replays is the number of lost history windows replayed from the leaves
	// (ChangeStreamHistoryLost, or a missing checkpoint with leaves stored).
	Replays int64
	// Orphans is the number of leaf events whose id is not a leaf of the tree version of
	// their tick (or has another type there, or whose project has no tree): kept, excluded
	// from totals.
	Orphans int64
	// Invalid is the number of documents skipped because they are not well formed: leaf
	// events missing a field, and documents at a parent's key that are not parent documents.
	Invalid int64
	// LastEventTime is the wall time of the last event processed.
	LastEventTime time.Time
	// Fenced is the number of times a newer lease term refused this instance's parent
	// writes: it was a stale leader, and the partition stopped.
	Fenced int64
	// Takeovers is the number of leases this instance acquired.
	Takeovers int64
	// LeaseLosses is the number of leases this instance lost (not renewed in time, or taken
	// over), releases at shutdown excluded.
	LeaseLosses int64
}

// counters are the watcher's own live Stats (the engine keeps the recompute's).
type counters struct {
	batches, decoded, replays, invalid, takeovers, leaseLosses atomic.Int64
	lastEvent                                                  atomic.Int64 // unix ns
	// prog is the streams' positions and the recompute latencies (Progress).
	prog progress
}

// snapshot combines the watcher's counters with the engine's.
func (c *counters) snapshot(e recompute.Stats) Stats {
	s := Stats{
		Events:        e.Events,
		Decoded:       c.decoded.Load(),
		Batches:       c.batches.Load(),
		ParentWrites:  e.ParentWrites,
		Conflicts:     e.Conflicts,
		TierWrites:    e.TierWrites,
		TierConflicts: e.TierConflicts,
		Replays:       c.replays.Load(),
		Orphans:       e.Orphans,
		Invalid:       c.invalid.Load() + e.Invalid,
		Fenced:        e.Fenced,
		Takeovers:     c.takeovers.Load(),
		LeaseLosses:   c.leaseLosses.Load(),
	}
	if ns := c.lastEvent.Load(); ns != 0 {
		s.LastEventTime = time.Unix(0, ns).UTC()
	}
	return s
}
