package agent

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/tree"
)

// Clock is the agent's time: Now, and a channel that fires after a duration. Tests inject a
// fake one to run hours of ticks without waiting.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Backoff of the sends after a failure: doubling from retryBase to retryMax, full jitter, or
// the server's Retry-After when longer. Every interval boundary also sends.
const (
	retryBase = time.Second
	retryMax  = time.Minute
)

// Options configure an Agent.
type Options struct {
	// Settings are the initial settings (File.Build).
	Settings Settings
	// Spool is the agent's on-disk queue (OpenSpool); one agent per spool directory.
	Spool *Spool
	// Logger receives the agent's logs (default no-op).
	Logger *zap.Logger
	// Stats receives the counters (default a new one; see Agent.Stats).
	Stats *Stats
	// Clock is the time (default the real one).
	Clock Clock
	// Reloads asks for a reload (SIGHUP); Reload makes the new settings. A failed Reload is
	// logged and counted, and the running settings stay.
	Reloads <-chan os.Signal
	Reload  func() (Settings, error)

	hooks hooks
}

// hooks are the tests' crash points.
type hooks struct {
	// afterSpool runs once a sampled tick is in the spool, before it is sent.
	afterSpool func(Record)
	// crashAfterSend, when it returns true, ends the flush after a 200 as a crash would:
	// the record stays in the spool.
	crashAfterSend func(Record) bool
	// afterRound runs once Run has sent the spool at start, and after each tick's
	// sample-and-send and each retry, when the timers of the next wait are set.
	afterRound func()
}

// Agent samples its sources every interval, spools each tick and sends the spool.
type Agent struct {
	opts     Options
	log      *zap.Logger
	clock    Clock
	stats    *Stats
	spool    *Spool
	settings atomic.Pointer[Settings]
	failures int // consecutive blocked flushes (Run's goroutine only)
}

// New returns an agent; Run or Once starts it.
func New(opts Options) *Agent {
	a := &Agent{opts: opts, log: opts.Logger, clock: opts.Clock, stats: opts.Stats, spool: opts.Spool}
	if a.log == nil {
		a.log = zap.NewNop()
	}
	if a.clock == nil {
		a.clock = realClock{}
	}
	if a.stats == nil {
		a.stats = &Stats{}
	}
	st := opts.Settings
	a.settings.Store(&st)
	return a
}

// Stats returns the agent's counters.
func (a *Agent) Stats() *Stats { return a.stats }

// Run sends what the spool holds, then samples, spools and sends every interval (after a
// random start jitter) until ctx is done; failed sends are retried with backoff. It returns
// nil when ctx ends: whatever was not sent is in the spool for the next start.
func (a *Agent) Run(ctx context.Context) error {
	var retryC <-chan time.Time
	schedule := func(f flushResult) {
		retryC = nil
		if f.blocked {
			retryC = a.clock.After(a.backoff(f.retryAfter))
		} else {
			a.failures = 0
		}
	}
	schedule(a.flush(ctx))
	tickC := a.clock.After(a.untilNext())
	a.round()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.opts.Reloads:
			a.reload() // a new interval applies from the next boundary on
		case <-retryC:
			schedule(a.flush(ctx))
			if ctx.Err() != nil {
				return nil
			}
			a.round()
		case <-tickC:
			if !a.wait(ctx, a.jitter()) {
				return nil
			}
			if err := a.SampleTick(ctx); err != nil {
				a.log.Error("tick not spooled", zap.Error(err))
			}
			if ctx.Err() != nil {
				return nil
			}
			schedule(a.flush(ctx))
			if ctx.Err() != nil {
				return nil
			}
			tickC = a.clock.After(a.untilNext())
			a.round()
		}
	}
}

func (a *Agent) round() {
	if a.opts.hooks.afterRound != nil {
		a.opts.hooks.afterRound()
	}
}

// Once samples one tick, spools it and sends the whole spool, oldest first; it fails when
// anything is left in the spool (it stays there for the next run).
func (a *Agent) Once(ctx context.Context) error {
	if err := a.SampleTick(ctx); err != nil {
		return err
	}
	f := a.flush(ctx)
	if n, _ := a.spool.Depth(); n > 0 {
		if f.err != nil {
			return fmt.Errorf("%d ticks left in the spool: %w", n, f.err)
		}
		return fmt.Errorf("%d ticks left in the spool", n)
	}
	return nil
}

// untilNext is how long until the next interval boundary.
func (a *Agent) untilNext() time.Duration {
	st := a.settings.Load()
	now := a.clock.Now()
	return tree.AlignTick(now, st.Interval).Add(st.Interval).Sub(now)
}

func (a *Agent) jitter() time.Duration {
	st := a.settings.Load()
	if st.NoJitter {
		return 0
	}
	return agentclient.StartJitter(st.Interval)
}

// wait waits d on the agent's clock; false when ctx ended first.
func (a *Agent) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-a.clock.After(d):
		return true
	}
}

// backoff is the wait before the next send after a failed one.
func (a *Agent) backoff(retryAfter time.Duration) time.Duration {
	a.failures++
	ceiling := retryMax
	if a.failures < 7 {
		ceiling = min(retryMax, retryBase<<(a.failures-1))
	}
	d := ceiling/2 + time.Duration(mrand.Int64N(int64(ceiling/2)+1))
	return max(d, min(retryAfter, retryMax))
}

func (a *Agent) reload() {
	if a.opts.Reload == nil {
		return
	}
	st, err := a.opts.Reload()
	if err != nil {
		a.stats.update(func(s *StatsSnapshot) { s.ReloadErrors++ })
		a.log.Error("config reload refused: the running config stays", zap.Error(err))
		return
	}
	a.settings.Store(&st)
	a.log.Info("config reloaded", zap.String("project", st.Project), zap.Int("sources", len(st.Sources)))
}

// errNoCounts is SampleTick's error when no leaf could be read.
var errNoCounts = errors.New("no leaf could be read: nothing to spool for this tick")

// SampleTick reads every source at the clock's now and writes the tick to the spool. A leaf
// whose source failed or gave a bad value is missing from the tick (never 0), logged and
// counted.
func (a *Agent) SampleTick(ctx context.Context) error {
	st := a.settings.Load()
	now := a.clock.Now().UTC()
	var counts []agentclient.Count
	for _, src := range st.Sources {
		counts = a.read(ctx, st, src, now, counts)
	}
	if len(counts) == 0 {
		return errNoCounts
	}
	rec := Record{Project: st.Project, Timestamp: tree.AlignTick(now, st.Tick), ObservedAt: now,
		SubmissionID: agentclient.NewSubmissionID(), Counts: counts}
	dropped, err := a.spool.Append(rec)
	for _, e := range dropped {
		a.stats.update(func(s *StatsSnapshot) { bump(&s.Dropped, DropFull, 1) })
		a.log.Warn("spool full: dropped its oldest tick, never sent", zap.Time("tick", e.Tick), zap.String("file", e.Name))
	}
	if err != nil {
		return fmt.Errorf("spool tick %s: %w", rec.Timestamp.Format(time.RFC3339), err)
	}
	a.stats.update(func(s *StatsSnapshot) { s.TicksSampled++ })
	if a.opts.hooks.afterSpool != nil {
		a.opts.hooks.afterSpool(rec)
	}
	return nil
}

// read appends src's readable leaves to counts and reports the others missing.
func (a *Agent) read(ctx context.Context, st *Settings, src Source, now time.Time, counts []agentclient.Count) []agentclient.Count {
	typ := st.Types[src.Name()]
	if typ == "" {
		typ = DefaultLeafType
	}
	rctx, cancel := context.WithTimeout(ctx, st.Interval)
	defer cancel()
	v, err := src.Read(rctx, now)
	if err != nil {
		a.stats.update(func(s *StatsSnapshot) { bump(&s.LeafErrors, src.Name(), int64(len(src.Leaves()))) })
		a.log.Warn("source failed: its leaves are missing from this tick", zap.String("source", src.Name()),
			zap.Int("leaves", len(src.Leaves())), zap.Time("tick", tree.AlignTick(now, st.Tick)), zap.Error(err))
		return counts
	}
	for _, id := range src.Leaves() {
		if n, ok := v.Online[id]; ok {
			counts = append(counts, agentclient.Count{ID: id, Type: typ, Online: n})
			continue
		}
		why := v.Bad[id]
		if why == nil {
			why = errors.New("absent from the source's data")
		}
		a.stats.update(func(s *StatsSnapshot) { bump(&s.LeafErrors, src.Name(), 1) })
		a.log.Warn("leaf missing from this tick", zap.String("source", src.Name()), zap.String("leaf", id),
			zap.Time("tick", tree.AlignTick(now, st.Tick)), zap.Error(why))
	}
	return counts
}

// flushResult is how a flush ended.
type flushResult struct {
	blocked    bool          // a tick could not be sent and stays; retry later
	retryAfter time.Duration // the server's Retry-After, if any
	err        error         // the failure that blocked it
}

// flush sends the spool oldest first. A tick past the late-data window is dropped unsent; a
// tick the API refuses for good is dropped; any other failure stops the flush and leaves the
// tick (and the newer ones) in the spool.
func (a *Agent) flush(ctx context.Context) flushResult {
	for _, e := range a.spool.Entries() {
		if ctx.Err() != nil {
			return flushResult{blocked: true, err: ctx.Err()}
		}
		rec, err := a.spool.Load(e)
		if errors.Is(err, ErrCorrupt) {
			a.log.Error("skipping a corrupt spool file: its tick is never sent", zap.Time("tick", e.Tick), zap.String("file", e.Name), zap.Error(err))
			a.drop(e, DropCorrupt)
			continue
		}
		if err != nil {
			a.log.Error("spool read failed", zap.Error(err))
			return flushResult{blocked: true, err: err}
		}
		st := a.settings.Load()
		if oldest := tree.AlignTick(a.clock.Now().Add(-st.Window), st.Tick); rec.Timestamp.Before(oldest) {
			a.log.Warn("dropping a tick past the late-data window, never sent", zap.Time("tick", rec.Timestamp),
				zap.Time("oldest_accepted", oldest), zap.Int("counts", len(rec.Counts)))
			a.drop(e, DropExpired)
			continue
		}
		resp, err := st.Client.Submit(ctx, rec.Submission())
		if err == nil {
			if a.opts.hooks.crashAfterSend != nil && a.opts.hooks.crashAfterSend(rec) {
				return flushResult{blocked: true, err: errors.New("crashed (test)")}
			}
			a.sent(rec, resp)
			if err := a.spool.Remove(e); err != nil {
				return flushResult{blocked: true, err: err}
			}
			continue
		}
		if ctx.Err() != nil {
			return flushResult{blocked: true, err: ctx.Err()}
		}
		if f, done := a.failed(e, rec, err); done {
			return f
		}
	}
	return flushResult{}
}

// failed handles a send's error: it drops the tick when resending cannot help (done false:
// the flush goes on) or returns the blocked result.
func (a *Agent) failed(e Entry, rec Record, err error) (flushResult, bool) {
	err = explainCertificate(err)
	var apiErr *agentclient.APIError
	status := SendErrorNetwork
	if errors.As(err, &apiErr) {
		status = strconv.Itoa(apiErr.StatusCode)
	}
	a.stats.update(func(s *StatsSnapshot) { bump(&s.SendErrors, status, 1) })
	if apiErr != nil {
		switch code := apiErr.StatusCode; {
		case code == http.StatusUnprocessableEntity && apiErr.Body.Error == apiv1.ErrOutOfWindow:
			a.log.Warn("the API says the tick is past its window: dropped, never sent", zap.Time("tick", rec.Timestamp), zap.Error(err))
			a.drop(e, DropExpired)
			return flushResult{}, false
		case code == http.StatusBadRequest || code == http.StatusRequestEntityTooLarge || code == http.StatusUnprocessableEntity:
			a.log.Error("the API refused the tick for good: dropped (fix the source or the config)", zap.Time("tick", rec.Timestamp), zap.Error(err))
			a.drop(e, DropRejected)
			return flushResult{}, false
		}
		a.log.Warn("send failed: the tick stays in the spool", zap.Time("tick", rec.Timestamp), zap.String("status", status), zap.Error(err))
		return flushResult{blocked: true, retryAfter: apiErr.RetryAfter, err: err}, true
	}
	a.log.Warn("send failed: the tick stays in the spool", zap.Time("tick", rec.Timestamp), zap.String("status", status), zap.Error(err))
	return flushResult{blocked: true, err: err}, true
}

// explainCertificate prefixes a send's error that is a refused TLS certificate of the API
// with what to do about it; other errors are returned as they are.
func explainCertificate(err error) error {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("the API's TLS certificate is signed by an unknown authority (set ca_file to the PEM file of the CA that signed it): %w", err)
	case errors.As(err, &hostname):
		return fmt.Errorf("the API's TLS certificate is not valid for the host of url: %w", err)
	case errors.As(err, &invalid):
		return fmt.Errorf("the API's TLS certificate is not valid: %w", err)
	}
	return err
}

func (a *Agent) drop(e Entry, reason string) {
	a.stats.update(func(s *StatsSnapshot) { bump(&s.Dropped, reason, 1) })
	if err := a.spool.Remove(e); err != nil {
		a.log.Error("remove spool file", zap.String("file", e.Name), zap.Error(err))
	}
}

// sent counts a 200 answer and logs its rejected items (final: resending cannot help).
func (a *Agent) sent(rec Record, resp *agentclient.Response) {
	now := a.clock.Now()
	a.stats.update(func(s *StatsSnapshot) {
		s.TicksSent++
		s.LastSentAt = now
		if rec.Timestamp.After(s.LastSentTick) {
			s.LastSentTick = rec.Timestamp
		}
		for _, it := range resp.Items {
			bump(&s.Items, string(it.Status), 1)
		}
	})
	for _, it := range resp.Items {
		if it.Status == apiv1.StatusRejected && it.Index >= 0 && it.Index < len(rec.Counts) {
			c := rec.Counts[it.Index]
			a.log.Error("the API rejected a count", zap.Time("tick", rec.Timestamp), zap.String("leaf", c.ID),
				zap.String("type", c.Type), zap.String("reason", it.Error))
		}
	}
}
