package embeddedtest_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/gameops/rollup/embedded/embeddedtest"
)

// TestLane runs three tests in a lane one wide beside a long wait outside it: the lane's tests
// never overlap one another, and the long wait runs beside them (it waits for all three to
// have run, which it could not do if it had to wait for the lane or for them to end first).
func TestLane(t *testing.T) {
	lane := embeddedtest.NewLane(1)
	var inLane, most, done atomic.Int32
	t.Run("group", func(t *testing.T) {
		t.Run("long wait", func(t *testing.T) {
			t.Parallel()
			deadline := time.Now().Add(30 * time.Second)
			for done.Load() < 3 {
				if time.Now().After(deadline) {
					t.Fatalf("%d of the lane's 3 tests ran beside the long wait", done.Load())
				}
				tm := time.NewTimer(time.Millisecond)
				<-tm.C // polls the lane's progress
			}
		})
		for _, name := range []string{"a", "b", "c"} {
			t.Run(name, func(t *testing.T) {
				lane.Enter(t)
				n := inLane.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				t.Cleanup(func() { inLane.Add(-1); done.Add(1) })
				tm := time.NewTimer(20 * time.Millisecond)
				<-tm.C // holds the lane long enough for an overlap to show
			})
		}
	})
	if most.Load() != 1 {
		t.Errorf("%d of the lane's tests ran at once, want 1", most.Load())
	}
}
