package bulk

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/conc"
	"github.com/sourcegraph/conc/pool"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/store"
)

// Writer coalesces submitted items into unordered BulkWrites of guarded upserts. Its methods
// are safe for concurrent use.
type Writer struct {
	coll *mongo.Collection
	opts Options
	log  *zap.Logger

	sem      *semaphore    // bounds accepted but unfinished items (MaxPending)
	kick     chan struct{} // wakes Run: first pending item, or a full batch
	stopping chan struct{} // closed when Run stops accepting
	started  atomic.Bool
	// sharedBy is how many instances share the store's writes in flight (ShareInFlight; 0
	// or 1: this writer alone).
	sharedBy atomic.Int32
	// storeBudget is the writes in flight the store takes, all instances together
	// (SetStoreBudget; 0: unknown, Workers stands for it).
	storeBudget atomic.Int32
	policy      policy
	clock       clock
	stats       *counters
	health      *health
	// writeBatch writes deduplicated items with b's memory (w.write; tests substitute a
	// recorder).
	writeBatch func(ctx context.Context, items []Item, b *batch) []Result
	batches    batchPool

	mu      sync.Mutex
	pending fairQueue  // by project, served round-robin
	load    recentLoad // accepted items by project: which one is heavy
	closed  bool
}

// op is one accepted item and where its result goes.
type op struct {
	item Item
	req  *request
	idx  int
	at   time.Time // when it was accepted
}

// request is one Submit call waiting for its items.
type request struct {
	results []Result
	left    atomic.Int64
	done    chan struct{}
}

func (r *request) finish(i int, res Result) {
	r.results[i] = res
	if r.left.Add(-1) == 0 {
		close(r.done)
	}
}

// New returns a writer to coll (the counts collection; its write concern applies: serve
// configures w:majority, j:true). Run must be running for Submit to make progress. A nil
// logger logs nothing.
func New(coll *mongo.Collection, opts Options, log *zap.Logger) *Writer {
	if log == nil {
		log = zap.NewNop()
	}
	opts = opts.withDefaults()
	w := &Writer{
		coll:     coll,
		opts:     opts,
		log:      log.Named("bulk"),
		sem:      newSemaphore(opts.MaxPending),
		kick:     make(chan struct{}, 1),
		stopping: make(chan struct{}),
		policy:   policy{maxBatch: opts.MaxBatch, maxDelay: opts.MaxDelay, idleGap: opts.IdleGap},
		clock:    realClock{},
		stats:    newCounters(),
		batches:  batchPool{maxOps: opts.MaxBatch},
	}
	tracker := opts.Tracker
	if tracker == nil {
		tracker = status.New("bulk", "starting")
	}
	w.health = newHealth(w.probeStore, tracker, opts.ProbeInterval, w.log)
	if opts.StoreMonitor != nil {
		w.health.watch(opts.StoreMonitor)
	}
	w.writeBatch = w.write
	return w
}

// CheckClientOptions returns an error when the client options give operations a client-side
// timeout (the timeoutMS URI option or SetTimeout): driver v2 then retries a failed write for
// as long as the timeout allows, thousands of commands during an election, under the writer's
// bounded policy. The writer bounds its attempts itself (Options.AttemptTimeout).
func CheckClientOptions(o *options.ClientOptions) error {
	if o != nil && o.Timeout != nil {
		return fmt.Errorf("a client timeout (timeoutMS=%d) makes the driver retry failed writes until it expires; remove it (rollup bounds its own retries)",
			o.Timeout.Milliseconds())
	}
	return nil
}

// Run coalesces and writes batches until ctx is done, then stops accepting (Submit returns
// ErrClosed), writes what is pending and returns nil once every accepted item has a result.
// Writes still running Options.DrainTimeout after ctx is done are canceled; their items end as
// OutcomeUnknown. Run may be called once.
func (w *Writer) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("bulk writer: Run called twice")
	}
	// No deadline on the writes' context: the driver then retries a failed write once, not
	// for as long as a deadline allows (see "Retry policy" in docs/design/ingest.md).
	writeCtx, cancelWrites := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWrites()
	w.health.tracker.Ready()
	// The outage log runs until the prober has stopped: it records the last outage too.
	defer w.startOutageLog(ctx)()
	// The prober runs while batches may still be written (until the drain ends).
	defer w.startProber(ctx)()
	defer w.startDrainTimer(ctx, cancelWrites)()
	w.writeBatches(ctx, writeCtx)
	return nil
}

// startProber runs the store health prober until the returned function is called; that
// function stops it and waits for it to return.
func (w *Writer) startProber(ctx context.Context) (stop func()) {
	return startUntilStopped(ctx, w.health.run)
}

// startUntilStopped runs fn in a goroutine it owns, with a context that outlives ctx (the
// writer's helpers run through the drain), until the returned function is called: that
// function cancels fn's context and waits for fn to return.
func startUntilStopped(ctx context.Context, fn func(context.Context)) (stop func()) {
	fnCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg conc.WaitGroup
	wg.Go(func() { fn(fnCtx) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// startDrainTimer calls cancelWrites once Options.DrainTimeout has passed since ctx was done,
// unless the returned function is called first; that function stops the timer and waits for
// it to return.
func (w *Writer) startDrainTimer(ctx context.Context, cancelWrites context.CancelFunc) (stop func()) {
	runDone := make(chan struct{})
	var drainTimer conc.WaitGroup
	drainTimer.Go(func() {
		select {
		case <-ctx.Done():
		case <-runDone:
			return
		}
		t := time.NewTimer(w.opts.DrainTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancelWrites()
		case <-runDone:
		}
	})
	return func() {
		close(runDone)
		drainTimer.Wait()
	}
}

// writeBatches cuts and writes batches (with writeCtx) until ctx is done, then stops accepting
// and returns once every pending item is written. Batches are cut only while a worker is free
// to send them at once, as the policy says (see "Batching policy" in docs/design/ingest.md);
// until then pending items keep collecting.
func (w *Writer) writeBatches(ctx, writeCtx context.Context) {
	// inFlight() is at most maxInFlight().
	workers := pool.New().WithMaxGoroutines(w.maxInFlight())
	finished := make(chan bool, w.maxInFlight()) // one per batch written: whether it was heavy
	s := slots{idleSince: w.clock.now()}
	s.lightIdleSince = s.idleSince
	cancelWake := func() {}
	defer func() { cancelWake() }()
	draining := false
	for {
		cancelWake()
		var wake <-chan time.Time // the policy's next deadline, if any
		cancelWake = func() {}
		for s.inFlight < w.inFlight() {
			b, heavy, wait := w.take(s, draining)
			if b == nil {
				if wait > 0 {
					wake, cancelWake = w.clock.after(wait)
				}
				break
			}
			s.inFlight++
			if !heavy {
				s.light++
			}
			workers.Go(func() {
				w.flush(writeCtx, b)
				finished <- heavy
			})
		}
		if draining && w.pendingLen() == 0 {
			break
		}
		var done <-chan struct{}
		if !draining {
			done = ctx.Done()
		}
		select {
		case <-done:
			draining = true
			close(w.stopping)
			w.mu.Lock()
			w.closed = true
			w.mu.Unlock()
		case <-w.kick:
		case <-wake:
		case heavy := <-finished:
			s.finished(heavy, w.clock.now())
		}
	}
	workers.Wait()
}

// ShareInFlight tells the writer that n instances (this one included) write to the same
// store, so that together they keep about as many batches in flight as the store's budget
// (SetStoreBudget; Workers until it is known): from its next batch on, it keeps
// ceil(budget / n) in flight, at least 1 and at most maxInFlight (n ≤ 1: the whole budget).
// Safe to call at any time, from any goroutine.
func (w *Writer) ShareInFlight(n int) {
	n = min(max(n, 1), math.MaxInt32)
	if old := w.sharedBy.Swap(int32(n)); old != int32(n) {
		w.rereadLimit()
	}
}

// SetStoreBudget tells the writer how many writes in flight the store takes from all
// instances together (store.WritesInFlightFor its cores): ShareInFlight divides this budget
// instead of Workers. A store on cores of its own then gets the writes its cores take, not
// what this instance's cores would suggest (docs/scaling.md, "Writes in flight"). n ≤ 0
// forgets it. Safe to call at any time, from any goroutine.
func (w *Writer) SetStoreBudget(n int) {
	n = min(max(n, 0), math.MaxInt32)
	if old := w.storeBudget.Swap(int32(n)); old != int32(n) {
		w.rereadLimit()
	}
}

// SizeByStore asks the store how many cores it runs on (store.Cores) and sets the store's
// budget to store.WritesInFlightFor them (SetStoreBudget). When the store does not say (the
// user may not run hostInfo; the store is away), the budget stays Workers, this instance's
// own default, and why is logged at info.
func (w *Writer) SizeByStore(ctx context.Context) {
	cores, err := store.Cores(ctx, w.coll.Database().Client())
	if err != nil {
		w.log.Info("the store's cores are unknown: the writes in flight follow this instance's cores", zap.Error(err))
		return
	}
	budget := store.WritesInFlightFor(cores)
	w.SetStoreBudget(budget)
	w.log.Info("writes in flight sized by the store's cores", zap.Int("storeCores", cores), zap.Int("budget", budget))
}

// rereadLimit wakes the loop to re-read inFlight.
func (w *Writer) rereadLimit() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// inFlight is how many batches the writer keeps in flight now: the store's budget (Workers
// while unknown), shared as ShareInFlight says, at most maxInFlight.
func (w *Writer) inFlight() int {
	budget := int(w.storeBudget.Load())
	if budget <= 0 {
		budget = w.opts.Workers
	}
	n := max(int(w.sharedBy.Load()), 1)
	return min(max((budget+n-1)/n, 1), w.maxInFlight())
}

// maxInFlight bounds inFlight: Workers, or the largest default (store.MaxDefaultWritesInFlight)
// when that is more, so that a store's budget above Workers can be used.
func (w *Writer) maxInFlight() int {
	return max(w.opts.Workers, store.MaxDefaultWritesInFlight)
}

// slots is what the policy needs of the batches in flight: all of them, and the light ones
// (those without the heavy project's items: see recentLoad).
type slots struct {
	inFlight, light           int
	idleSince, lightIdleSince time.Time // when the last of them (of the light ones) finished
}

func (s *slots) finished(heavy bool, now time.Time) {
	if s.inFlight--; s.inFlight == 0 {
		s.idleSince = now
	}
	if !heavy {
		if s.light--; s.light == 0 {
			s.lightIdleSince = now
		}
	}
}

// take cuts the next batch as the policy says (drain: whatever is pending, a batch at a
// time), filled fairly across projects (see fairQueue), and says whether it holds the heavy
// project's items. The heavy project (recentLoad) is cut apart from the others, the light
// ones, which go first: their batches count only the light batches in flight, so they never
// wait for a heavy batch to finish, nor does a heavy project's stream of arrivals restart
// their idle gap. A heavy batch counts every batch in flight; while other projects send (they
// had items accepted in the last second or two, or have some pending) it leaves the last free
// worker to them, and it is smaller (see heavyPolicy). With one project sending, it is the
// heavy one and the policy sees what it saw without the split. Otherwise take returns how
// long until the policy's next deadline (0: none).
func (w *Writer) take(s slots, drain bool) (*batch, bool, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending.len() == 0 {
		return nil, false, 0
	}
	now := w.clock.now()
	light, hf := w.pending.split(w.load.heavy(now))
	var wait time.Duration
	if light.n > 0 {
		n, lw := w.policy.cut(now, s.lightIdleSince, s.light, light, drain)
		if n > 0 {
			b := w.batches.get()
			b.ops = w.pending.take(b.ops[:0], n, hf)
			return b, false, 0
		}
		wait = lw
	}
	others := w.load.others(now)
	if limit := w.inFlight(); hf == nil || ((light.n > 0 || others > 0) && limit > 1 && s.inFlight >= limit-1) {
		return nil, false, wait
	}
	heavy := pendingSet{n: hf.q.len(), oldest: hf.q.oldest().at, newest: hf.newest}
	n, hw := w.heavyPolicy(others).cut(now, s.idleSince, s.inFlight, heavy, drain)
	if n == 0 {
		if wait == 0 || (hw > 0 && hw < wait) {
			wait = hw
		}
		return nil, false, wait
	}
	b := w.batches.get()
	b.ops = w.pending.takeFlow(b.ops[:0], hf, n)
	return b, true, 0
}

// heavyPolicy is the policy of the heavy project's batches. While items of other projects
// were accepted in the last second or two (others), they hold at most
// MaxBatch/heavyBatchDivisor items, so that a light batch sent beside one waits for a shorter
// write at the store's lock (in the runaway benchmark a light write beside a 1,000-item batch
// took ten times its usual time: docs/benchmarks.md). With one project sending, its batches
// are full size.
func (w *Writer) heavyPolicy(others int) policy {
	p := w.policy
	if others > 0 {
		p.maxBatch = max(1, p.maxBatch/heavyBatchDivisor)
	}
	return p
}

func (w *Writer) pendingLen() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending.len()
}

// flush writes one batch, hands every item its result and recycles b (see recyclable).
func (w *Writer) flush(ctx context.Context, b *batch) {
	n := len(b.ops)
	b.items = grow(b.items, n)
	for i := range b.ops {
		b.items[i] = b.ops[i].item
	}
	b.order, b.winners, b.owner = dedup(b.items, b.order, b.winners, b.owner)
	b.unique = grow(b.unique, len(b.winners))
	b.pos = grow(b.pos, n) // item index of a winner → position in unique
	for j, i := range b.winners {
		b.unique[j] = b.items[i]
		b.pos[i] = j
	}
	w.stats.batches.Add(1)
	w.stats.batchOps.Observe(float64(len(b.unique)))
	start := time.Now()
	res := w.writeBatch(ctx, b.unique, b)
	for i := range b.ops {
		wi := b.owner[i]
		r := res[b.pos[wi]]
		if wi != i {
			r = loserResult(b.items[i], b.items[wi], r)
		}
		w.stats.outcome(r.Outcome)
		b.ops[i].req.finish(b.ops[i].idx, r)
	}
	w.sem.release(n)
	w.log.Debug("batch written", zap.Int("items", n), zap.Int("ops", len(b.unique)),
		zap.Duration("took", time.Since(start)))
	if recyclable(res) {
		w.batches.put(b)
	}
}

// recyclable reports whether a batch with these results may be reused. An unknown outcome
// carries the driver's error, and a BulkWriteException's write errors point at the models
// they failed (BulkWriteError.Request), which live in the batch: such a batch is left to the
// GC, so that an error handed to a caller never sees its models overwritten. Other errors
// (rejected items) wrap only the server's WriteError.
func recyclable(res []Result) bool {
	for _, r := range res {
		if r.Outcome == OutcomeUnknown {
			return false
		}
	}
	return true
}

// Submit writes items and blocks until every one is durably written or classified: it returns
// one Result per item, in order. If the outcome of any item is unknown (the store was
// unavailable after the retry policy), the results are returned with an error wrapping
// ErrUnavailable; resending is safe. While the store is known to be down it returns a
// *StoreDownError and no results at once (after at most one probe, see Available). A Submit that does not fit in Options.MaxPending blocks
// until earlier items are written (backpressure, never dropping). It returns ctx's error if ctx
// ends first, and ErrClosed once Run stopped accepting; items accepted before either are still
// written. Submit copies items: the caller may reuse the slice once Submit returns.
func (w *Writer) Submit(ctx context.Context, items []Item) ([]Result, error) {
	if len(items) == 0 {
		return []Result{}, nil
	}
	if err := w.health.check(ctx); err != nil {
		w.stats.refused.Add(int64(len(items)))
		return nil, err
	}
	req := &request{results: make([]Result, len(items)), done: make(chan struct{})}
	req.left.Store(int64(len(items)))
	for start := 0; start < len(items); {
		n := min(len(items)-start, w.opts.MaxPending)
		if err := w.sem.acquire(ctx, w.stopping, n); err != nil {
			return nil, err
		}
		if err := w.enqueue(items[start:start+n], req, start); err != nil {
			w.sem.release(n)
			return nil, err
		}
		start += n
	}
	select {
	case <-req.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for _, r := range req.results {
		if r.Outcome == OutcomeUnknown {
			if r.Err == nil {
				return req.results, ErrUnavailable
			}
			return req.results, r.Err
		}
	}
	return req.results, nil
}

// enqueue appends accepted items to the pending set and wakes Run when it should look.
func (w *Writer) enqueue(items []Item, req *request, first int) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	now := w.clock.now() // under mu: arrival times are in queue order
	before := w.pending.len()
	// A light project's first pending item wakes Run too: its batch does not wait for the
	// heavy project's in flight, nor for its deadline.
	wake := before == 0
	heavy, isHeavy := w.load.heavy(now)
	for start := 0; start < len(items); { // a run of one project's items at a time
		p := items[start].Project
		end := start + 1
		for end < len(items) && items[end].Project == p {
			end++
		}
		if !wake && isHeavy && p != heavy && w.pending.flows[p] == nil {
			wake = true
		}
		for i := start; i < end; i++ {
			w.pending.push(op{item: items[i], req: req, idx: first + i, at: now})
		}
		w.load.add(p, end-start, now)
		start = end
	}
	filled := before < w.opts.MaxBatch && w.pending.len() >= w.opts.MaxBatch
	w.mu.Unlock()
	// Later arrivals need no wake-up: Run's deadline accounts for them when it fires.
	if wake || filled {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return nil
}
