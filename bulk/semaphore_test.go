package bulk

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gameops/rollup/internal/testctx"
)

// TestSemaphoreRandom: concurrent acquires of random sizes, some with contexts that expire,
// never hold more than the capacity together, and every unit comes back.
func TestSemaphoreRandom(t *testing.T) {
	const capacity = 10
	s := newSemaphore(capacity)
	stop := make(chan struct{})
	var inUse, maxInUse, canceled atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range 200 {
				n := 1 + rng.IntN(capacity)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(200))*time.Microsecond)
				err := s.acquire(ctx, stop, n)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("acquire: %v", err)
					}
					canceled.Add(1)
					continue
				}
				cur := inUse.Add(int64(n))
				for {
					m := maxInUse.Load()
					if cur <= m || maxInUse.CompareAndSwap(m, cur) {
						break
					}
				}
				inUse.Add(-int64(n))
				s.release(n)
			}
		}()
	}
	wg.Wait()
	if m := maxInUse.Load(); m > capacity {
		t.Fatalf("%d units in use at once, capacity %d", m, capacity)
	}
	if s.avail != capacity || len(s.waiters) != 0 {
		t.Fatalf("after all releases: avail %d, waiters %d", s.avail, len(s.waiters))
	}
	t.Logf("%d acquires gave up at their deadline", canceled.Load())
}

func TestSemaphoreFIFOAndStop(t *testing.T) {
	s := newSemaphore(4)
	stop := make(chan struct{})
	ctx := context.Background()
	if err := s.acquire(ctx, stop, 3); err != nil {
		t.Fatal(err)
	}
	bigDone := make(chan error, 1)
	go func() { bigDone <- s.acquire(ctx, stop, 4) }()
	testctx.WaitFor(t, "the condition", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.waiters) == 1 })
	// One unit is free, but a small acquire must queue behind the big one (no starvation).
	smallDone := make(chan error, 1)
	go func() { smallDone <- s.acquire(ctx, stop, 1) }()
	testctx.WaitFor(t, "the condition", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.waiters) == 2 })
	s.release(3)
	if err := <-bigDone; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-smallDone:
		t.Fatalf("small acquire overtook: %v", err)
	default:
	}
	close(stop)
	if err := <-smallDone; !errors.Is(err, ErrClosed) {
		t.Fatalf("acquire after stop: %v, want ErrClosed", err)
	}
	s.release(4)
	if s.avail != 4 {
		t.Fatalf("avail %d, want 4", s.avail)
	}
}
