package metrics

import (
	"context"
	"time"

	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/retry"
)

// DefaultProbeInterval is how often Probe pings a store that answers.
const DefaultProbeInterval = time.Second

// Probe pings the store in the background and reports on its Tracker, so /readyz answers at
// once, without a store round trip, and probes cannot load the store.
type Probe struct {
	// Ping checks the store once, e.g. client.Ping(ctx, readpref.Primary()).
	Ping func(ctx context.Context) error
	// Tracker is told Ready while Ping succeeds, else NotReady with the error.
	Tracker *status.Tracker
	// Interval spaces the pings while the store answers (default DefaultProbeInterval);
	// failing pings are retried with Backoff, never more slowly than Interval.
	Interval time.Duration
	// Timeout bounds one ping (default DefaultCheckTimeout).
	Timeout time.Duration
	// Backoff spaces the pings of a store that does not answer.
	Backoff retry.Backoff
}

// Run pings until ctx is done, then returns nil.
func (p *Probe) Run(ctx context.Context) error {
	interval, timeout := p.Interval, p.Timeout
	if interval <= 0 {
		interval = DefaultProbeInterval
	}
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	for failures := 0; ; {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := p.Ping(pctx)
		cancel()
		wait := interval
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			failures++
			p.Tracker.NotReady("store unreachable: " + err.Error())
			wait = min(interval, p.Backoff.Delay(failures))
		default:
			failures = 0
			p.Tracker.Ready()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
