package bulk

import (
	"context"
	"sync"
)

// semaphore is a FIFO weighted semaphore: the bound on pending items. A waiter that does not
// fit blocks every later one, so a large Submit is not starved by small ones.
type semaphore struct {
	mu      sync.Mutex
	avail   int
	waiters []*semWaiter
}

type semWaiter struct {
	n     int
	ready chan struct{}
}

func newSemaphore(n int) *semaphore { return &semaphore{avail: n} }

// acquire takes n units (n must not exceed the capacity), or returns ctx's error, or ErrClosed
// once stop is closed. A failed acquire takes nothing.
func (s *semaphore) acquire(ctx context.Context, stop <-chan struct{}, n int) error {
	s.mu.Lock()
	if len(s.waiters) == 0 && s.avail >= n {
		s.avail -= n
		s.mu.Unlock()
		return nil
	}
	w := &semWaiter{n: n, ready: make(chan struct{})}
	s.waiters = append(s.waiters, w)
	s.mu.Unlock()

	var err error
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-stop:
		err = ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.ready:
		// Granted while giving up: hand the units back.
		s.avail += n
	default:
		for i, x := range s.waiters {
			if x == w {
				s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
				break
			}
		}
	}
	s.grant()
	return err
}

// release returns n units.
func (s *semaphore) release(n int) {
	s.mu.Lock()
	s.avail += n
	s.grant()
	s.mu.Unlock()
}

// grant wakes waiters in order while they fit. Called with mu held.
func (s *semaphore) grant() {
	for len(s.waiters) > 0 && s.avail >= s.waiters[0].n {
		w := s.waiters[0]
		s.waiters[0] = nil
		s.waiters = s.waiters[1:]
		s.avail -= w.n
		close(w.ready)
	}
}
