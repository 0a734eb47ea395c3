package store

import "runtime"

// Bounds of DefaultWritesInFlight.
const (
	MinWritesInFlight        = 2
	MaxDefaultWritesInFlight = 8
)

// DefaultWritesInFlight is how many writes of one kind rollup keeps in flight at once unless
// told otherwise (the bulk writer's leaf batches, the watcher's chunks of one level of
// parents): WritesInFlightFor the cores Go runs on (GOMAXPROCS, which follows a container's
// CPU limit).
func DefaultWritesInFlight() int { return WritesInFlightFor(runtime.GOMAXPROCS(0)) }

// WritesInFlightFor is half of procs, at least MinWritesInFlight and at most
// MaxDefaultWritesInFlight: 2 on 2 to 5 cores, 8 from 16 on. On the 16-core machine of
// 2026-11-28 (docs/benchmarks.md, "The second 16-core run"), 8 in flight ingested 2.2× what 2
// did with the root as fresh at 100k leaves and fresher at 1,000 projects; 16 was no faster
// than 8, and more cores were not measured.
func WritesInFlightFor(procs int) int {
	return min(max(procs/2, MinWritesInFlight), MaxDefaultWritesInFlight)
}
