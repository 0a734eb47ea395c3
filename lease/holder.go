package lease

import (
	"context"
	"sync"
	"time"
)

// Holder is one lease held over time by one holder: acquired, renewed, watched for its
// expiry, dropped when lost and released at the end. The watcher's partitions and retention
// hold their leases through it. Its methods are safe for concurrent use; onExpiry runs on a
// timer's goroutine.
type Holder struct {
	leases *Leases
	id     string
	// margin: onExpiry fires this long before the held lease expires unless a renewal
	// moves the expiry (a holder stops writing before a successor may start).
	margin   time.Duration
	onExpiry func()

	mu      sync.Mutex
	held    Lease
	ok      bool // held
	timer   *time.Timer
	expired bool // onExpiry fired for the lease held
}

// Holder returns a holder of the lease id. onExpiry (nil: none) is called once margin before
// a held lease expires unless Renew extended it first.
func (l *Leases) Holder(id string, margin time.Duration, onExpiry func()) *Holder {
	return &Holder{leases: l, id: id, margin: margin, onExpiry: onExpiry}
}

// ID is the lease's id.
func (h *Holder) ID() string { return h.id }

// Lease is the lease last acquired or renewed (zero before the first Acquire).
func (h *Holder) Lease() Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// Held reports whether the lease is held: acquired, and neither lost, dropped nor released.
func (h *Holder) Held() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ok
}

// Expired reports whether onExpiry fired for the lease held (it was not renewed in time).
func (h *Holder) Expired() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.expired
}

// Acquire takes the lease when it is free, expired or already this owner's (Leases.Acquire);
// ok reports whether it is held now.
func (h *Holder) Acquire(ctx context.Context) (bool, error) {
	if h.Held() {
		return true, nil
	}
	l, ok, err := h.leases.Acquire(ctx, h.id)
	if err != nil || !ok {
		return false, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held, h.ok, h.expired = l, true, false
	h.arm()
	return true, nil
}

// Renew extends the held lease by the TTL. ok is false when it is no longer held (another
// owner took it over: the holder drops it). On a store error the lease stays held until it
// expires (Lease().Expires): the caller decides, with the error.
func (h *Holder) Renew(ctx context.Context) (bool, error) {
	cur := h.Lease()
	if !h.Held() {
		return false, nil
	}
	l, ok, err := h.leases.Renew(ctx, cur)
	if err != nil {
		return true, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !ok {
		h.dropLocked()
		return false, nil
	}
	if h.ok && h.held.Term == l.Term {
		h.held = l
		h.arm()
	}
	return h.ok, nil
}

// Check returns an error wrapping ErrFenced when the held lease is no longer the stored one.
func (h *Holder) Check(ctx context.Context) error {
	return h.leases.Check(ctx, h.Lease())
}

// Drop forgets the lease without writing: it was lost (taken over, expired, fenced).
func (h *Holder) Drop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked()
}

// Release expires the held lease at once (Leases.Release), so a standby takes over without
// waiting for the TTL, and forgets it. It writes nothing when the lease is not held.
func (h *Holder) Release(ctx context.Context) error {
	h.mu.Lock()
	l, ok := h.held, h.ok
	h.dropLocked()
	h.mu.Unlock()
	if !ok {
		return nil
	}
	return h.leases.Release(ctx, l)
}

func (h *Holder) dropLocked() {
	h.ok = false
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
}

// arm (re)schedules onExpiry margin before the held lease expires.
func (h *Holder) arm() {
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	if h.onExpiry == nil {
		return
	}
	term := h.held.Term
	h.timer = time.AfterFunc(max(0, h.held.Expires.Sub(h.leases.now())-h.margin), func() {
		h.mu.Lock()
		fire := h.ok && h.held.Term == term && !h.expired
		if fire {
			h.expired = true
		}
		h.mu.Unlock()
		if fire {
			h.onExpiry()
		}
	})
}
