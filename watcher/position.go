package watcher

import "go.mongodb.org/mongo-driver/v2/bson"

// position is where one opened change stream stands between the events it read and what is
// safe to checkpoint: a token is safe once every event before it has its parents and their
// summaries durably written. It owns the tokens that are not safe yet, each in the step its
// burst has reached:
//   - pending: after the burst being gathered, whose parents are not written yet;
//   - held: after bursts whose parents are written and whose summaries still wait (in the
//     stream's recompute.Dirty);
//   - flushTo: after the bursts whose summaries the flush in flight writes; it is safe once
//     that flush succeeds, and dropped with it when it fails (the stream then restarts from
//     the last safe token and redoes the bursts).
//
// advance is called with each token that becomes safe, in stream order. The position does not
// read the stream or write anything: the stream loop (see stream) writes the parents, starts
// the flushes and saves checkpoints, and tells the position each step.
type position struct {
	pending, held bson.Raw
	flush         *tierFlush
	flushTo       bson.Raw
	advance       func(bson.Raw)
}

// read records the token after a batch added to the burst (nil: the batch has none).
func (p *position) read(token bson.Raw) {
	if token != nil {
		p.pending = token
	}
}

// written records that the burst's parents are written; waiting says summaries of written
// parents wait unwritten. The token after the burst is safe at once unless summaries wait, a
// flush is in flight or a token is held before it: then it is held.
func (p *position) written(waiting bool) {
	if p.pending == nil {
		return
	}
	if waiting || p.held != nil || p.flush != nil {
		p.held = p.pending
	} else {
		p.advance(p.pending)
	}
	p.pending = nil
}

// flushing reports whether a flush is in flight.
func (p *position) flushing() bool { return p.flush != nil }

// hand gives the held token to f, the flush of every waiting summary just started: it is safe
// once f succeeds. At most one flush is in flight: the previous one must be finished.
func (p *position) hand(f *tierFlush) {
	p.flush, p.flushTo, p.held = f, p.held, nil
}

// release makes the held token safe: no summary waits (nothing to flush).
func (p *position) release() {
	if p.held != nil {
		p.advance(p.held)
		p.held = nil
	}
}

// finish waits for the flush in flight, if any, and makes the token it took safe; it returns
// the flush's error (the token is then dropped).
func (p *position) finish() error {
	if p.flush == nil {
		return nil
	}
	f, to := p.flush, p.flushTo
	p.flush, p.flushTo = nil, nil
	if err := f.wait(); err != nil {
		return err
	}
	if to != nil {
		p.advance(to)
	}
	return nil
}

// collect finishes the flush in flight only if it is already done (it does not wait).
func (p *position) collect() error {
	if p.flush == nil || !p.flush.done() {
		return nil
	}
	return p.finish()
}

// abandon waits for the flush in flight without moving: the stream ends with an error already,
// and the bursts it covered are redone from the last safe token.
func (p *position) abandon() {
	if p.flush != nil {
		_ = p.flush.wait()
	}
}
