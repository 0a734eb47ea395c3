package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

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

// Cores is how many cores the store's server runs on, from hostInfo on admin:
// system.numCoresAvailableToProcess (its CPU affinity, MongoDB 6.0 on and the embedded server),
// else system.numCores (the host's). Behind mongos it is the mongos host's. An error when
// hostInfo is refused (a user without the hostInfo privilege, granted by clusterMonitor) or
// answers neither.
func Cores(ctx context.Context, client *mongo.Client) (int, error) {
	var out struct {
		System struct {
			NumCores                   int `bson:"numCores"`
			NumCoresAvailableToProcess int `bson:"numCoresAvailableToProcess"`
		} `bson:"system"`
	}
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "hostInfo", Value: 1}}).Decode(&out); err != nil {
		return 0, fmt.Errorf("hostInfo: %w", err)
	}
	switch {
	case out.System.NumCoresAvailableToProcess > 0:
		return out.System.NumCoresAvailableToProcess, nil
	case out.System.NumCores > 0:
		return out.System.NumCores, nil
	}
	return 0, errors.New("hostInfo: no system.numCoresAvailableToProcess nor system.numCores")
}
