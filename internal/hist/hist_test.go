package hist

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

func TestObserve(t *testing.T) {
	tests := []struct {
		name   string
		bounds []float64
		obs    []float64
		want   Snapshot
	}{
		{"empty", []float64{1, 2}, nil, Snapshot{Bounds: []float64{1, 2}, Cumulative: []uint64{0, 0}}},
		{"on the bound is in it", []float64{1, 2}, []float64{1, 2}, Snapshot{Bounds: []float64{1, 2}, Cumulative: []uint64{1, 2}, Count: 2, Sum: 3}},
		{"above every bound", []float64{1, 2}, []float64{0.5, 3, 100}, Snapshot{Bounds: []float64{1, 2}, Cumulative: []uint64{1, 1}, Count: 3, Sum: 103.5}},
		{"unsorted, duplicate and infinite bounds", []float64{5, math.Inf(1), 1, 5, math.NaN()}, []float64{2}, Snapshot{Bounds: []float64{1, 5}, Cumulative: []uint64{0, 1}, Count: 1, Sum: 2}},
		{"NaN ignored", []float64{1}, []float64{math.NaN(), -1}, Snapshot{Bounds: []float64{1}, Cumulative: []uint64{1}, Count: 1, Sum: -1}},
		{"no bounds", nil, []float64{7}, Snapshot{Bounds: []float64{}, Cumulative: []uint64{}, Count: 1, Sum: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(tt.bounds...)
			for _, v := range tt.obs {
				h.Observe(v)
			}
			got := h.Snapshot()
			if !slices.Equal(got.Bounds, tt.want.Bounds) || !slices.Equal(got.Cumulative, tt.want.Cumulative) ||
				got.Count != tt.want.Count || got.Sum != tt.want.Sum {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestRandomAgainstNaive compares the buckets with a naive count of v <= bound.
func TestRandomAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		bounds := make([]float64, rng.IntN(8))
		for i := range bounds {
			bounds[i] = float64(rng.IntN(20))
		}
		h := New(bounds...)
		obs := make([]float64, rng.IntN(50))
		for i := range obs {
			obs[i] = float64(rng.IntN(25)) - 2
			h.Observe(obs[i])
		}
		s := h.Snapshot()
		for i, b := range s.Bounds {
			var n uint64
			for _, v := range obs {
				if v <= b {
					n++
				}
			}
			if s.Cumulative[i] != n {
				t.Fatalf("bounds %v obs %v: bucket %v = %d, want %d", bounds, obs, b, s.Cumulative[i], n)
			}
			if s.Buckets()[b] != n {
				t.Fatalf("Buckets()[%v] = %d, want %d", b, s.Buckets()[b], n)
			}
		}
		if s.Count != uint64(len(obs)) {
			t.Fatalf("count %d, want %d", s.Count, len(obs))
		}
	}
}

func TestConcurrent(t *testing.T) {
	h := New(1, 10)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 1000 {
				h.Observe(float64(i % 20))
			}
		})
	}
	wg.Wait()
	s := h.Snapshot()
	if s.Count != 4000 || s.Cumulative[0] != 4*100 || s.Cumulative[1] != 4*550 || s.Sum != 4*50*190 {
		t.Fatalf("got %+v", s)
	}
}
