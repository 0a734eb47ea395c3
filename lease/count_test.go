package lease

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestCountLive counts the instances that beat since a time and are not stopped: a stopped
// one and one whose last beat is older are left out.
func TestCountLive(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	t0 := time.Now()
	at := func(d time.Duration) func() time.Time { return func() time.Time { return t0.Add(d) } }
	var ins []*Instance
	for i, clock := range []func() time.Time{at(0), at(0), at(0), at(-time.Minute)} {
		in := NewInstance(db, fmt.Sprintf("count-%d", i), time.Hour, clock, &Knobs{PID: 1000 + i, Alive: func(int) bool { return true }})
		if err := in.Claim(ctx); err != nil {
			t.Fatal(err)
		}
		ins = append(ins, in)
	}
	count := func(want int) {
		t.Helper()
		if n, err := CountLive(ctx, db, t0.Add(-5*time.Second)); err != nil || n != want {
			t.Fatalf("CountLive = %d, %v; want %d", n, err, want)
		}
	}
	count(3) // count-3 last beat a minute ago
	ins[0].Stop(ctx, time.Now().Add(10*time.Second), zap.NewNop())
	count(2)
	if err := ins[3].Heartbeat(ctx); err != nil { // still its old clock: still stale
		t.Fatal(err)
	}
	count(2)
	if n, err := CountLive(ctx, db, t0.Add(-2*time.Minute)); err != nil || n != 3 {
		t.Fatalf("CountLive over two minutes = %d, %v; want 3", n, err)
	}
}
