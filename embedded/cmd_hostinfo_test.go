package embedded

import "testing"

// TestCountCPUList parses the kernel's CPU lists as /sys/devices/system/cpu/online holds them.
func TestCountCPUList(t *testing.T) {
	for _, tc := range []struct {
		list string
		want int
		ok   bool
	}{
		{"0", 1, true},
		{"0-1", 2, true},
		{"0-15", 16, true},
		{"0-3,6,8-9", 7, true},
		{"", 0, false},
		{"a-3", 0, false},
		{"3-1", 0, false},
		{"0-", 0, false},
		{"-1", 0, false},
	} {
		if got, ok := countCPUList(tc.list); got != tc.want || ok != tc.ok {
			t.Errorf("countCPUList(%q) = %d, %v; want %d, %v", tc.list, got, ok, tc.want, tc.ok)
		}
	}
}
