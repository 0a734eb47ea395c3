package recompute

import (
	"runtime"
	"testing"
)

func TestWorkersFor(t *testing.T) {
	for _, tc := range []struct{ procs, want int }{
		{1, 2}, {2, 2}, {5, 2}, {6, 3}, {16, 8}, {64, 8},
	} {
		if got := WorkersFor(tc.procs); got != tc.want {
			t.Errorf("WorkersFor(%d) = %d, want %d", tc.procs, got, tc.want)
		}
	}
	if got, want := (Options{}).withDefaults().Workers, WorkersFor(runtime.GOMAXPROCS(0)); got != want {
		t.Errorf("default Workers = %d, want WorkersFor(GOMAXPROCS) = %d", got, want)
	}
}
