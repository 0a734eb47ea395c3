package bulk

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/conc"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"
	"go.uber.org/zap"

	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/store"
)

// Bounds of the Retry-After the writer suggests during an outage: half the outage so far,
// between minRetryAfter and maxRetryAfterBase, plus up to half of that again as jitter.
const (
	minRetryAfter     = time.Second
	maxRetryAfterBase = 20 * time.Second
	// maxProbeInterval bounds the background probe backoff: with no traffic the writer sees
	// the store's return within about this long.
	maxProbeInterval = 2 * time.Second
)

// probeID is the _id the probe's update looks for: a string, where every counts document
// has an ObjectID, so it never matches.
const probeID = "rollup.bulk.probe"

// StoreDownError is the error of items refused without a write because the store is known to
// be down. It wraps ErrUnavailable.
type StoreDownError struct {
	// Since is when the outage began (the first failed write or probe).
	Since time.Time
	// Reason is the last error seen.
	Reason string
}

func (e *StoreDownError) Error() string {
	return fmt.Sprintf("store unavailable since %s: %s", e.Since.UTC().Format(time.RFC3339), e.Reason)
}

// Unwrap returns ErrUnavailable.
func (e *StoreDownError) Unwrap() error { return ErrUnavailable }

// probeCall is one probe of the store; err is set before done is closed.
type probeCall struct {
	done    chan struct{}
	err     error
	seq     uint64    // probes are numbered in the order they start
	started time.Time // when it started
}

// maxJoinAge is how old a running probe may be for a caller to wait for it rather than
// start another: a probe that began before the store came back may run out its timeout
// waiting for the driver to see the store again, and a submission that joined it would be
// refused although the store is back. So while the store does not answer, probes start at
// most this often (each bounded by Options.ProbeTimeout).
const maxJoinAge = 250 * time.Millisecond

// health is the writer's view of the store: up until a batch fails with a store fault its
// resend could not get past (unreachable, not writable, not confirming writes), then down
// until a write or a probe succeeds. While it is down, batches and Submits fail at once and
// probes (at least gap apart while the store refuses fast, at most one starting per
// maxJoinAge while it does not answer) find the store's return.
type health struct {
	probe   func() error // one bounded probe of the store
	tracker *status.Tracker
	log     *zap.Logger
	gap     time.Duration // least time between the end of a probe and the next one
	now     func() time.Time
	jitter  func() float64 // in [0, 1)
	probes  [2]atomic.Int64
	wake    chan struct{} // cap 1: an outage began (for the background prober)
	// back is signaled when a StoreMonitor (see watch) sees a writable server again after
	// an outage it reported.
	back chan struct{} // cap 1: the monitor sees a writable server again (probe now)
	// backHint: the monitor saw a writable server again since the outage began or the last
	// probe started (set without mu: see topology).
	backHint atomic.Bool
	// ended is signaled when an outage ended (takeEnded returns it).
	ended chan struct{} // cap 1

	mu        sync.Mutex
	down      bool
	since     time.Time // start of the outage
	reason    string
	lastProbe time.Time      // when the last probe ended
	running   *probeCall     // the newest probe, while it runs
	probeSeq  uint64         // the number of the newest probe
	okSeq     uint64         // the number of the newest probe that succeeded
	closed    bool           // Run is over: no new probe goroutines
	probing   conc.WaitGroup // the probes; run waits for them
	// attempts are the cancel functions of the writes in flight, ended when the store goes
	// down (their outcome is unknown; waiting on would only delay the 503).
	attempts    map[uint64]func()
	nextAttempt uint64
	endedList   []Outage // outages that ended, not yet taken (at most maxEndedOutages)
}

// Outage is a time the writer refused writes because the store was down.
type Outage struct {
	// Since is when the writer began refusing writes; Until when the store took one again.
	Since, Until time.Time
	// Reason is the last error seen before the store came back.
	Reason string
}

// maxEndedOutages bounds the ended outages waiting to be recorded; past it the oldest are
// dropped (and logged), so a store that flaps while the events cannot be written does not
// grow the writer's memory.
const maxEndedOutages = 1000

func newHealth(probe func() error, tracker *status.Tracker, gap time.Duration, log *zap.Logger) *health {
	return &health{probe: probe, tracker: tracker, log: log, gap: gap, now: time.Now, jitter: rand.Float64,
		wake: make(chan struct{}, 1), back: make(chan struct{}, 1), ended: make(chan struct{}, 1), attempts: map[uint64]func(){}}
}

// watch makes the health follow m (see StoreMonitor).
func (h *health) watch(m *StoreMonitor) { m.subscribe(h.topology) }

// topology is told by the StoreMonitor that the driver has seen no writable server for its
// grace period (the store is down from now), or that it sees one again (probe now). The
// latter comes from the driver's event callback: it only raises backHint and signals back,
// without the lock (the run loop and check act on them); the store going down clears both.
func (h *health) topology(writable bool, reason string) {
	if writable {
		h.backHint.Store(true)
		select {
		case h.back <- struct{}{}:
		default:
		}
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.failedLocked(errors.New("store unreachable: " + reason))
}

// track registers the cancel function of a write in flight; the returned function
// unregisters it. A write that starts while the store is down is canceled at once.
func (h *health) track(cancel func()) (untrack func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		cancel()
		return func() {}
	}
	id := h.nextAttempt
	h.nextAttempt++
	h.attempts[id] = cancel
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.attempts, id)
	}
}

// up reports whether the store is not known to be down (it does not wait).
func (h *health) up() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.down
}

// succeeded records that the store accepted a command.
func (h *health) succeeded() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.upLocked()
}

func (h *health) upLocked() {
	if !h.down {
		return
	}
	h.down = false
	h.tracker.Ready()
	until := h.now()
	h.log.Info("store available again", zap.Duration("outage", until.Sub(h.since)))
	if len(h.endedList) == maxEndedOutages {
		h.log.Warn("too many store outages waiting to be recorded: dropping the oldest", zap.Time("since", h.endedList[0].Since))
		h.endedList = h.endedList[1:]
	}
	h.endedList = append(h.endedList, Outage{Since: h.since, Until: until, Reason: h.reason})
	select {
	case h.ended <- struct{}{}:
	default:
	}
}

// takeEnded returns the outages that ended since the last call.
func (h *health) takeEnded() []Outage {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.endedList
	h.endedList = nil
	return out
}

// failed records a store fault: the store is down from now (or still).
func (h *health) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failedLocked(err)
}

func (h *health) failedLocked(err error) {
	h.reason = err.Error()
	h.tracker.NotReady("store unavailable: " + h.reason)
	if h.down {
		return
	}
	h.down, h.since = true, h.now()
	// A writable server the monitor saw before this outage says nothing about it.
	h.backHint.Store(false)
	select {
	case <-h.back:
	default:
	}
	h.log.Warn("store unavailable: refusing writes until a probe succeeds", zap.Error(err))
	for id, cancel := range h.attempts {
		cancel()
		delete(h.attempts, id)
	}
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// downErr is the error of a write refused while the store is down.
func (h *health) downErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.downErrLocked()
}

func (h *health) downErrLocked() error {
	return &StoreDownError{Since: h.since, Reason: h.reason}
}

// state returns whether the store is down and since when.
func (h *health) state() (down bool, since time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down, h.since
}

// retryAfter suggests when an agent refused now should come back: 0 while the store is up;
// during an outage half its length so far, at least minRetryAfter and at most
// maxRetryAfterBase, plus a jitter of up to half that.
func (h *health) retryAfter() time.Duration {
	h.mu.Lock()
	down, since := h.down, h.since
	h.mu.Unlock()
	if !down {
		return 0
	}
	base := min(max(h.now().Sub(since)/2, minRetryAfter), maxRetryAfterBase)
	return base + time.Duration(h.jitter()*float64(base/2))
}

// check returns nil while the store is up. While it is down it waits for the next probe slot
// (at most gap), runs or joins one probe (one that began at most maxJoinAge ago) and returns
// nil if the store answered, else a *StoreDownError. It takes at most about gap plus one
// probe, less if ctx ends first.
func (h *health) check(ctx context.Context) error {
	h.mu.Lock()
	if !h.down {
		h.mu.Unlock()
		return nil
	}
	// The slot spaces probes while the store refuses; once the StoreMonitor says the driver
	// sees a writable server again, the next probe goes at once.
	if h.running == nil && !h.backHint.Load() {
		if wait := h.lastProbe.Add(h.gap).Sub(h.now()); wait > 0 {
			h.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("%w: %w", h.downErr(), ctx.Err())
			}
			h.mu.Lock()
			if !h.down {
				h.mu.Unlock()
				return nil
			}
		}
	}
	call := h.startLocked()
	h.mu.Unlock()
	if call == nil {
		return h.downErr()
	}
	select {
	case <-call.done:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", h.downErr(), ctx.Err())
	}
	if call.err == nil {
		return nil
	}
	return h.downErr()
}

// verify runs or joins one probe and returns its error (the store is then down).
func (h *health) verify() error {
	h.mu.Lock()
	call := h.startLocked()
	h.mu.Unlock()
	if call == nil {
		return errors.New("bulk writer stopped")
	}
	<-call.done
	return call.err
}

// startLocked returns the running probe if it began at most maxJoinAge ago, or starts one;
// nil once Run is over. A probe's success always counts; its failure only when no probe that
// started later has succeeded.
func (h *health) startLocked() *probeCall {
	if h.running != nil && h.now().Sub(h.running.started) <= maxJoinAge {
		return h.running
	}
	if h.closed {
		return nil
	}
	h.probeSeq++
	call := &probeCall{done: make(chan struct{}), seq: h.probeSeq, started: h.now()}
	h.running = call
	h.backHint.Store(false)
	h.probing.Go(func() {
		err := errProbePanicked // until the probe returns
		defer func() { h.finishProbe(call, err) }()
		err = h.probe()
	})
	return call
}

// errProbePanicked is the result of a probe that panicked: its waiters get it, and the panic
// is raised again where run waits for the probes.
var errProbePanicked = errors.New("store probe panicked")

// finishProbe records the result of call (deferred, so that a probe that panics still
// answers its waiters) and tells them.
func (h *health) finishProbe(call *probeCall, err error) {
	h.mu.Lock()
	h.lastProbe = h.now()
	if h.running == call {
		h.running = nil
	}
	if err == nil {
		h.probes[0].Add(1)
		h.okSeq = max(h.okSeq, call.seq)
		h.upLocked()
	} else {
		h.probes[1].Add(1)
		call.err = fmt.Errorf("probe: %w", err)
		if call.seq > h.okSeq {
			h.failedLocked(call.err)
		}
	}
	h.mu.Unlock()
	close(call.done)
}

// run probes the store while it is down, at growing intervals (gap, doubling, at most
// maxProbeInterval, jittered), so that the writer sees the store's return without traffic.
// It returns when ctx is done, once no probe runs.
func (h *health) run(ctx context.Context) {
	defer func() {
		h.mu.Lock()
		h.closed = true
		h.mu.Unlock()
		h.probing.Wait()
	}()
	interval := h.gap
	for {
		if !h.up() {
			t := time.NewTimer(interval/2 + time.Duration(h.jitter()*float64(interval/2)))
			now := false
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			case <-h.back:
				t.Stop()
				now = true
			}
			h.mu.Lock()
			var call *probeCall
			if h.down && (now || h.now().Sub(h.lastProbe) >= interval/2) {
				call = h.startLocked()
			}
			h.mu.Unlock()
			if call != nil {
				<-call.done
			}
			interval = min(2*interval, maxProbeInterval)
			continue
		}
		interval = h.gap
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
	}
}

// probeStore is the writer's probe: an update of a document that does not exist, through the
// same collection, client and write concern as the batches. It needs a writable primary and
// changes nothing. It is a multi-document update, which the driver never retries, under a
// context without a deadline (no driver retry loop), canceled after Options.ProbeTimeout.
func (w *Writer) probeStore() error {
	ctx, cancel := context.WithCancelCause(context.Background())
	t := time.AfterFunc(w.opts.ProbeTimeout, func() { cancel(errProbeTimeout) })
	defer func() {
		t.Stop()
		cancel(nil)
	}()
	_, err := w.coll.UpdateMany(ctx, bson.D{{Key: "_id", Value: probeID}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "probe", Value: true}}}})
	// A probe that could not even check a connection out of the driver's pool met a busy
	// client, not a dead store: the connections are held by slow writes (a saturated store)
	// or still being opened. A dead or unwritable store fails its commands and the driver's
	// monitor (StoreMonitor) instead; taking a busy one for down would end every write in
	// flight and refuse every agent.
	var busy topology.WaitQueueTimeoutError
	if errors.As(err, &busy) {
		w.log.Debug("store probe found the connection pool busy: not an outage", zap.Error(err))
		return nil
	}
	if err != nil && errors.Is(context.Cause(ctx), errProbeTimeout) {
		return fmt.Errorf("%w: %w", errProbeTimeout, err)
	}
	return err
}

// Errors of the writer's own timers (the driver sees a canceled context).
var (
	errAttemptTimeout = errors.New("bulk write attempt timed out (Options.AttemptTimeout)")
	errProbeTimeout   = errors.New("store probe timed out (Options.ProbeTimeout)")
	errStoreDown      = errors.New("bulk write attempt ended: the store went down")
)

// Available returns nil while the store is not known to be down. During an outage it waits
// for the next probe slot, runs or joins one probe of the store and returns nil if the store
// answered, else a *StoreDownError (it wraps ErrUnavailable): within about
// Options.ProbeInterval + Options.ProbeTimeout whatever is pending. Submit calls it first; the
// API calls it before reading a request so that a submission during an outage is refused at
// once.
func (w *Writer) Available(ctx context.Context) error { return w.health.check(ctx) }

// RetryAfter suggests how long an agent refused now should wait before resending: 0 while the
// store is up; during an outage it grows with the outage (half its length so far, from 1s to
// 20s) and is jittered (up to half again) so that agents do not come back in lockstep.
func (w *Writer) RetryAfter() time.Duration { return w.health.retryAfter() }

// Tracker returns the writer's readiness: ready until a store fault makes it refuse writes,
// not ready (with the error) until a write or a probe succeeds.
func (w *Writer) Tracker() *status.Tracker { return w.health.tracker }

// classify is store.Classify, but for the writer's own cancellations of a command (an
// attempt's timeout, the probe's, the store going down), whose outcome is unknown.
func classify(err error) store.Class {
	if errors.Is(err, errAttemptTimeout) || errors.Is(err, errProbeTimeout) || errors.Is(err, errStoreDown) {
		return store.ClassUnknownOutcome
	}
	return store.Classify(err)
}
