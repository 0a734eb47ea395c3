package watcher

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/conc"
	"github.com/sourcegraph/conc/pool"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/lease"
	"github.com/gameops/rollup/recompute"
	"github.com/gameops/rollup/retry"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree/treedb"
)

// Watcher consumes the change stream of the counts collection and keeps every parent and root
// total equal to the sum of its children.
type Watcher struct {
	db      *mongo.Database
	engine  *recompute.Engine
	opts    Options
	log     *zap.Logger
	stats   *counters
	now     func() time.Time
	part    Partition
	cps     checkpoints
	started atomic.Bool
	leaders *leadership
	// idx is the partition's index in Options.Partitions (a partition's watcher).
	idx int
	// healthy says the partition's status is "streaming" (avoids taking the lock per batch).
	healthy atomic.Bool
	// trees is the engine's tree source; done tracks the ticks this partition's stream
	// completes (one per partition: only its own goroutine uses it).
	trees treedb.TreeSource
	done  *completion
}

// New returns a watcher of db's counts collection. It writes parents and checkpoints with
// w:majority, j:true and reads parents with read concern majority, whatever db's defaults.
func New(db *mongo.Database, trees treedb.TreeSource, opts Options, log *zap.Logger) *Watcher {
	if log == nil {
		log = zap.NewNop()
	}
	opts = opts.withDefaults()
	log = log.Named("watcher")
	return &Watcher{
		db: db,
		engine: recompute.New(db, trees, recompute.Options{
			ChunkSize: opts.ChunkSize, Workers: opts.Workers, MaxConflicts: opts.MaxConflicts,
			ReplayChunk: opts.ReplayChunk, Knobs: &opts.Knobs.Recompute,
		}, log),
		opts:    opts,
		log:     log,
		stats:   &counters{},
		now:     time.Now,
		part:    opts.Partitions[0],
		cps:     newCheckpoints(db, opts.Partitions[0].id(opts.Name)),
		leaders: newLeadership(opts),
		trees:   trees,
		done:    newCompletion(trees),
	}
}

// Stats returns the counters since New.
func (w *Watcher) Stats() Stats { return w.stats.snapshot(w.engine.Stats()) }

// errHistoryLost marks a stream that cannot resume from the saved position.
var errHistoryLost = errors.New("change stream history lost")

// codeHistoryLost is the server's ChangeStreamHistoryLost error code.
const codeHistoryLost = 286

func isHistoryLost(err error) bool {
	if errors.Is(err, errHistoryLost) {
		return true
	}
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(codeHistoryLost)
}

// Run watches until ctx is done, then finishes the burst in progress (bounded by
// Options.ShutdownTimeout), saves the last safe checkpoint and returns nil. A failure (a read
// or write that still fails after the driver's retry, a tree that cannot be loaded) restarts
// the stream from the last safe position after a backoff (Options.Backoff), for as long as ctx
// lives; Run returns only a permanent error (retry.IsPermanent: configuration or programming,
// such as a store without change streams) or, for a leased watcher, a duplicate instance id.
// Run may be called once.
//
// Start-up: with a checkpoint the stream resumes after its token (startAfter, which also
// works after an invalidate). Without a checkpoint, or when the server no longer has the
// history after it (ChangeStreamHistoryLost), a new stream is opened first and the leaves
// written since the checkpoint (minus Options.ReplayMargin; all leaves when there is none)
// are recomputed from the collection; events the new stream delivers meanwhile are processed
// afterwards, and the overlap is harmless because recomputing is idempotent.
//
// Partitions: each partition runs its own stream and checkpoint as described above, all at
// once; a permanent failure of one stops the others. With Options.Leases, Run instead runs
// only the partitions whose lease it holds (see runLeased in leased.go).
//
// Status (Options.Status) is ready when every partition this instance leads has a stream
// that made progress since its last failure and every other partition is held by another
// owner (or this instance leads Options.MaxPartitions); otherwise it names what waits.
func (w *Watcher) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("watcher: Run called twice")
	}
	if w.opts.Leases {
		return w.runLeased(ctx)
	}
	if len(w.opts.Partitions) == 1 {
		w.leaders.set(0, true, 0, w.now())
		defer w.leaders.set(0, false, 0, time.Time{})
		return w.run(ctx, context.WithoutCancel(ctx))
	}
	p := pool.New().WithErrors().WithContext(ctx).WithCancelOnError().WithFirstError()
	for i, part := range w.opts.Partitions {
		pw := w.forPartition(i, part, nil)
		p.Go(func(ctx context.Context) error {
			w.leaders.set(i, true, 0, w.now())
			defer w.leaders.set(i, false, 0, time.Time{})
			return pw.run(ctx, context.WithoutCancel(ctx))
		})
	}
	return p.Wait()
}

// forPartition returns a watcher of one partition sharing w's counters, trees and knobs; f
// fences its writes (nil: unfenced).
func (w *Watcher) forPartition(i int, part Partition, f *recompute.Fence) *Watcher {
	log := w.log
	if part.Name != "" {
		log = w.log.With(zap.String("partition", part.Name))
	}
	c := &Watcher{
		db: w.db, engine: w.engine.WithFence(f, log), opts: w.opts, log: log, stats: w.stats, now: w.now,
		part: part, cps: newCheckpoints(w.db, part.id(w.opts.Name)), leaders: w.leaders, idx: i,
		trees: w.trees, done: newCompletion(w.trees),
	}
	if f != nil {
		c.cps.term = f.Term
	}
	return c
}

// run is Run for one partition. The work context, which the writes of a batch use, outlives
// ctx by ShutdownTimeout but ends at once with hard (a lost lease).
func (w *Watcher) run(ctx, hard context.Context) error {
	// work outlives ctx by ShutdownTimeout so the batch in progress can finish.
	work, cancelWork := context.WithCancel(hard)
	defer cancelWork()
	stopTimer := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(w.opts.ShutdownTimeout, cancelWork)
		context.AfterFunc(work, func() { t.Stop() })
	})
	defer stopTimer()

	s, err := w.loadState(ctx)
	if s == nil {
		return err
	}
	attempt := 0
	var warn retry.Throttle
	for {
		s.progress = false
		err := w.runStream(ctx, work, s)
		if s.progress {
			attempt = 0 // it made progress since the last failure
		}
		switch {
		case errors.Is(err, recompute.ErrCrashed), errors.Is(err, lease.ErrFenced):
			return err
		case ctx.Err() != nil:
			return w.shutdown(work, s)
		case errors.Is(err, errInvalidated):
			w.log.Info("change stream invalidated; restarting after the invalidate event")
			continue
		case isHistoryLost(err):
			from := s.safe.since()
			if t := tokenTime(s.token); t.T != 0 {
				from = time.Unix(int64(t.T), 0).UTC() // everything before s.token is processed
			}
			s.resume, s.recover, s.lost, s.reason = nil, true, true, "change stream history lost"
			s.from = from.Add(-w.opts.ReplayMargin)
			continue
		case retry.IsPermanent(err):
			w.failing(err)
			return err
		}
		attempt++
		w.failing(err)
		delay := w.opts.Backoff.Delay(attempt)
		if warn.Allow(time.Now()) || attempt == 1 {
			w.log.Warn("watcher failed; restarting from the last safe position",
				zap.Int("attempt", attempt), zap.Duration("backoff", delay), zap.Error(err))
		}
		if s.token != nil {
			s.resume = s.token
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return w.shutdown(work, s)
		case <-t.C:
		}
	}
}

// loadState reads the checkpoint, retrying store errors with backoff; a nil state comes with
// a permanent error, or nil when ctx ended.
func (w *Watcher) loadState(ctx context.Context) (*streamState, error) {
	for attempt := 1; ; attempt++ {
		cp, ok, err := w.cps.load(ctx)
		switch {
		case err == nil && ok:
			return &streamState{resume: cp.Token, safe: cp}, nil
		case err == nil:
			return &streamState{recover: true, reason: "no checkpoint"}, nil
		case ctx.Err() != nil:
			return nil, nil
		case retry.IsPermanent(err):
			w.failing(err)
			return nil, err
		}
		w.failing(err)
		if attempt == 1 {
			w.log.Warn("could not load the checkpoint; retrying", zap.Error(err))
		}
		if w.opts.Backoff.Wait(ctx, attempt) != nil {
			return nil, nil
		}
	}
}

// failing records that the partition's stream failed with err.
func (w *Watcher) failing(err error) {
	w.healthy.Store(false)
	w.leaders.streaming(w.idx, false, err.Error())
}

// progressed records that the partition's stream made progress.
func (w *Watcher) progressed(s *streamState) {
	s.progress = true
	if !w.healthy.Swap(true) {
		w.leaders.streaming(w.idx, true, "")
	}
}

// shutdownOr returns nil when ctx is done (a shutdown), else err.
func shutdownOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// streamState is the position of the watcher across stream restarts.
type streamState struct {
	// resume is the token to start after (nil: now).
	resume bson.Raw
	// safe is the last checkpoint saved; token is the last safe token, maybe not saved yet.
	safe  checkpoint
	token bson.Raw
	// recover asks for the window since from to be replayed once the stream is open; lost
	// says the server lost the history after the checkpoint (else there was none).
	recover, lost bool
	from          time.Time
	reason        string
	// progress says the current stream wrote, saved or caught up since it was opened.
	progress bool
}

// errInvalidated ends a stream on an invalidate event; streamState.resume is then its token.
var errInvalidated = errors.New("change stream invalidated")

// open starts the change stream after s.resume, or now.
func (w *Watcher) open(ctx context.Context, s *streamState) (*mongo.ChangeStream, error) {
	o := options.ChangeStream().
		SetFullDocument(options.UpdateLookup).
		SetMaxAwaitTime(w.opts.MaxAwait)
	if w.opts.BatchSize > 0 {
		o.SetBatchSize(w.opts.BatchSize)
	}
	if s.resume != nil {
		o.SetStartAfter(s.resume)
	}
	cs, err := w.db.Collection(store.CountsCollection).Watch(ctx, w.part.streamFilter(), o)
	if err != nil {
		return nil, fmt.Errorf("open change stream: %w", err)
	}
	return cs, nil
}

// runStream opens a stream, replays a lost window if asked, and processes batches until the
// stream ends or ctx is done.
//
// A burst is the leaves of consecutive server batches, recomputed together: each dirty
// (parent, tick) is written once per burst. The batches are read ahead by a reader goroutine
// (see reader) while the burst before is written. A burst ends as burstEnds says — the stream
// quiet, a (project, tick) complete (see completion), every batch read so far in it,
// MaxBurstDelay, MaxBurst, an invalidate or shutdown —; server batches are never split.
//
// The summaries of the parents a burst wrote (or found current) wait in dirty until the
// stream is quiet, MaxTierDelay passes or MaxTierBuckets are waiting (and at an invalidate or
// shutdown): then every waiting bucket is recomputed once, by a flush that runs beside the
// next bursts (see tierFlush), so the parents' freshness does not wait for the summaries.
// Meanwhile the position stays before those bursts (see position), so a crash before the
// summaries are written redoes the bursts, whose parents are current and come back into dirty.
func (w *Watcher) runStream(ctx, work context.Context, s *streamState) error {
	cs, err := w.open(ctx, s)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(work, 5*time.Second) // bounded by the shutdown too
		defer cancel()
		_ = cs.Close(cctx)
	}()
	s.token = cs.ResumeToken()
	if s.recover {
		if err := w.recoverWindow(work, s); err != nil {
			return err
		}
		s.recover = false
		if err := w.save(work, s, s.token); err != nil {
			return err
		}
		w.progressed(s)
	}
	st := w.newStream(ctx, work, s)
	defer st.flushes.Wait() // after abandon: raises the panic of a flush that panicked
	defer st.pos.abandon()  // the stream ends with an error already; the flush is redone
	rd := w.read(ctx, cs)
	defer rd.stop() // before cs.Close (deferred earlier, so run later)
	for {
		st.calls++
		if end, err := st.batch(rd.next(), rd); end {
			return err
		}
	}
}

// stream is the loop of one opened change stream: the burst being gathered, the summaries
// waiting (dirty) and the position, over the watcher's writes and checkpoints.
type stream struct {
	w         *Watcher
	ctx, work context.Context
	s         *streamState
	burst     *burstState
	dirty     *recompute.Dirty
	pos       position
	flushes   conc.WaitGroup // the flushes of summaries (at most one in flight: see position)
	lastWrite time.Duration  // how long the last burst's writes took
	// calls counts the TryNext calls of this stream: the first one only reads the batch the
	// stream was opened with (no getMore), so an empty first batch proves nothing.
	emptyResumes, calls int
}

// newStream returns the loop of a stream just opened, at s.token.
func (w *Watcher) newStream(ctx, work context.Context, s *streamState) *stream {
	st := &stream{w: w, ctx: ctx, work: work, s: s, burst: newBurst(), dirty: recompute.NewDirty()}
	st.pos.advance = func(tok bson.Raw) {
		s.token = tok
		w.stats.prog.position(w.cps.id, s.token)
	}
	return st
}

// batch processes the next batch the reader delivered; end says the stream is over, with err
// (nil: ctx is done).
func (st *stream) batch(b streamBatch, rd *reader) (end bool, err error) {
	if b.err != nil {
		if st.ctx.Err() != nil {
			// Shutdown: finish what the stream delivered; the token stays after it.
			if ferr := st.writeBurst(); ferr != nil {
				return true, ferr
			}
			if ferr := st.flushTiers(true); ferr != nil {
				return true, ferr
			}
		}
		return true, b.err
	}
	if b.n > 0 {
		st.burst.add(b)
	}
	st.pos.read(b.token)
	if why := st.w.burstEnd(st.signals(b, rd)); why != "" {
		st.burst.why = why
		if err := st.writeBurst(); err != nil {
			return true, err
		}
	}
	if err := st.tiers(b); err != nil {
		return true, err
	}
	if b.invalidate != nil {
		st.s.resume = b.invalidate
		if err := st.w.save(st.work, st.s, b.invalidate); err != nil {
			return true, err
		}
		return true, errInvalidated
	}
	if st.ctx.Err() != nil {
		return true, nil
	}
	if err := st.checkpoint(b); err != nil {
		return true, err
	}
	return false, nil
}

// signals is what burstEnds decides on after batch b.
func (st *stream) signals(b streamBatch, rd *reader) burstSignals {
	return burstSignals{
		n: b.n, complete: b.complete, end: b.invalidate != nil || st.ctx.Err() != nil,
		leaves: len(st.burst.leaves), age: time.Since(st.burst.start), lastWrite: st.lastWrite,
		closing: st.burst.closing, ahead: rd.ready(),
	}
}

// writeBurst writes the parents of the burst gathered and moves the position past it.
func (st *stream) writeBurst() error {
	if len(st.burst.leaves) > 0 {
		took, err := st.w.processBurst(st.work, st.burst, st.dirty)
		if err != nil {
			return err
		}
		st.lastWrite = took
		st.w.progressed(st.s)
	}
	st.burst.reset()
	st.pos.written(st.dirty.Len() > 0)
	return nil
}

// tiers finishes the flush in flight when it is done (waiting for it at the stream's end or
// when MaxTierBuckets wait), and starts the next one between bursts when tiersDue says so.
func (st *stream) tiers(b streamBatch) error {
	ending := b.invalidate != nil || st.ctx.Err() != nil
	finish := st.pos.collect
	if ending || st.dirty.Len() >= st.w.opts.MaxTierBuckets {
		finish = st.pos.finish
	}
	if err := finish(); err != nil {
		return err
	}
	if len(st.burst.leaves) == 0 && !st.pos.flushing() && st.tiersDue(b.n == 0 || ending) {
		return st.flushTiers(ending)
	}
	return nil
}

// flushTiers hands the waiting buckets and the held position to a new flush (at most one is
// in flight); with block it waits for it.
func (st *stream) flushTiers(block bool) error {
	if err := st.pos.finish(); err != nil {
		return err
	}
	if st.dirty.Len() == 0 {
		st.pos.release()
		return nil
	}
	st.pos.hand(st.w.flushTiers(st.work, st.dirty, &st.flushes))
	st.dirty = recompute.NewDirty()
	if block {
		return st.pos.finish()
	}
	return nil
}

// tiersDue reports whether the waiting summaries (or a held position) are due for a flush:
// the stream is quiet, or MaxTierBuckets or MaxTierDelay is reached.
func (st *stream) tiersDue(quiet bool) bool {
	n := st.dirty.Len()
	if n == 0 {
		return st.pos.held != nil
	}
	return quiet || n >= st.w.opts.MaxTierBuckets || time.Since(st.dirty.Since()) >= st.w.opts.MaxTierDelay
}

// checkpoint saves the safe token between bursts every CheckpointInterval and records the
// stream's progress; an empty batch the driver resumed the stream for is no sign of health,
// and maxEmptyResumes of them in a row end the stream.
func (st *stream) checkpoint(b streamBatch) error {
	s := st.s
	if b.resumed && b.n == 0 {
		if st.emptyResumes++; st.emptyResumes >= maxEmptyResumes {
			return fmt.Errorf("change stream: %w", errResumeLoop)
		}
		return nil
	}
	st.emptyResumes = 0
	idle := len(st.burst.leaves) == 0
	switch {
	case idle && time.Since(s.safe.SavedAt) >= st.w.opts.CheckpointInterval && !bytesEqual(s.token, s.safe.Token):
		if err := st.w.save(st.work, s, s.token); err != nil {
			return err
		}
		if st.calls > 1 {
			st.w.progressed(s)
		}
	case b.n == 0 && idle && st.calls > 1:
		st.w.progressed(s) // caught up, nothing to save yet
	}
	return nil
}

// burstState is the leaves of the batches gathered for the next recompute: when the first came and,
// per (project, tick), how many of its leaves the burst holds, so that it knows when a tick is
// closing — no more of its leaves to come than the burst holds of it (see burstEnds).
type burstState struct {
	leaves  []store.Leaf
	start   time.Time
	ticks   map[tickKey]int
	closing bool
	// newest is the wall time of the newest leaf event held and lag the longest time from an
	// event batch's newest leaf to the watcher holding it (the stream's delivery): for the
	// debug line of the burst.
	newest time.Time
	lag    time.Duration
	why    string // what ended it (burstEnds)
}

func newBurst() *burstState { return &burstState{ticks: map[tickKey]int{}} }

// add gathers the leaves of a batch (its progress from the stream's completion tracker).
func (b *burstState) add(sb streamBatch) {
	if len(b.leaves) == 0 {
		b.start = time.Now()
	}
	b.leaves = append(b.leaves, sb.leaves...)
	if !sb.newest.IsZero() {
		b.newest = later(b.newest, sb.newest)
		b.lag = max(b.lag, sb.read.Sub(sb.newest))
	}
	for _, p := range sb.progress {
		b.ticks[p.key] += p.n
		if p.remaining > 0 && p.remaining <= b.ticks[p.key] {
			b.closing = true
		}
	}
}

// reset empties the burst once it is written (keeping its capacity).
func (b *burstState) reset() {
	b.leaves = b.leaves[:0]
	clear(b.ticks)
	b.closing = false
	b.newest, b.lag, b.why = time.Time{}, 0, ""
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// burstSignals is what decides whether a burst ends after a batch (see burstEnds).
type burstSignals struct {
	n        int  // events in the batch (0: an empty getMore, the stream is quiet)
	complete bool // the batch completed a tick
	end      bool // the batch ends the stream (an invalidate, a shutdown)
	leaves   int  // leaves in the burst
	// age is how long ago the burst began; lastWrite how long the previous burst's writes took.
	age, lastWrite time.Duration
	closing        bool // a tick is closing (see burstState)
	ahead          bool // the reader has read the next batch already
}

// burstEnds reports whether the burst ends after a batch, as c describes it.
//
// A burst ends when the stream is quiet or a tick complete, and otherwise once every batch
// read so far is in it and it is as old as MinBurstDelay and as the previous burst's writes:
// the next batch then waits at most for about two bursts' writes, not for MaxBurstDelay, and
// bursts grow on their own with the writes' time. Waiting for lastWrite keeps the watcher
// writing at most about half the time while events flow, so each burst covers many leaves per
// parent above the servers: a 1M-leaf tick's bursts each rewrote up to all 200 groups (17,300
// parent writes for 10,201 parents; 14,600 with the wait). Once a tick is closing — no more of
// its leaves to come than the burst already holds of it — the burst does not wait for
// lastWrite: the tick's last leaves would otherwise arrive while a burst as large is being
// written and wait for its writes (at 100k leaves, 150–190 ms behind the last leaf instead of
// one small burst's writes). MaxBurstDelay and MaxBurst bound a burst whose reader stays ahead
// (a backlog).
func (w *Watcher) burstEnds(c burstSignals) bool {
	return w.burstEnd(c) != ""
}

// burstEnd is burstEnds with what ended the burst ("": it goes on), for the debug line.
func (w *Watcher) burstEnd(c burstSignals) string {
	lastWrite := c.lastWrite
	switch {
	case c.n == 0:
		return "quiet"
	case c.complete:
		return "complete"
	case c.end:
		return "end"
	case c.leaves >= w.opts.MaxBurst:
		return "max burst"
	case c.age >= w.opts.MaxBurstDelay:
		return "max delay"
	case c.closing:
		lastWrite = 0
	}
	if !c.ahead && c.age >= max(w.opts.MinBurstDelay, lastWrite) {
		if c.closing {
			return "closing"
		}
		return "age"
	}
	return ""
}

func bytesEqual(a, b bson.Raw) bool { return string(a) == string(b) }

// nextBatch reads the next server batch (see streamBatch): its leaf events, the token of an
// invalidate event ending it, the number of events it had (0 when the getMore came back
// empty), for an empty batch whether the driver resumed the stream to get it (its cursor
// changed: a getMore failed), whether it completed a (project, tick) (see completion), and
// the stream's resume token after it.
func (w *Watcher) nextBatch(ctx context.Context, cs *mongo.ChangeStream) streamBatch {
	cursor := cs.ID()
	if !cs.TryNext(ctx) {
		if err := cs.Err(); err != nil {
			return streamBatch{err: fmt.Errorf("change stream: %w", err)}
		}
		if cs.ID() == 0 {
			return streamBatch{err: fmt.Errorf("change stream: %w", errors.New("cursor closed by the server"))}
		}
		return streamBatch{resumed: cs.ID() != cursor, token: cs.ResumeToken()}
	}
	w.stats.batches.Add(1)
	var b streamBatch
	for {
		b.n++
		ev := decodeEvent(cs.Current)
		switch ev.op {
		case "invalidate":
			id, err := cs.Current.LookupErr("_id")
			if err != nil {
				return streamBatch{n: b.n, err: errors.New("change stream: invalidate event without _id")}
			}
			b.invalidate = bson.Raw(id.Value)
			b.complete, b.progress = w.done.addAll(ctx, b.leaves)
			return b
		case "insert", "update", "replace":
			if ev.doc == nil {
				break // deleted before the lookup: its delete is not a leaf write
			}
			owns, known := w.part.ownsDoc(ev.doc)
			if known && !owns {
				break // another partition's leaf (a hash partition's stream carries all)
			}
			w.stats.decoded.Add(1)
			l, err := store.DecodeLeaf(ev.doc)
			if err != nil {
				w.stats.invalid.Add(1)
				w.log.Warn("skipping a malformed leaf", zap.Error(err))
				break
			}
			if !known && !w.part.owns(l.Project) {
				break // ownsDoc could not read the project field: decide from the decoded leaf
			}
			b.leaves = append(b.leaves, l)
			if !ev.wall.IsZero() {
				w.stats.lastEvent.Store(ev.wall.UnixNano())
				if ev.wall.After(b.newest) {
					b.newest = ev.wall
				}
			}
		}
		if cs.RemainingBatchLength() == 0 || !cs.TryNext(ctx) {
			break
		}
	}
	if err := cs.Err(); err != nil {
		return streamBatch{n: b.n, err: fmt.Errorf("change stream: %w", err)}
	}
	b.complete, b.progress = w.done.addAll(ctx, b.leaves)
	b.token = cs.ResumeToken()
	b.read = time.Now()
	return b
}

// processBurst recomputes the ancestors of a burst's leaves and adds their hours to dirty.
// Its debug line says where a leaf's time went: delivered (the longest time from a batch's
// newest leaf event to the watcher holding the batch), gathered (from the burst's first batch
// to its writes), newest (from its newest leaf event to its writes), took (the writes), and
// what ended it.
func (w *Watcher) processBurst(ctx context.Context, b *burstState, dirty *recompute.Dirty) (time.Duration, error) {
	start := time.Now()
	if err := w.engine.Parents(ctx, b.leaves, dirty); err != nil {
		return 0, err
	}
	took := time.Since(start)
	w.stats.prog.burst(took)
	if ce := w.log.Check(zap.DebugLevel, "burst written"); ce != nil {
		fields := []zap.Field{zap.Int("leaves", len(b.leaves)), zap.Duration("took", took), zap.String("ended", b.why),
			zap.Duration("gathered", start.Sub(b.start)), zap.Duration("delivered", b.lag)}
		if !b.newest.IsZero() {
			fields = append(fields, zap.Duration("newest", start.Sub(b.newest)))
		}
		ce.Write(fields...)
	}
	return took, nil
}

// tierFlush is a write of waiting summaries running beside the stream's next bursts (the
// position it makes safe is the stream's position.flushTo).
type tierFlush struct {
	finished chan struct{} // closed when err is set
	err      error
}

// flushTiers starts writing the summaries of dirty, which the flush owns from now on, in a
// goroutine of flushes.
func (w *Watcher) flushTiers(ctx context.Context, dirty *recompute.Dirty, flushes *conc.WaitGroup) *tierFlush {
	f := &tierFlush{finished: make(chan struct{}), err: errFlushPanicked}
	flushes.Go(func() {
		defer close(f.finished) // a flush that panics fails with errFlushPanicked
		f.err = w.summarize(ctx, dirty)
	})
	return f
}

// errFlushPanicked fails a flush of summaries that panicked; the panic is raised again where
// the stream waits for its flushes.
var errFlushPanicked = errors.New("summaries flush panicked")

// done reports whether the flush has finished (wait then returns at once).
func (f *tierFlush) done() bool {
	select {
	case <-f.finished:
		return true
	default:
		return false
	}
}

// wait returns the flush's error once it has finished.
func (f *tierFlush) wait() error {
	<-f.finished
	return f.err
}

// summarize brings the summaries of dirty up to date.
func (w *Watcher) summarize(ctx context.Context, dirty *recompute.Dirty) error {
	if dirty.Len() == 0 {
		return nil
	}
	start, buckets := time.Now(), dirty.Len()
	if err := w.engine.Summarize(ctx, dirty); err != nil {
		return err
	}
	took := time.Since(start)
	w.stats.prog.tiers(took)
	if ce := w.log.Check(zap.DebugLevel, "summaries written"); ce != nil {
		ce.Write(zap.Int("hours", buckets), zap.Duration("took", took))
	}
	return nil
}

// save stores token as the checkpoint (every event before it has its rollups durable).
func (w *Watcher) save(ctx context.Context, s *streamState, token bson.Raw) error {
	if token == nil {
		return nil
	}
	cp, err := w.cps.save(ctx, token, w.now())
	if err != nil {
		return err
	}
	s.safe = cp
	w.stats.prog.checkpoint(w.cps.id, cp)
	return nil
}

// shutdown saves the last safe token under the work context and returns.
func (w *Watcher) shutdown(work context.Context, s *streamState) error {
	if s.token == nil || bytesEqual(s.token, s.safe.Token) || s.recover {
		return nil
	}
	if err := w.save(work, s, s.token); err != nil {
		w.log.Warn("could not save the last checkpoint at shutdown; the next start resumes from the previous one", zap.Error(err))
	}
	return nil
}
