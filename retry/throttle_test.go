package retry

import (
	"testing"
	"time"
)

// TestThrottle: the first call is allowed, then one per Every, counted from the last allowed.
func TestThrottle(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		every time.Duration
		at    []time.Duration // offsets from t0
		want  []bool
	}{
		{"default 30s", 0, []time.Duration{0, time.Second, 29 * time.Second, 30 * time.Second, 59 * time.Second, 60 * time.Second},
			[]bool{true, false, false, true, false, true}},
		{"every 5s", 5 * time.Second, []time.Duration{0, 4 * time.Second, 6 * time.Second, 10 * time.Second, 11 * time.Second},
			[]bool{true, false, true, false, true}},
	} {
		th := Throttle{Every: tc.every}
		for i, d := range tc.at {
			if got := th.Allow(t0.Add(d)); got != tc.want[i] {
				t.Errorf("%s: Allow(+%v) = %v, want %v", tc.name, d, got, tc.want[i])
			}
		}
	}
}
