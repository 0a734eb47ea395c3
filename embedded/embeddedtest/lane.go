package embeddedtest

import (
	"os"
	"testing"
)

// A Lane lets a package's long waits start with its first tests. go test runs a package's
// parallel tests only once its serial tests have ended, so a test that holds a fault for a
// minute, declared parallel, starts after every serial test and ends the package a minute
// after them. A test that enters the lane is parallel too, so it runs beside those waits,
// but it never overlaps another test of the lane: the lane's tests keep the one-at-a-time
// order (and the time bounds) they had when serial. The long waits call t.Parallel() and stay
// out of the lane.
//
// The package's TestMain raises -parallel (OverlapWaits) above the number of its parallel
// tests: a test waiting for the lane holds one of go test's parallel slots.
type Lane struct{ slot chan struct{} }

// NewLane returns a lane that width tests may hold at once (at least 1).
func NewLane(width int) *Lane {
	return &Lane{slot: make(chan struct{}, max(width, 1))}
}

// Enter makes t parallel, waits until the lane has room, and holds it until t has ended and
// every cleanup t registered after Enter has run (cleanups run last-registered first), so the
// next test of the lane does not overlap this one's teardown. Call it first in the test.
//
// Against MONGODB_URI t stays serial, as with ParallelWithFailPoints: every test shares one
// deployment there, where another test's fail points (server-wide) would reach it.
func (l *Lane) Enter(t *testing.T) {
	t.Helper()
	if os.Getenv("MONGODB_URI") != "" {
		return
	}
	t.Parallel()
	l.slot <- struct{}{}
	t.Cleanup(func() { <-l.slot })
}
