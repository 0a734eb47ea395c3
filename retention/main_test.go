package retention_test

import (
	"os"
	"testing"

	"github.com/gameops/rollup/embedded/embeddedtest"
)

// TestMain overlaps the parallel tests (a 30 s and a 20 s fault window, each on a store of
// its own, mostly waiting, beside a pass over seeded days), 2 at a time by default on 2 cores.
func TestMain(m *testing.M) {
	embeddedtest.OverlapWaits(8)
	os.Exit(m.Run())
}
