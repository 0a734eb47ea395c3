package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gameops/rollup/internal/testctx"
)

// TestHolder: a holder acquires, renews (moving its expiry callback), loses the lease to a
// takeover after it expired, and releases it so another takes it at once; onExpiry fires once,
// margin before an expiry nobody renewed, and never for a dropped or released lease.
func TestHolder(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
	const ttl = 2 * time.Second
	expiredA := make(chan struct{}, 2)
	a := NewLeases(db, "a", ttl, clk.now).Holder("w/p", 100*time.Millisecond, func() { expiredA <- struct{}{} })
	b := NewLeases(db, "b", ttl, clk.now).Holder("w/p", 0, nil)

	if ok, err := a.Acquire(ctx); err != nil || !ok || !a.Held() || a.Lease().Term < 1 {
		t.Fatalf("a acquire = %v %v, held %v, lease %+v", ok, err, a.Held(), a.Lease())
	}
	if ok, err := b.Acquire(ctx); err != nil || ok || b.Held() {
		t.Fatalf("b acquired a held lease: %v %v", ok, err)
	}
	if err := a.Check(ctx); err != nil {
		t.Fatalf("a check: %v", err)
	}
	// Not renewed: onExpiry fires margin before the expiry (the timer runs on the real clock,
	// the expiry was computed on the test's: ttl - margin from now).
	testctx.WaitFor(t, "a's expiry callback", func() bool { return a.Expired() })
	<-expiredA
	if !a.Held() {
		t.Fatal("an expiry callback dropped the lease: the holder decides")
	}
	clk.add(ttl + time.Millisecond)
	if ok, err := b.Acquire(ctx); err != nil || !ok {
		t.Fatalf("b acquire after expiry = %v %v", ok, err)
	}
	if ok, err := a.Renew(ctx); err != nil || ok || a.Held() {
		t.Fatalf("a renew after takeover = %v %v, held %v; want dropped", ok, err, a.Held())
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("release of a lease not held wrote: %v", err)
	}
	if err := b.Check(ctx); err != nil {
		t.Fatalf("b check: %v", err)
	}
	// b renews, then releases: a takes it at once, with a newer term.
	bTerm := b.Lease().Term
	if ok, err := b.Renew(ctx); err != nil || !ok {
		t.Fatalf("b renew = %v %v", ok, err)
	}
	if err := b.Release(ctx); err != nil || b.Held() {
		t.Fatalf("b release = %v, held %v", err, b.Held())
	}
	if ok, err := a.Acquire(ctx); err != nil || !ok || a.Lease().Term <= bTerm || a.Expired() {
		t.Fatalf("a acquire after release = %v %v, term %d (b had %d), expired %v", ok, err, a.Lease().Term, bTerm, a.Expired())
	}
	if err := b.Check(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("b's old lease checked %v, want ErrFenced", err)
	}
	// Renewing moves the callback: renewed every 100 ms of the real clock (on which the
	// callback's timer runs, 1.9 s after each renewal), it never fires.
	for range 4 {
		if ok, err := a.Renew(ctx); err != nil || !ok {
			t.Fatalf("a renew = %v %v", ok, err)
		}
		tm := time.NewTimer(100 * time.Millisecond)
		<-tm.C
	}
	a.Drop()
	tm := time.NewTimer(ttl) // longer than the armed callback's delay: it must not fire
	<-tm.C
	select {
	case <-expiredA:
		t.Fatal("onExpiry fired for a renewed or dropped lease")
	default:
	}
}
