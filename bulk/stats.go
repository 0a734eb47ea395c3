package bulk

import (
	"sync/atomic"
	"time"

	"github.com/gameops/rollup/internal/hist"
	"github.com/gameops/rollup/store"
)

// Stats are the writer's counters since New, for the metrics layer.
type Stats struct {
	// Batches is the number of batches cut from the pending items and written.
	Batches int64
	// Items counts the submitted items that reached a batch, by final Outcome (every Outcome
	// is a key).
	Items map[Outcome]int64
	// BatchOps is the distribution of operations per batch (after deduplication of a key).
	BatchOps hist.Snapshot
	// Conflicts is the number of operations whose upsert met an existing document on the
	// unique index (E11000) and whose document was read to resolve them.
	Conflicts int64
	// Reissued is the number of those operations sent once more (their read showed an older
	// version of their own project, or no document).
	Reissued int64
	// Retries counts whole BulkWrites resent once because their outcome was unknown, by the
	// store.Class of the error (store.ClassUnknownOutcome or store.ClassWriteConcern).
	Retries map[store.Class]int64
	// Failures counts BulkWrites whose items ended unavailable (OutcomeUnknown), by the store.Class
	// of the last error.
	Failures map[store.Class]int64
	// Refused counts items answered unavailable without a write because the store was known
	// to be down (refused Submits and batches).
	Refused int64
	// StoreDown is set while the store is known to be down; DownSince is when that began.
	StoreDown bool
	DownSince time.Time
	// ProbesOK and ProbesFailed count the probes of the store (see Writer.Available).
	ProbesOK, ProbesFailed int64
	// InFlightLimit is how many batches the writer keeps in flight at most now: Workers, or
	// the store's budget shared by the live instances (ShareInFlight, SetStoreBudget).
	InFlightLimit int
}

// numOutcomes is the number of Outcome values.
const numOutcomes = int(OutcomeRejected) + 1

// numClasses is the number of store.Class values.
const numClasses = int(store.ClassContext) + 1

// BatchOpsBounds returns the upper bounds of the Stats.BatchOps buckets.
func BatchOpsBounds() []float64 {
	return []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}
}

// counters are the live Stats.
type counters struct {
	batches   atomic.Int64
	items     [numOutcomes]atomic.Int64
	batchOps  *hist.Histogram
	reissued  atomic.Int64
	conflicts atomic.Int64
	retries   [numClasses]atomic.Int64
	failures  [numClasses]atomic.Int64
	refused   atomic.Int64
}

func newCounters() *counters { return &counters{batchOps: hist.New(BatchOpsBounds()...)} }

func (c *counters) outcome(o Outcome) {
	if i := int(o); i >= 0 && i < numOutcomes {
		c.items[i].Add(1)
	}
}

func classIndex(c store.Class) int {
	if c < 0 || int(c) >= numClasses {
		return int(store.ClassUnknownOutcome)
	}
	return int(c)
}

func (c *counters) snapshot() Stats {
	s := Stats{
		Batches:   c.batches.Load(),
		Items:     make(map[Outcome]int64, numOutcomes),
		BatchOps:  c.batchOps.Snapshot(),
		Reissued:  c.reissued.Load(),
		Conflicts: c.conflicts.Load(),
		Retries:   map[store.Class]int64{},
		Failures:  map[store.Class]int64{},
		Refused:   c.refused.Load(),
	}
	for i := range c.items {
		s.Items[Outcome(i)] = c.items[i].Load()
	}
	for i := range numClasses {
		if n := c.retries[i].Load(); n > 0 {
			s.Retries[store.Class(i)] = n
		}
		if n := c.failures[i].Load(); n > 0 {
			s.Failures[store.Class(i)] = n
		}
	}
	return s
}

// Stats returns the counters since New and the store's state.
func (w *Writer) Stats() Stats {
	s := w.stats.snapshot()
	s.StoreDown, s.DownSince = w.health.state()
	if !s.StoreDown {
		s.DownSince = time.Time{}
	}
	s.ProbesOK, s.ProbesFailed = w.health.probes[0].Load(), w.health.probes[1].Load()
	s.InFlightLimit = w.inFlight()
	return s
}
