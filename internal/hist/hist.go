package hist

import (
	"math"
	"slices"
	"sync/atomic"
)

// Histogram counts observations into buckets with fixed upper bounds. The zero value is not
// usable; build one with New. Its methods are safe for concurrent use.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64 // counts[i]: observations in (bounds[i-1], bounds[i]]; last: above every bound
	sum    atomic.Uint64   // float64 bits
}

// New returns a histogram with the given upper bounds, sorted and deduplicated; NaN and
// infinite bounds are dropped (the +Inf bucket is implicit).
func New(bounds ...float64) *Histogram {
	b := make([]float64, 0, len(bounds))
	for _, v := range bounds {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			b = append(b, v)
		}
	}
	slices.Sort(b)
	b = slices.Compact(b)
	return &Histogram{bounds: b, counts: make([]atomic.Uint64, len(b)+1)}
}

// Observe adds v. NaN is ignored.
func (h *Histogram) Observe(v float64) {
	if math.IsNaN(v) {
		return
	}
	i, _ := slices.BinarySearch(h.bounds, v) // first bound >= v: v <= bound is in its bucket
	h.counts[i].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Snapshot is a histogram's state at one moment.
type Snapshot struct {
	// Bounds are the upper bounds of the buckets, ascending (without +Inf).
	Bounds []float64
	// Cumulative[i] is the number of observations <= Bounds[i].
	Cumulative []uint64
	// Count is the number of observations (the +Inf bucket).
	Count uint64
	// Sum is the sum of the observations.
	Sum float64
}

// Snapshot returns the current counts. Observations racing with it may be missing from Sum
// but not from the buckets, or the reverse; the buckets and Count always agree.
func (h *Histogram) Snapshot() Snapshot {
	s := Snapshot{
		Bounds:     slices.Clone(h.bounds),
		Cumulative: make([]uint64, len(h.bounds)),
		Sum:        math.Float64frombits(h.sum.Load()),
	}
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
		if i < len(h.bounds) {
			s.Cumulative[i] = n
		}
	}
	s.Count = n
	return s
}

// Buckets returns the snapshot's cumulative counts keyed by upper bound, the form
// prometheus.NewConstHistogram takes.
func (s Snapshot) Buckets() map[float64]uint64 {
	m := make(map[float64]uint64, len(s.Bounds))
	for i, b := range s.Bounds {
		m[b] = s.Cumulative[i]
	}
	return m
}
