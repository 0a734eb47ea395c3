package cpulist

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		list string
		want []int // nil: an error
	}{
		{"0", []int{0}},
		{"0-1", []int{0, 1}},
		{"0-3,6,8-9", []int{0, 1, 2, 3, 6, 8, 9}},
		{"3,1,1-2\n", []int{1, 2, 3}},
		{"", nil},
		{"a-3", nil},
		{"3-1", nil},
		{"0-", nil},
		{"-1", nil},
		{"8192", nil},
	} {
		got, err := Parse(tc.list)
		if (err != nil) != (tc.want == nil) || !slices.Equal(got, tc.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.list, got, err, tc.want)
		}
	}
	if got := Format([]int{0, 1, 2, 3, 6, 8, 9}); got != "0-3,6,8-9" {
		t.Errorf("Format = %q, want 0-3,6,8-9", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "0-3", "0,2,4-7", "3-1", "", "1,,2", "-", "8191", "0-8191"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := Parse(s)
		if err != nil {
			return
		}
		if len(cpus) == 0 || !slices.IsSorted(cpus) || len(slices.Compact(slices.Clone(cpus))) != len(cpus) {
			t.Fatalf("Parse(%q) = %v: not sorted, distinct and non-empty", s, cpus)
		}
		again, err := Parse(Format(cpus))
		if err != nil || !slices.Equal(again, cpus) {
			t.Fatalf("round trip of %q (%s): %v, %v", s, Format(cpus), again, err)
		}
	})
}
