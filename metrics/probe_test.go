package metrics

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/retry"
)

// TestProbe: the probe reports a store that does not answer, with backoff between its pings,
// and reports it back within one interval once it answers.
func TestProbe(t *testing.T) {
	var up atomic.Bool
	var pings atomic.Int64
	tr := status.New("store", "starting")
	p := &Probe{
		Ping: func(context.Context) error {
			pings.Add(1)
			if up.Load() {
				return nil
			}
			return errors.New("connection refused")
		},
		Tracker:  tr,
		Interval: 50 * time.Millisecond,
		Backoff:  retry.Backoff{Base: 5 * time.Millisecond, Max: 50 * time.Millisecond},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitState := func(what string, ok func(status.State) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok(tr.State()) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %+v", what, tr.State())
			}
			tick := time.NewTimer(time.Millisecond)
			<-tick.C
		}
	}
	waitState("not ready", func(s status.State) bool {
		return !s.Ready && strings.Contains(s.Reason, "store unreachable: connection refused")
	})
	start, before := time.Now(), pings.Load()
	tick := time.NewTimer(500 * time.Millisecond)
	<-tick.C // a fixed observation window: pings are counted over it
	n, took := pings.Load()-before, time.Since(start)
	// Capped at 50ms, drawn from its upper half: at most one ping per 25ms once it is reached.
	if limit := int64(took/(25*time.Millisecond)) + 5; n > limit {
		t.Errorf("%d pings in %v while the store was down, want at most %d (spaced by the backoff)", n, took, limit)
	}
	up.Store(true)
	waitState("ready", func(s status.State) bool { return s.Ready })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
