package watcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/gameops/rollup/lease"
	"github.com/gameops/rollup/recompute"
	"github.com/gameops/rollup/retry"
	"github.com/sourcegraph/conc/pool"
)

// led is a partition this instance runs under a lease.
type led struct {
	h *lease.Holder
	// stop ends the partition gracefully (shutdown); kill ends its writes at once (lost).
	stop, kill context.CancelFunc
	// lost says the lease is gone and the partition was killed; it is still exiting.
	lost bool
}

// runLeased is Run with Options.Leases: it claims the instance id (lease.Instance.Claim), then
// every LeaseTTL/3, counted from the start of the previous round (sooner, with backoff, while
// the store fails), renews the leases it holds, all at once, and tries to take free, expired
// or its own ones, running each leased partition until the lease is lost (killed at once: its
// writes are fenced by the term anyway), the partition fails for good (Run returns the
// error), or ctx is done (each partition shuts down gracefully, then the leases are
// released). A partition whose lease could not be renewed is killed LeaseTTL/5 before the
// lease expires, so it stops writing before a successor may start.
func (w *Watcher) runLeased(ctx context.Context) error {
	owner := w.opts.Owner
	if owner == "" {
		owner = lease.DefaultOwner()
	}
	in := lease.NewInstance(w.db, owner, w.opts.Heartbeat, w.now, &w.opts.Knobs.Lease)
	if err := w.claim(ctx, in); err != nil {
		return shutdownOr(ctx, err)
	}
	w.log.Info("claimed instance id", zap.String("owner", owner), zap.String("incarnation", in.Incarnation()))
	r := newLeasedRun(w, owner, in)
	beatCtx, stopBeat := context.WithCancel(ctx)
	defer stopBeat()
	r.group.Go(func() { r.beatDone <- in.Run(beatCtx, w.log) })
	for ctx.Err() == nil && r.failed == nil {
		if pause := w.opts.Knobs.BeforeLeaseRound; pause != nil {
			pause()
		}
		began := time.Now()
		err := r.round(ctx)
		if r.failed != nil {
			break
		}
		r.wait(ctx, err, time.Since(began))
	}
	r.shutdown(ctx, stopBeat)
	return r.failed
}

// leasedRun is the state of one runLeased: the partitions this instance leads, each under
// its lease's Holder, and the rounds that renew and acquire the leases. Every goroutine it
// starts (the partitions, the instance's heartbeat) belongs to group.
type leasedRun struct {
	w      *Watcher
	owner  string
	in     *lease.Instance
	leases *lease.Leases
	group  *pool.Pool

	running  map[int]*led
	results  []error       // of each partition's run, read once it exited
	exited   chan int      // a partition's run returned
	expiring chan struct{} // a lease's expiry callback killed its partition
	beatDone chan error    // the heartbeat ended (nil once read)
	failed   error         // Run's result: a permanent failure

	offset     int           // the first partition this instance tries, so instances spread
	margin     time.Duration // a partition stops this long before its unrenewed lease expires
	failures   int           // consecutive failed rounds
	warn       retry.Throttle
	shutdownBy time.Time // bounds the releases once Run ends (zero until then)
}

func newLeasedRun(w *Watcher, owner string, in *lease.Instance) *leasedRun {
	parts := len(w.opts.Partitions)
	return &leasedRun{w: w, owner: owner, in: in, leases: lease.NewLeases(w.db, owner, w.opts.LeaseTTL, w.now),
		group: pool.New(), running: map[int]*led{}, results: make([]error, parts), exited: make(chan int, parts),
		expiring: make(chan struct{}, 1), beatDone: make(chan error, 1),
		// Start acquiring at an offset of our own, so instances do not all contend for the
		// first partitions.
		offset: int(projectHash(owner) % uint32(parts)), margin: w.opts.LeaseTTL / 5}
}

// round renews the leases held and tries to take the others, up to MaxPartitions; it
// returns the store error of the round (nil: every call answered) and whether it called the
// store at all.
func (r *leasedRun) round(ctx context.Context) (err error) {
	tried := false
	if e, t := r.renew(ctx); e != nil || t {
		err, tried = e, true
	}
	if r.failed != nil {
		return nil
	}
	if e, t := r.acquire(ctx); e != nil || t {
		err, tried = cmp.Or(err, e), true
	}
	switch {
	case err != nil:
		r.failures++
		r.w.leaders.block("lease store: " + err.Error())
		if r.warn.Allow(time.Now()) {
			r.w.log.Warn("lease round failed; retrying", zap.Int("attempt", r.failures), zap.Error(err))
		}
	case tried:
		if r.failures > 0 {
			r.w.log.Info("lease rounds recovered", zap.Int("failed_rounds", r.failures))
		}
		r.failures = 0
		r.w.leaders.block("")
	}
	return err
}

// renewal is one held lease's renewal in a round: partition i, and Renew's answer.
type renewal struct {
	i   int
	p   *led
	ok  bool
	err error
}

// renew renews every lease held, all at once: one round trip's wait, not one per lease (issue
// 25: on a loaded store, one after the other, the 4 leases of an instance took over
// LeaseTTL/2 to renew, and the first expired before the next round). One taken over makes it
// ask the instance document whether another process runs with this instance's id (then Run
// fails).
func (r *leasedRun) renew(ctx context.Context) (err error, tried bool) {
	var todo []renewal
	for i, p := range r.running {
		if p.lost {
			continue
		}
		if p.h.Expired() {
			r.lose(i, "not renewed before it expired", nil)
			continue
		}
		todo = append(todo, renewal{i: i, p: p})
	}
	if len(todo) == 0 {
		return nil, false
	}
	began := time.Now()
	g := pool.New()
	for k := range todo {
		g.Go(func() { todo[k].ok, todo[k].err = todo[k].p.h.Renew(ctx) })
	}
	g.Wait()
	r.w.log.Debug("leases renewed", zap.Int("leases", len(todo)), zap.Duration("took", time.Since(began)))
	takenOver := false
	for _, t := range todo {
		switch {
		case t.err == nil && !t.ok:
			r.lose(t.i, "taken over", nil)
			takenOver = true
		case t.err != nil && ctx.Err() == nil:
			err = t.err
		}
	}
	if takenOver {
		// A lease of ours has a newer term: maybe our own id, run by another process.
		// Ask the instance document before taking anything back.
		var over *lease.TakenOverError
		if e := r.in.Heartbeat(ctx); errors.As(e, &over) {
			r.fail(e)
		}
	}
	return err, true
}

// acquire tries to take the leases of the partitions not running, from this instance's
// offset on, while it leads fewer than MaxPartitions.
func (r *leasedRun) acquire(ctx context.Context) (err error, tried bool) {
	leading := 0
	for _, p := range r.running {
		if !p.lost {
			leading++
		}
	}
	parts := r.w.opts.Partitions
	for k := range parts {
		i := (r.offset + k) % len(parts)
		if r.running[i] != nil || ctx.Err() != nil {
			continue
		}
		if leading >= r.w.opts.MaxPartitions {
			r.w.leaders.away(i, false, true)
			continue
		}
		tried = true
		p, pctx, hard := r.newLed(ctx, i)
		ok, e := p.h.Acquire(ctx)
		switch {
		case e != nil:
			if ctx.Err() == nil {
				err = e
			}
			r.w.leaders.away(i, false, false)
		case ok:
			r.start(i, p, pctx, hard)
			leading++
		default:
			r.w.leaders.away(i, true, false)
		}
		if !ok {
			p.stop()
			p.kill()
		}
	}
	return err, tried
}

// newLed returns partition i's led before its lease is taken: the contexts of its run (pctx
// ends gracefully, hard at once) and the Holder whose expiry callback kills the run (unless
// Knobs.WritePastExpiry keeps a paused leader writing, for the fencing tests).
func (r *leasedRun) newLed(ctx context.Context, i int) (p *led, pctx, hard context.Context) {
	p = &led{}
	pctx, p.stop = context.WithCancel(ctx)
	hard, p.kill = context.WithCancel(context.WithoutCancel(ctx))
	var onExpiry func()
	if !r.w.opts.Knobs.WritePastExpiry {
		onExpiry = func() {
			p.kill()
			p.stop()
			r.w.leaders.drop(i, p.h.Lease().Term)
			select {
			case r.expiring <- struct{}{}:
			default:
			}
		}
	}
	p.h = r.leases.Holder(r.w.opts.Partitions[i].id(r.w.opts.Name), r.margin, onExpiry)
	return p, pctx, hard
}

// start runs partition i, whose lease p holds, in the group.
func (r *leasedRun) start(i int, p *led, pctx, hard context.Context) {
	l := p.h.Lease()
	f := &recompute.Fence{Term: l.Term, Check: func(ctx context.Context) error { return p.h.Check(ctx) }}
	pw := r.w.forPartition(i, r.w.opts.Partitions[i], f)
	r.running[i] = p
	r.w.stats.takeovers.Add(1)
	r.w.leaders.set(i, true, l.Term, r.w.now())
	r.w.log.Info("leading partition", zap.String("lease", l.ID), zap.Int64("term", l.Term), zap.String("owner", r.owner))
	r.group.Go(func() {
		r.results[i] = pw.run(pctx, hard)
		r.exited <- i
	})
}

// lose stops partition i at once: its lease is gone (why).
func (r *leasedRun) lose(i int, why string, err error) {
	p := r.running[i]
	if p.lost {
		return
	}
	p.lost = true
	l := p.h.Lease()
	p.h.Drop()
	p.kill()
	p.stop()
	r.w.stats.leaseLosses.Add(1)
	r.w.leaders.set(i, false, 0, time.Time{})
	r.w.log.Warn("lease lost; partition stopped", zap.String("lease", l.ID), zap.Int64("term", l.Term), zap.String("why", why), zap.Error(err))
}

// fail ends the run with err (the first failure wins), stopping every partition at once.
func (r *leasedRun) fail(err error) {
	if r.failed != nil {
		return
	}
	r.failed = err
	for i := range r.running {
		r.lose(i, "instance id taken over", err)
	}
}

// reap takes partition i's exit: a run that ended without losing its lease releases it; a
// permanent failure ends Run.
func (r *leasedRun) reap(ctx context.Context, i int) {
	p := r.running[i]
	if p.h.Expired() && !p.lost {
		r.lose(i, "not renewed before it expired", nil)
	}
	delete(r.running, i)
	p.kill()
	p.stop()
	l := p.h.Lease()
	err := r.results[i]
	switch {
	case err == nil || errors.Is(err, lease.ErrFenced) || p.lost:
		if errors.Is(err, lease.ErrFenced) && !p.lost {
			r.w.stats.leaseLosses.Add(1)
			r.w.log.Warn("partition fenced by a newer term; standing by", zap.String("lease", l.ID), zap.Int64("term", l.Term))
			p.h.Drop()
		}
	default:
		if r.failed == nil {
			r.failed = fmt.Errorf("partition %s: %w", l.ID, err)
		}
	}
	r.release(ctx, p.h)
	r.w.leaders.set(i, false, 0, time.Time{})
}

// wait waits for the next round: LeaseTTL/3 after the start of the one that took took (a
// slow store's round trips do not stretch the time between renewals), sooner with backoff
// after a failed round, or until a partition exits, a lease expires, the heartbeat ends or
// ctx is done.
func (r *leasedRun) wait(ctx context.Context, roundErr error, took time.Duration) {
	wait := max(0, r.w.opts.LeaseTTL/3-took)
	if roundErr != nil {
		wait = min(wait, r.w.opts.Backoff.Delay(r.failures))
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case i := <-r.exited:
		r.reap(ctx, i)
	case <-r.expiring:
	case err := <-r.beatDone:
		r.beatDone = nil
		if err != nil {
			r.fail(err)
		}
	case <-t.C:
	}
}

// shutdown stops every partition gracefully and releases its lease, then stops the
// instance (unless another process took its id over), within the partitions'
// ShutdownTimeout, so a store that is down cannot hold the shutdown.
func (r *leasedRun) shutdown(ctx context.Context, stopBeat context.CancelFunc) {
	r.shutdownBy = time.Now().Add(r.w.opts.ShutdownTimeout)
	for _, p := range r.running {
		p.stop()
	}
	for len(r.running) > 0 {
		r.reap(ctx, <-r.exited)
	}
	stopBeat()
	if r.beatDone != nil {
		if err := <-r.beatDone; err != nil && r.failed == nil {
			r.failed = err
		}
	}
	r.group.Wait()
	var over *lease.TakenOverError
	if !errors.As(r.failed, &over) {
		r.in.Stop(ctx, r.shutdownBy, r.w.log)
	}
}

// release releases a held lease under a short context that outlives ctx (until shutdownBy,
// once set); a failure only delays the takeover until the lease expires.
func (r *leasedRun) release(ctx context.Context, h *lease.Holder) {
	if !h.Held() {
		return
	}
	by := r.shutdownBy
	if by.IsZero() {
		by = time.Now().Add(5 * time.Second)
	}
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), by)
	defer cancel()
	if err := h.Release(rctx); err != nil {
		r.w.log.Warn("could not release the lease; a standby takes over when it expires", zap.String("lease", h.ID()), zap.Error(err))
	}
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
