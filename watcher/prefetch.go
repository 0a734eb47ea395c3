package watcher

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sourcegraph/conc"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/store"
)

// prefetchDepth is how many server batches the reader may hold ahead of the burst being
// processed (each at most one getMore reply, at most 16 MiB of events).
const prefetchDepth = 8

// streamBatch is one server batch as nextBatch read it, with the stream's resume token after
// it (nil after an invalidate or an error).
type streamBatch struct {
	leaves     []store.Leaf
	invalidate bson.Raw
	n          int
	resumed    bool
	complete   bool
	progress   []tickProgress // per tick the batch touched (see completion.addAll)
	token      bson.Raw
	err        error
	// newest is the wall time of its newest leaf event (zero: none or not known), read when
	// nextBatch had it: for the burst's debug line.
	newest, read time.Time
}

// reader reads a change stream's batches in its own goroutine, in order, while the watcher
// recomputes the burst before them: reading the next events (a getMore, their decoding, the
// completion bookkeeping) then overlaps the parent writes instead of following them, so a
// burst's leaves wait for one recompute, not for a recompute and a read. After an empty batch
// the driver resumed the stream for (a getMore failed) it waits until the watcher asks for
// the next one, so that a stream whose getMores keep failing costs the store no more commands
// than when the watcher read it itself (see maxEmptyResumes). It stops after a batch that
// ends the stream (an error or an invalidate) and at stop.
type reader struct {
	ch     chan streamBatch
	quit   chan struct{}
	cancel context.CancelFunc
	wg     conc.WaitGroup
	// asked counts the calls of next; wake tells a reader waiting for one that asked moved.
	mu    sync.Mutex
	asked int
	wake  chan struct{}
}

// read starts reading cs with w.nextBatch under ctx. The caller must call stop before it
// closes cs: the change stream is not safe for concurrent use. Once ctx is done the reader
// still delivers the batch whose read failed because of it, so the caller sees the stream end
// as it did when it read the stream itself.
func (w *Watcher) read(ctx context.Context, cs *mongo.ChangeStream) *reader {
	rctx, cancel := context.WithCancel(ctx)
	r := &reader{
		ch: make(chan streamBatch, prefetchDepth), quit: make(chan struct{}), cancel: cancel,
		wake: make(chan struct{}, 1),
	}
	r.wg.Go(func() {
		finished := false
		defer func() {
			if !finished { // a read panicked: the stream ends for the watcher waiting in next
				r.send(streamBatch{err: errReaderPanicked})
			}
		}()
		r.loop(rctx, w, cs)
		finished = true
	})
	return r
}

// errReaderPanicked ends a stream whose reader panicked; the panic is raised again where stop
// waits for the reader.
var errReaderPanicked = errors.New("change stream reader panicked")

// loop reads batches and sends them, in order, until one ends the stream or stop.
func (r *reader) loop(ctx context.Context, w *Watcher, cs *mongo.ChangeStream) {
	for sent := 1; ; sent++ {
		b := w.nextBatch(ctx, cs)
		if !r.send(b) || b.err != nil || b.invalidate != nil {
			return
		}
		if b.resumed && !r.waitAsked(sent) {
			return
		}
	}
}

// send hands b to next; false: stopped meanwhile.
func (r *reader) send(b streamBatch) bool {
	select {
	case r.ch <- b:
		return true
	case <-r.quit:
		return false
	}
}

// waitAsked waits until next was called more than sent times; false: stopped meanwhile.
func (r *reader) waitAsked(sent int) bool {
	for {
		r.mu.Lock()
		asked := r.asked
		r.mu.Unlock()
		if asked > sent {
			return true
		}
		select {
		case <-r.wake:
		case <-r.quit:
			return false
		}
	}
}

// next returns the next batch, in stream order.
func (r *reader) next() streamBatch {
	r.mu.Lock()
	r.asked++
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return <-r.ch
}

// ready reports whether a batch is already waiting (the reader is ahead of the burst).
func (r *reader) ready() bool { return len(r.ch) > 0 }

// stop ends the reader (aborting a getMore in flight) and waits for it.
func (r *reader) stop() {
	close(r.quit)
	r.cancel()
	r.wg.Wait()
}
