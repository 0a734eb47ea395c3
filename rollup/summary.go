package rollup

import (
	"math/bits"
	"time"
)

// MaxSlots is the most ticks a summary bucket holds: a UTC day of 5-minute ticks.
const MaxSlots = 288

// TickSet is a set of the ticks ("slots") of one bucket: slot i is the bucket's start plus i
// ticks. It is a value (comparable with ==).
type TickSet [(MaxSlots + 63) / 64]uint64

// Add puts slot i in the set; it reports false when i is out of range or already there.
func (s *TickSet) Add(i int) bool {
	if i < 0 || i >= MaxSlots || s.Has(i) {
		return false
	}
	s[i/64] |= 1 << (i % 64)
	return true
}

// Has reports whether slot i is in the set.
func (s TickSet) Has(i int) bool {
	return i >= 0 && i < MaxSlots && s[i/64]&(1<<(i%64)) != 0
}

// Len is the number of slots in the set.
func (s TickSet) Len() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// CountIn is the number of slots of the set in [lo, hi).
func (s TickSet) CountIn(lo, hi int) int {
	n := 0
	for i := max(lo, 0); i < min(hi, MaxSlots); i++ {
		if s.Has(i) {
			n++
		}
	}
	return n
}

// Last is the greatest slot in the set, -1 when it is empty.
func (s TickSet) Last() int {
	for w := len(s) - 1; w >= 0; w-- {
		if s[w] != 0 {
			return w*64 + 63 - bits.LeadingZeros64(s[w])
		}
	}
	return -1
}

// Slots returns the slots of the set in ascending order.
func (s TickSet) Slots() []int {
	var out []int
	for i := range MaxSlots {
		if s.Has(i) {
			out = append(out, i)
		}
	}
	return out
}

// Stats summarize the ticks of one node that have a document, within one bucket: which ticks
// (Ticks), the greatest, least and latest online total and their sum, and the reported and
// expected leaves summed over those ticks, with Full the number of them where every expected
// leaf reported. The mean is Sum / Count. Stats of disjoint ticks merge exactly (Merge), so an
// hour's stats are the merge of its ticks' and a day's the merge of its hours'. The zero
// value summarizes no tick.
type Stats struct {
	Ticks              TickSet
	Max, Min, Sum      int64
	Last               int64
	Reported, Expected int64
	Full               int64
}

// Count is the number of ticks summarized.
func (s Stats) Count() int64 { return int64(s.Ticks.Len()) }

// Add adds the tick in slot with its document's totals. It reports false (and changes nothing)
// when the slot is out of range or already summarized.
func (s *Stats) Add(slot int, online, reported, expected int64) bool {
	last := s.Ticks.Last()
	first := s.Ticks.Len() == 0
	if !s.Ticks.Add(slot) {
		return false
	}
	if first || online > s.Max {
		s.Max = online
	}
	if first || online < s.Min {
		s.Min = online
	}
	s.Sum += online
	if slot > last {
		s.Last = online
	}
	s.Reported += reported
	s.Expected += expected
	if reported == expected {
		s.Full++
	}
	return true
}

// Merge adds the ticks of o, shifted by offset slots (an hour's stats into its day's: offset
// hour × 12). It reports false (and changes nothing) when a shifted slot is out of range or
// already summarized.
func (s *Stats) Merge(o Stats, offset int) bool {
	if o.Ticks.Len() == 0 {
		return true
	}
	var shifted TickSet
	for _, i := range o.Ticks.Slots() {
		if !shifted.Add(i+offset) || s.Ticks.Has(i+offset) {
			return false
		}
	}
	first := s.Ticks.Len() == 0
	if first || o.Max > s.Max {
		s.Max = o.Max
	}
	if first || o.Min < s.Min {
		s.Min = o.Min
	}
	if o.Ticks.Last()+offset > s.Ticks.Last() {
		s.Last = o.Last
	}
	for w := range s.Ticks {
		s.Ticks[w] |= shifted[w]
	}
	s.Sum += o.Sum
	s.Reported += o.Reported
	s.Expected += o.Expected
	s.Full += o.Full
	return true
}

// Mean is Sum / Count (0 for no tick).
func (s Stats) Mean() float64 {
	n := s.Count()
	if n == 0 {
		return 0
	}
	return float64(s.Sum) / float64(n)
}

// Summary is a stored bucket of a tier: a parent's or root's Stats over one hour or one UTC
// day (Start is the bucket's first tick), written whole with an absolute $set like a parent,
// Rev counting its changes.
type Summary struct {
	ID, Type, Project string
	Start             time.Time
	Rev               int64
	Stats
}

// TickTotals is one tick's stored totals of a node, for NaiveStats.
type TickTotals struct {
	Slot                       int
	Online, Reported, Expected int64
}

// NaiveStats is the reference Stats of a bucket's ticks (each slot once): plain loops over the
// ticks in slot order, against which Add and Merge are checked.
func NaiveStats(ticks []TickTotals) Stats {
	var s Stats
	if len(ticks) == 0 {
		return s
	}
	byslot := map[int]TickTotals{}
	for _, t := range ticks {
		byslot[t.Slot] = t
	}
	s.Max, s.Min = ticks[0].Online, ticks[0].Online
	lastSlot := -1
	for slot := range MaxSlots {
		t, ok := byslot[slot]
		if !ok {
			continue
		}
		s.Ticks[slot/64] |= 1 << (slot % 64)
		s.Max = max(s.Max, t.Online)
		s.Min = min(s.Min, t.Online)
		s.Sum += t.Online
		s.Reported += t.Reported
		s.Expected += t.Expected
		if t.Reported == t.Expected {
			s.Full++
		}
		lastSlot = slot
	}
	s.Last = byslot[lastSlot].Online
	return s
}
