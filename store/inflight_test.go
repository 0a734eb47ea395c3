package store

import "testing"

func TestWritesInFlightFor(t *testing.T) {
	for _, tc := range []struct{ procs, want int }{
		{1, 2}, {2, 2}, {5, 2}, {6, 3}, {8, 4}, {15, 7}, {16, 8}, {64, 8},
	} {
		if got := WritesInFlightFor(tc.procs); got != tc.want {
			t.Errorf("WritesInFlightFor(%d) = %d, want %d", tc.procs, got, tc.want)
		}
	}
}
