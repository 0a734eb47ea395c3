package rollup

import (
	"math/rand/v2"
	"testing"
)

// TestStatsAgainstNaive builds a day's Stats two ways — tick by tick into hours (in random
// order) merged into the day, and directly — and checks both against NaiveStats.
func TestStatsAgainstNaive(t *testing.T) {
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var all []TickTotals
		hours := make([]Stats, 24)
		var direct Stats
		for slot := range MaxSlots {
			if rng.IntN(4) == 0 { // a tick without a document
				continue
			}
			exp := int64(rng.IntN(5))
			tt := TickTotals{Slot: slot, Online: int64(rng.IntN(2000)) - 50, Reported: int64(rng.IntN(int(exp) + 1)), Expected: exp}
			all = append(all, tt)
		}
		for _, i := range rng.Perm(len(all)) {
			tt := all[i]
			if !hours[tt.Slot/12].Add(tt.Slot%12, tt.Online, tt.Reported, tt.Expected) {
				t.Fatalf("seed %d: Add refused slot %d", seed, tt.Slot)
			}
			if !direct.Add(tt.Slot, tt.Online, tt.Reported, tt.Expected) {
				t.Fatalf("seed %d: Add refused slot %d", seed, tt.Slot)
			}
		}
		var day Stats
		for _, h := range rng.Perm(24) {
			if !day.Merge(hours[h], h*12) {
				t.Fatalf("seed %d: Merge refused hour %d", seed, h)
			}
		}
		want := NaiveStats(all)
		if day != want {
			t.Fatalf("seed %d: merged hours %+v, naive %+v", seed, day, want)
		}
		if direct != want {
			t.Fatalf("seed %d: direct %+v, naive %+v", seed, direct, want)
		}
		if day.Count() != int64(len(all)) {
			t.Fatalf("seed %d: count %d, want %d", seed, day.Count(), len(all))
		}
	}
}

func TestStatsRefusesOverlap(t *testing.T) {
	var s Stats
	if !s.Add(3, 10, 1, 1) || s.Add(3, 11, 1, 1) || s.Add(MaxSlots, 1, 1, 1) || s.Add(-1, 1, 1, 1) {
		t.Fatal("Add accepted a slot twice or out of range")
	}
	var h Stats
	h.Add(3, 5, 0, 1)
	before := s
	if s.Merge(h, 0) || s != before {
		t.Fatal("Merge accepted an overlapping slot or changed the stats")
	}
	if s.Merge(h, MaxSlots) || s != before {
		t.Fatal("Merge accepted a slot out of range")
	}
	if !s.Merge(h, 12) || s.Count() != 2 || s.Last != 5 || s.Max != 10 || s.Min != 5 || s.Full != 1 || s.Expected != 2 {
		t.Fatalf("Merge: %+v", s)
	}
	if got := s.Ticks.Slots(); len(got) != 2 || got[0] != 3 || got[1] != 15 || s.Ticks.Last() != 15 || s.Ticks.CountIn(0, 12) != 1 {
		t.Fatalf("slots %v last %d", got, s.Ticks.Last())
	}
	var empty Stats
	if empty.Ticks.Last() != -1 || empty.Mean() != 0 || !s.Merge(empty, 0) {
		t.Fatal("empty stats")
	}
}
