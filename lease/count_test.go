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

// TestLiveCountReports: LiveCount reports the count once at start and again when it changes.
func TestLiveCountReports(t *testing.T) {
	db := newDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counts := make(chan int, 10)
	c := NewLiveCount(db, 10*time.Millisecond, time.Minute, func(n int) { counts <- n }, zap.NewNop())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	for i, want := range []int{1, 2} {
		in := NewInstance(db, fmt.Sprintf("live-%d", i), time.Hour, time.Now, &Knobs{PID: 2000 + i, Alive: func(int) bool { return true }})
		if err := in.Claim(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-counts:
			if n != want {
				t.Fatalf("reported %d live instances, want %d", n, want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("no report of %d live instances within a minute", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(counts) != 0 {
		t.Fatalf("reported %d more counts without a change", len(counts))
	}
}
