package retention

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/lease"
	"github.com/gameops/rollup/retry"
	"github.com/gameops/rollup/store"
)

// Defaults of Options.
const (
	// DefaultInterval is the time between two passes.
	DefaultInterval = time.Minute
	// DefaultBatch is the most documents one delete removes.
	DefaultBatch = 1000
	// MaxBatch bounds Options.Batch.
	MaxBatch = 100_000
	// DefaultRate is the most documents deleted per second.
	DefaultRate = 5000
	// DefaultLeaseTTL is how long the enforcing instance's lease lasts without renewal.
	DefaultLeaseTTL = 30 * time.Second
	// LeaseID is the lease only the enforcing instance holds (in the leases collection).
	LeaseID = "retention"
)

// Unlimited as Options.Rate deletes as fast as the store takes it (benchmarks).
const Unlimited = -1

// progressEvery spaces the progress logs of a long deletion.
const progressEvery = 30 * time.Second

// Options configure an Enforcer; zero values take the defaults.
type Options struct {
	// Interval is the time between two passes (default DefaultInterval).
	Interval time.Duration
	// Batch is the most documents one delete removes (default DefaultBatch).
	Batch int
	// Rate is the most documents deleted per second (default DefaultRate; Unlimited: none).
	Rate float64
	// LeaseTTL is the lease's lifetime without renewal (default DefaultLeaseTTL): a standby
	// takes over this long after the enforcing instance died.
	LeaseTTL time.Duration
	// Owner names this instance in the lease (default lease.DefaultOwner()).
	Owner string
	// Limits check every project's policy (default DefaultLimits()).
	Limits Limits
	// Now is the clock horizons are computed from (default time.Now; the benchmark's is
	// simulated). Leases and pacing always use the real clock.
	Now func() time.Time
	// Backoff spaces the retries after a store error.
	Backoff retry.Backoff
	// Status receives the enforcer's readiness (nil: none).
	Status *status.Tracker
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	o.Batch = min(o.Batch, MaxBatch)
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Owner == "" {
		o.Owner = lease.DefaultOwner()
	}
	if o.Limits == (Limits{}) {
		o.Limits = DefaultLimits()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Enforcer deletes what each project's policy no longer keeps. Run it in every instance:
// exactly one of them, the holder of the retention lease, deletes.
type Enforcer struct {
	db        *mongo.Database
	opts      Options
	log       *zap.Logger
	overrides Store
	horizons  store.Horizons
	tiers     map[store.Tier]store.TierDocs
	pace      pacer

	leader   atomic.Bool
	passes   atomic.Int64
	lastPass atomic.Int64 // unix nanoseconds of the end of the last pass
	deleted  sync.Map     // store.Tier → *atomic.Int64

	mu      sync.Mutex
	state   map[tierKey]*tierState
	invalid map[string]string // project → why its policy is not enforced (last pass)
}

type tierKey struct {
	project string
	tier    store.Tier
}

// tierState is what the enforcer knows of one project's tier.
type tierState struct {
	period Period
	// horizon is the stored horizon; through: every document before it is deleted (zero:
	// not known yet in this process).
	horizon, through time.Time
	// blockedAt is where the tier built from this one has no summary yet (zero: nothing
	// holds the deletion back).
	blockedAt time.Time
}

// New returns the enforcer of db's retention.
func New(db *mongo.Database, opts Options, log *zap.Logger) *Enforcer {
	opts = opts.withDefaults()
	e := &Enforcer{db: db, opts: opts, log: log, overrides: NewStore(db), horizons: store.NewHorizons(db),
		tiers: map[store.Tier]store.TierDocs{}, pace: pacer{rate: opts.Rate}, state: map[tierKey]*tierState{}, invalid: map[string]string{}}
	for _, t := range store.Tiers() {
		e.tiers[t] = store.NewTierDocs(db, t)
		e.deleted.Store(t, new(atomic.Int64))
	}
	return e
}

// errLeaseLost ends a pass whose instance no longer holds the lease.
var errLeaseLost = errors.New("retention lease lost")

// Run enforces retention until ctx ends: it tries to take the retention lease every
// LeaseTTL/3 and, while it holds it, runs a pass every Interval, renewing the lease between
// passes and between batches. Store errors are retried with backoff for as long as ctx lives
// (reported on Options.Status); only permanent ones (retry.IsPermanent) end it.
func (e *Enforcer) Run(ctx context.Context) error {
	r := &leadership{e: e, h: lease.NewLeases(e.db, e.opts.Owner, e.opts.LeaseTTL, nil).Holder(LeaseID, 0, nil)}
	defer r.release(ctx)
	failures := 0
	var warn retry.Throttle
	for ctx.Err() == nil {
		err := r.step(ctx)
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, errLeaseLost):
			e.log.Warn("retention lease lost: another instance enforces retention now")
		case err != nil && retry.IsPermanent(err):
			e.opts.Status.NotReady("retention: " + err.Error())
			return fmt.Errorf("retention: %w", err)
		case err != nil:
			failures++
			e.opts.Status.NotReady("retention: " + err.Error())
			if warn.Allow(time.Now()) {
				e.log.Warn("retention pass failed; retrying", zap.Int("attempt", failures), zap.Error(err))
			}
			if e.opts.Backoff.Wait(ctx, failures) != nil {
				return nil
			}
			continue
		default:
			if failures > 0 {
				e.log.Info("retention recovered", zap.Int("failed_attempts", failures))
			}
			failures = 0
			e.opts.Status.Ready()
		}
		t := time.NewTimer(max(r.next(), 0))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return nil
}

// leadership is the enforcer's hold of the retention lease: when to renew it and when the
// next pass is due.
type leadership struct {
	e                 *Enforcer
	h                 *lease.Holder
	renewAt, nextPass time.Time
}

// step takes the lease if it is free, keeps it, and runs a pass when one is due.
func (r *leadership) step(ctx context.Context) error {
	e := r.e
	if !e.leader.Load() {
		if ok, err := r.h.Acquire(ctx); err != nil || !ok {
			return err
		}
		r.renewAt, r.nextPass = time.Now().Add(e.opts.LeaseTTL/3), time.Now()
		e.leader.Store(true)
		e.log.Info("enforcing retention", zap.String("owner", e.opts.Owner), zap.Int64("term", r.h.Lease().Term))
	}
	if err := r.keep(ctx); err != nil {
		return err
	}
	if time.Now().Before(r.nextPass) {
		return nil
	}
	rep, err := e.pass(ctx, r.keep)
	if err != nil {
		return err
	}
	r.nextPass = time.Now().Add(e.opts.Interval)
	e.logPass(rep)
	return nil
}

// keep renews the lease when a renewal is due; errLeaseLost once it is lost (taken over, or
// expired while the store failed).
func (r *leadership) keep(ctx context.Context) error {
	e := r.e
	if !e.leader.Load() {
		return errLeaseLost
	}
	if time.Now().Before(r.renewAt) {
		return nil
	}
	ok, err := r.h.Renew(ctx)
	switch {
	case err != nil && time.Now().After(r.h.Lease().Expires):
		r.h.Drop()
		e.leader.Store(false)
		return err
	case err != nil:
		return err
	case !ok:
		e.leader.Store(false)
		return errLeaseLost
	}
	r.renewAt = time.Now().Add(e.opts.LeaseTTL / 3)
	return nil
}

// next is how long until the next step: the next renewal or pass while leading, else the
// next try to take the lease (LeaseTTL/3).
func (r *leadership) next() time.Duration {
	if r.e.leader.Load() {
		return min(time.Until(r.nextPass), time.Until(r.renewAt))
	}
	return r.e.opts.LeaseTTL / 3
}

// release gives the lease back at the end of Run, so a standby takes over at once.
func (r *leadership) release(ctx context.Context) {
	if !r.e.leader.Load() {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.h.Release(rctx); err != nil {
		r.e.log.Warn("could not release the retention lease; a standby takes over when it expires", zap.Error(err))
	}
	r.e.leader.Store(false)
}

// PassReport is what one pass did.
type PassReport struct {
	// Projects is the number of projects whose policy was enforced; Invalid those left
	// alone because of their policy.
	Projects, Invalid int
	// Deleted counts the documents deleted, by tier.
	Deleted map[store.Tier]int64
	// Blocked lists the project tiers whose deletion waits for the tier built from them.
	Blocked []string
	// Took is how long the pass took.
	Took time.Duration
}

// Pass runs one pass at Options.Now over every project, without the lease: the caller makes
// sure no other instance runs one (the benchmark does).
func (e *Enforcer) Pass(ctx context.Context) (PassReport, error) {
	return e.pass(ctx, nil)
}

// pass enforces every project's policy; keep (nil: none) is called before each delete and
// ends the pass with its error (the lease is lost or cannot be renewed).
func (e *Enforcer) pass(ctx context.Context, keep func(context.Context) error) (PassReport, error) {
	start := time.Now()
	rep := PassReport{Deleted: map[store.Tier]int64{}}
	now := e.opts.Now()
	projects, err := store.Projects(ctx, e.db)
	if err != nil {
		return rep, err
	}
	ov, err := e.overrides.Load(ctx)
	if err != nil {
		return rep, err
	}
	for p := range ov.Projects {
		if !slices.Contains(projects, p) {
			projects = append(projects, p)
		}
	}
	hz, err := e.horizons.All(ctx)
	if err != nil {
		return rep, err
	}
	invalid := map[string]string{}
	for _, p := range projects {
		pol, err := ov.Usable(p, e.opts.Limits)
		if err != nil {
			invalid[p] = err.Error()
			continue
		}
		rep.Projects++
		if err := e.project(ctx, p, pol, hz[p], now, keep, &rep); err != nil {
			return rep, err
		}
	}
	rep.Invalid = len(invalid)
	e.setInvalid(invalid)
	e.passes.Add(1)
	e.lastPass.Store(time.Now().UnixNano())
	rep.Took = time.Since(start)
	e.record(ctx, start, rep)
	return rep, nil
}

// record writes a pass that deleted documents as an event (an annotation on the charts); a
// pass that deleted nothing is not worth one. A failure is logged, never the pass's.
func (e *Enforcer) record(ctx context.Context, start time.Time, rep PassReport) {
	var total int64
	parts := make([]string, 0, len(rep.Deleted))
	for _, t := range store.Tiers() {
		if n := rep.Deleted[t]; n > 0 {
			total += n
			parts = append(parts, fmt.Sprintf("%d %s", n, t))
		}
	}
	if total == 0 {
		return
	}
	err := store.NewEvents(e.db).Record(ctx, store.Event{Kind: store.EventRetention, At: start.UTC(), End: time.Now().UTC(),
		Title: "retention pass", Text: fmt.Sprintf("deleted %d documents (%s) over %d projects", total, strings.Join(parts, ", "), rep.Projects)})
	if err != nil {
		e.log.Warn("retention pass not recorded as an annotation", zap.Error(err))
	}
}

// project enforces one project's policy at now, tier by tier: it computes where the tier's
// documents start to be kept, holds that back where the tier built from it has no summary
// yet, advances the stored horizon there durably, and only then deletes what lies before it.
func (e *Enforcer) project(ctx context.Context, project string, pol Policy, hz store.Horizon, now time.Time,
	keep func(context.Context) error, rep *PassReport) error {
	for _, t := range store.Tiers() {
		k := tierKey{project, t}
		period := pol.Of(t)
		if period == Forever {
			e.mu.Lock()
			delete(e.state, k)
			e.mu.Unlock()
			continue
		}
		due := Horizon(t, period, now)
		target, blockedAt := due, time.Time{}
		if built, ok := store.Built(t); ok && built != store.Tier5m {
			// 5-minute parents are written by the watcher as the leaves arrive; the hourly
			// and daily summaries may be missing (history from before they existed).
			start := hz.Of(t)
			if hz.Of(built).After(start) {
				start = hz.Of(built)
			}
			c, err := e.covered(ctx, project, t, built, start, due)
			if err != nil {
				return err
			}
			if c.Before(due) {
				target, blockedAt = c, c
			}
		}
		h := hz.Of(t)
		if target.After(h) {
			if err := e.horizons.Advance(ctx, project, t, target); err != nil {
				return err
			}
			h = target
		}
		st := e.update(k, func(st *tierState) {
			if !st.blockedAt.Equal(blockedAt) && !blockedAt.IsZero() {
				built, _ := store.Built(t)
				e.log.Warn("retention held back: the tier built from these documents has no summary yet; "+
					"build it with 'rollup replay' over the window, then retention goes on",
					zap.String("project", project), zap.String("tier", string(t)), zap.String("built", string(built)),
					zap.Time("missing_at", blockedAt), zap.Time("due", due))
			}
			st.period, st.horizon, st.blockedAt = period, h, blockedAt
		})
		if !blockedAt.IsZero() {
			rep.Blocked = append(rep.Blocked, project+"/"+string(t))
		}
		n, err := e.deleteBelow(ctx, k, st.through, h, keep)
		rep.Deleted[t] += n
		if err != nil {
			return err
		}
	}
	return nil
}

// covered returns how far tier src of project may be deleted within [from, to): up to the
// first bucket of tier built (built from src) that has src documents but no summary, or to.
// Callers start from no earlier than the built tier's own horizon: its summaries before it
// may have been deleted by its own retention, so nothing needs the sources there.
func (e *Enforcer) covered(ctx context.Context, project string, src, built store.Tier, from, to time.Time) (time.Time, error) {
	size := store.Bucket(built)
	for cursor := from; cursor.Before(to); {
		ts, ok, err := e.tiers[src].Oldest(ctx, project, cursor, to)
		if err != nil || !ok {
			return to, err
		}
		b := ts.Truncate(size)
		has, err := e.tiers[built].At(ctx, project, b)
		if err != nil {
			return from, err
		}
		if !has {
			if b.Before(from) {
				return from, nil
			}
			return b, nil
		}
		cursor = b.Add(size)
	}
	return to, nil
}

// deleteBelow deletes the documents of k's tier before h, oldest first, from `from` on
// (everything before it is deleted already; zero: not known), in batches of Options.Batch
// at Options.Rate, and returns how many it deleted.
func (e *Enforcer) deleteBelow(ctx context.Context, k tierKey, from, h time.Time, keep func(context.Context) error) (int64, error) {
	if h.IsZero() || !from.IsZero() && !from.Before(h) {
		return 0, nil
	}
	docs := e.tiers[k.tier]
	counter, _ := e.deleted.Load(k.tier)
	var total int64
	progress := retry.Throttle{Every: progressEvery}
	progress.Allow(time.Now()) // the first progress line comes progressEvery after the start
	for {
		ids, first, last, err := docs.Batch(ctx, k.project, from, h, e.opts.Batch)
		if err != nil {
			return total, err
		}
		if len(ids) == 0 {
			break
		}
		if err := e.pace.wait(ctx, len(ids)); err != nil {
			return total, err
		}
		if keep != nil {
			if err := keep(ctx); err != nil {
				return total, err
			}
		}
		if !last.Before(h) { // the find's bound, checked again: never delete at or after h
			return total, fmt.Errorf("find expired documents of %s: the store returned one at %s, not before the horizon %s", k.project, last.Format(time.RFC3339), h.Format(time.RFC3339))
		}
		n, err := docs.Remove(ctx, k.project, ids, first, last)
		total += n
		counter.(*atomic.Int64).Add(n)
		if err != nil {
			return total, err
		}
		from = last
		e.update(k, func(st *tierState) { st.through = last })
		if progress.Allow(time.Now()) {
			e.log.Info("deleting expired documents", zap.String("project", k.project), zap.String("tier", string(k.tier)),
				zap.Int64("deleted", total), zap.Time("at", last), zap.Time("horizon", h))
		}
		if len(ids) < e.opts.Batch {
			break
		}
	}
	e.update(k, func(st *tierState) { st.through = h })
	return total, nil
}

// update changes k's state under the lock and returns a copy.
func (e *Enforcer) update(k tierKey, fn func(*tierState)) tierState {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.state[k]
	if st == nil {
		st = &tierState{}
		e.state[k] = st
	}
	fn(st)
	return *st
}

// setInvalid records the projects left alone and logs the newly refused ones.
func (e *Enforcer) setInvalid(invalid map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for p, why := range invalid {
		if e.invalid[p] != why {
			e.log.Error("retention leaves a project alone: its policy is refused", zap.String("project", p), zap.String("why", why))
		}
	}
	for p := range e.invalid {
		if _, still := invalid[p]; !still {
			e.log.Info("retention enforces the project's policy again", zap.String("project", p))
		}
	}
	e.invalid = invalid
}

// logPass logs a pass that deleted something or is held back (at debug level otherwise).
func (e *Enforcer) logPass(rep PassReport) {
	var total int64
	fields := []zap.Field{zap.Int("projects", rep.Projects), zap.Duration("took", rep.Took)}
	for _, t := range store.Tiers() {
		total += rep.Deleted[t]
		fields = append(fields, zap.Int64("deleted_"+string(t), rep.Deleted[t]))
	}
	if len(rep.Blocked) > 0 {
		fields = append(fields, zap.Strings("held_back", rep.Blocked))
	}
	if total > 0 || len(rep.Blocked) > 0 || rep.Invalid > 0 {
		e.log.Info("retention pass", append(fields, zap.Int("invalid_policies", rep.Invalid))...)
		return
	}
	e.log.Debug("retention pass", fields...)
}

// Stats are the enforcer's counters and state, for metrics.
type Stats struct {
	// Leader says this instance holds the retention lease.
	Leader bool
	// Passes counts the passes completed; LastPass is when the last one ended.
	Passes   int64
	LastPass time.Time
	// Deleted counts the documents deleted, by tier.
	Deleted map[store.Tier]int64
	// Tiers are, by tier, the state over the projects that delete it.
	Tiers map[store.Tier]TierStats
	// InvalidPolicies is the number of projects left alone at the last pass.
	InvalidPolicies int
}

// TierStats are one tier's state over the projects that delete it.
type TierStats struct {
	// Projects is the number of projects that do not keep the tier forever.
	Projects int
	// Horizon is the oldest stored horizon among them (zero: none stored yet).
	Horizon time.Time
	// Lag is how far the deletion is behind schedule: the longest time, over the projects,
	// between where documents are due to be deleted now and where they are known deleted.
	Lag time.Duration
	// Blocked is the number of projects whose deletion waits for the tier built from it.
	Blocked int
}

// Stats returns a snapshot (the lag at Options.Now).
func (e *Enforcer) Stats() Stats {
	now := e.opts.Now()
	s := Stats{Leader: e.leader.Load(), Passes: e.passes.Load(), Deleted: map[store.Tier]int64{}, Tiers: map[store.Tier]TierStats{}}
	if ns := e.lastPass.Load(); ns != 0 {
		s.LastPass = time.Unix(0, ns)
	}
	for _, t := range store.Tiers() {
		c, _ := e.deleted.Load(t)
		s.Deleted[t] = c.(*atomic.Int64).Load()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s.InvalidPolicies = len(e.invalid)
	for k, st := range e.state {
		ts := s.Tiers[k.tier]
		ts.Projects++
		if !st.horizon.IsZero() && (ts.Horizon.IsZero() || st.horizon.Before(ts.Horizon)) {
			ts.Horizon = st.horizon
		}
		if !st.through.IsZero() {
			ts.Lag = max(ts.Lag, Horizon(k.tier, st.period, now).Sub(st.through))
		}
		if !st.blockedAt.IsZero() {
			ts.Blocked++
		}
		s.Tiers[k.tier] = ts
	}
	return s
}

// pacer spaces deletes so that at most rate documents a second are deleted (rate < 0: no
// limit). A batch goes at once when the previous ones have had their time.
type pacer struct {
	rate float64
	mu   sync.Mutex
	next time.Time
}

// wait waits until n more documents may be deleted, or ctx ends.
func (p *pacer) wait(ctx context.Context, n int) error {
	if p.rate <= 0 {
		return nil
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	d := p.next.Sub(now)
	p.next = p.next.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	p.mu.Unlock()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
