package api

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/gameops/rollup/embedded/embeddedtest"
)

// TestMain overlaps the outage tests (two of 30 s, 21 s, 17 s, each on a store of its own,
// mostly waiting), 2 at a time by default on 2 cores.
func TestMain(m *testing.M) {
	embeddedtest.OverlapWaits(8)
	goleak.VerifyTestMain(m)
}
