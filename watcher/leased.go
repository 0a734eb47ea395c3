package watcher

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/gameops/rollup/lease"
	"github.com/gameops/rollup/recompute"
	"github.com/gameops/rollup/retry"
)

// led is a partition this instance runs under a lease.
type led struct {
	ls lease.Lease
	// stop ends the partition gracefully (shutdown); kill ends its writes at once (lost).
	stop, kill context.CancelFunc
	// lost says the lease is gone and the partition was killed; it is still exiting.
	lost bool
	// expiring fires kill shortly before the lease expires unless a renewal moves it;
	// expired says it fired.
	expiring *time.Timer
	expired  atomic.Bool
}

// runLeased is Run with Options.Leases: it claims the instance id (lease.Instance.Claim), then
// every LeaseTTL/3 (sooner, with backoff, while the store fails) renews the leases it holds
// and tries to take free, expired or its own ones, running each leased partition until the
// lease is lost (killed at once: its writes are fenced by the term anyway), the partition
// fails for good (Run returns the error), or ctx is done (each partition shuts down
// gracefully, then the leases are released). A partition whose lease could not be renewed is
// killed LeaseTTL/5 before the lease expires, so it stops writing before a successor may start.
func (w *Watcher) runLeased(ctx context.Context) error {
	owner := w.opts.Owner
	if owner == "" {
		owner = lease.DefaultOwner()
	}
	knobs := w.opts.Knobs
	in := lease.NewInstance(w.db, owner, w.opts.Heartbeat, w.now, &knobs.Lease)
	if err := w.claim(ctx, in); err != nil {
		return shutdownOr(ctx, err)
	}
	w.log.Info("claimed instance id", zap.String("owner", owner), zap.String("incarnation", in.Incarnation()))
	beatCtx, stopBeat := context.WithCancel(ctx)
	beatDone := make(chan error, 1)
	go func() { beatDone <- in.Run(beatCtx, w.log) }()
	defer stopBeat()

	ls := lease.NewLeases(w.db, owner, w.opts.LeaseTTL, w.now)
	parts := w.opts.Partitions
	running := map[int]*led{}
	exited := make(chan int, len(parts))
	expiring := make(chan struct{}, 1)
	results := make([]error, len(parts))
	var failed error
	// Start acquiring at an offset of our own, so instances do not all contend for the
	// first partitions.
	offset := int(projectHash(owner) % uint32(len(parts)))
	margin := w.opts.LeaseTTL / 5

	// arm (re)schedules the end of partition i shortly before its lease expires.
	arm := func(i int, r *led) {
		if r.expiring != nil {
			r.expiring.Stop()
		}
		if knobs.WritePastExpiry {
			r.expiring = time.NewTimer(time.Hour) // never fires before the test ends
			return
		}
		term := r.ls.Term
		r.expiring = time.AfterFunc(max(0, r.ls.Expires.Sub(w.now())-margin), func() {
			r.expired.Store(true)
			r.kill()
			r.stop()
			w.leaders.drop(i, term)
			select {
			case expiring <- struct{}{}:
			default:
			}
		})
	}
	start := func(i int, l lease.Lease) {
		f := &recompute.Fence{Term: l.Term, Check: func(ctx context.Context) error { return ls.Check(ctx, l) }}
		pw := w.forPartition(i, parts[i], f)
		pctx, stop := context.WithCancel(ctx)
		hard, kill := context.WithCancel(context.WithoutCancel(ctx))
		r := &led{ls: l, stop: stop, kill: kill}
		running[i] = r
		arm(i, r)
		w.stats.takeovers.Add(1)
		w.leaders.set(i, true, l.Term, w.now())
		w.log.Info("leading partition", zap.String("lease", l.ID), zap.Int64("term", l.Term), zap.String("owner", owner))
		go func() {
			results[i] = pw.run(pctx, hard)
			exited <- i
		}()
	}
	lose := func(i int, why string, err error) {
		r := running[i]
		if r.lost {
			return
		}
		r.lost = true
		r.expiring.Stop()
		r.kill()
		r.stop()
		w.stats.leaseLosses.Add(1)
		w.leaders.set(i, false, 0, time.Time{})
		w.log.Warn("lease lost; partition stopped", zap.String("lease", r.ls.ID), zap.Int64("term", r.ls.Term), zap.String("why", why), zap.Error(err))
	}
	// shutdownBy bounds the lease releases and the instance's stop once Run ends, with the
	// partitions' own ShutdownTimeout, so a store that is down cannot hold the shutdown.
	var shutdownBy time.Time
	reap := func(i int) {
		r := running[i]
		r.expiring.Stop()
		if r.expired.Load() && !r.lost {
			lose(i, "not renewed before it expired", nil)
		}
		delete(running, i)
		r.kill()
		r.stop()
		err := results[i]
		switch {
		case err == nil || errors.Is(err, lease.ErrFenced) || r.lost:
			if errors.Is(err, lease.ErrFenced) && !r.lost {
				w.stats.leaseLosses.Add(1)
				w.log.Warn("partition fenced by a newer term; standing by", zap.String("lease", r.ls.ID), zap.Int64("term", r.ls.Term))
			}
			if err == nil && !r.lost {
				w.releaseLease(ctx, ls, r.ls, shutdownBy)
			}
		default:
			if failed == nil {
				failed = fmt.Errorf("partition %s: %w", r.ls.ID, err)
			}
			w.releaseLease(ctx, ls, r.ls, shutdownBy)
		}
		w.leaders.set(i, false, 0, time.Time{})
	}

	interval := w.opts.LeaseTTL / 3
	failures := 0
	var warn retry.Throttle
	for ctx.Err() == nil && failed == nil {
		if pause := knobs.BeforeLeaseRound; pause != nil {
			pause()
		}
		var roundErr error
		takenOver, tried := false, false
		for i, r := range running {
			if r.lost {
				continue
			}
			if r.expired.Load() {
				lose(i, "not renewed before it expired", nil)
				continue
			}
			tried = true
			nl, ok, err := ls.Renew(ctx, r.ls)
			switch {
			case err == nil && !ok:
				lose(i, "taken over", nil)
				takenOver = true
			case err == nil:
				r.ls = nl
				arm(i, r)
			case ctx.Err() == nil:
				roundErr = err
			}
		}
		if takenOver {
			// A lease of ours has a newer term: maybe our own id, run by another process.
			// Ask the instance document before taking anything back.
			var over *lease.TakenOverError
			if err := in.Heartbeat(ctx); errors.As(err, &over) {
				failed = err
				for i := range running {
					lose(i, "instance id taken over", err)
				}
				break
			}
		}
		leading := 0
		for _, r := range running {
			if !r.lost {
				leading++
			}
		}
		for k := range parts {
			i := (offset + k) % len(parts)
			if running[i] != nil || ctx.Err() != nil {
				continue
			}
			if leading >= w.opts.MaxPartitions {
				w.leaders.away(i, false, true)
				continue
			}
			tried = true
			l, ok, err := ls.Acquire(ctx, parts[i].id(w.opts.Name))
			switch {
			case err != nil:
				if ctx.Err() == nil {
					roundErr = err
				}
				w.leaders.away(i, false, false)
			case ok:
				start(i, l)
				leading++
			default:
				w.leaders.away(i, true, false)
			}
		}
		wait := interval
		if roundErr != nil {
			failures++
			wait = min(interval, w.opts.Backoff.Delay(failures))
			w.leaders.block("lease store: " + roundErr.Error())
			if warn.Allow(time.Now()) {
				w.log.Warn("lease round failed; retrying", zap.Int("attempt", failures), zap.Error(roundErr))
			}
		} else if tried {
			if failures > 0 {
				w.log.Info("lease rounds recovered", zap.Int("failed_rounds", failures))
			}
			failures = 0
			w.leaders.block("")
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case i := <-exited:
			reap(i)
		case <-expiring:
		case err := <-beatDone:
			beatDone = nil
			if err != nil && failed == nil {
				failed = err
				for i := range running {
					lose(i, "instance id taken over", err)
				}
			}
		case <-t.C:
		}
		t.Stop()
	}
	// Shutdown (or a failure): every partition stops gracefully, then its lease is released.
	shutdownBy = time.Now().Add(w.opts.ShutdownTimeout)
	for _, r := range running {
		r.stop()
	}
	for len(running) > 0 {
		reap(<-exited)
	}
	stopBeat()
	if beatDone != nil {
		if err := <-beatDone; err != nil && failed == nil {
			failed = err
		}
	}
	var over *lease.TakenOverError
	if !errors.As(failed, &over) {
		in.Stop(ctx, shutdownBy, w.log)
	}
	return failed
}

// claim claims the instance id, retrying store errors with backoff until ctx ends.
func (w *Watcher) claim(ctx context.Context, in *lease.Instance) error {
	return retry.Do(ctx, retry.Policy{Backoff: w.opts.Backoff, What: "claim instance id " + in.ID(), Log: w.log}, func(ctx context.Context) error {
		w.leaders.block("claiming instance id " + in.ID())
		err := in.Claim(ctx)
		switch {
		case err == nil:
			w.leaders.block("")
		case ctx.Err() == nil:
			w.leaders.block(fmt.Sprintf("claiming instance id %s: %v", in.ID(), err))
		}
		return err
	})
}

// releaseLease releases l under a short context that outlives ctx (until by, when set); a
// failure only delays the takeover until the lease expires.
func (w *Watcher) releaseLease(ctx context.Context, ls *lease.Leases, l lease.Lease, by time.Time) {
	if by.IsZero() {
		by = time.Now().Add(5 * time.Second)
	}
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), by)
	defer cancel()
	if err := ls.Release(rctx, l); err != nil {
		w.log.Warn("could not release the lease; a standby takes over when it expires", zap.String("lease", l.ID), zap.Error(err))
	}
}
