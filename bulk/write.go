package bulk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/store"
)

// model returns the guarded upsert of it (store.AppendLeafUpsert: the key, the item's project,
// version < v and "not a rollup document" as the filter, absolute $set values, upsert), encoded
// into buf (returned grown). Re-sending it is idempotent. The project and rollup guards mean a
// leaf can never overwrite another project's document or the watcher's document of a parent:
// the upsert fails on the unique index, and resolve rejects the item (the API refuses such ids
// before they get here when it knows the trees).
func model(buf []byte, it Item, writtenAt time.Time) (mongo.WriteModel, []byte) {
	filter, update, buf := encodeModel(buf, it, writtenAt)
	return mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(update).SetUpsert(true), buf
}

// encodeModel appends the filter and the update of model(it) to buf.
func encodeModel(buf []byte, it Item, writtenAt time.Time) (filter, update bson.Raw, _ []byte) {
	return store.AppendLeafUpsert(buf, store.LeafWrite{
		ID: it.ID, Type: it.Type, Tick: it.Timestamp, Project: it.Project,
		Online: it.Online, Version: it.Version, SubmissionID: it.SubmissionID,
	}, writtenAt)
}

// modelSize bounds the bytes model appends for it (field names, values and framing).
func modelSize(it Item) int {
	return 256 + 2*len(it.ID) + len(it.Type) + 2*len(it.Project) + len(it.SubmissionID)
}

// write writes deduplicated items (at most one per key) and returns one result per item.
//
// Policy, per batch:
//  1. One unordered BulkWrite of every item's guarded upsert.
//  2. BulkWriteException with write errors only: items without a write error are applied;
//     E11000 items go to step 3; other write errors reject their item.
//  3. The E11000 items' documents are read (one find, resolve.go): another project's or a
//     parent's document rejects the item, a same-or-newer version makes it stale; the rest
//     (an insert race lost to an older version) are re-issued once, in one BulkWrite.
//
// Either BulkWrite whose outcome is unknown (a write-concern error, or a command-level error
// left after the driver's own retry) is re-sent whole once if the store answers a probe; if
// that fails too, its items end as OutcomeUnknown with an error wrapping ErrUnavailable. A
// command-level error a resend cannot fix (store.ClassPermanent, e.g. Unauthorized) ends them the
// same way without a resend, so agents keep their data and resend later.
//
// The models, their encoded documents and the results live in b (see batch); the results
// are valid until b is recycled.
func (w *Writer) write(ctx context.Context, items []Item, b *batch) []Result {
	n := len(items)
	b.res = grow(b.res, n)
	clear(b.res)
	b.upsert = true
	b.updates = grow(b.updates, n)
	b.models = grow(b.models, n)
	b.all = grow(b.all, n)
	size := 0
	for _, it := range items {
		size += modelSize(it)
	}
	if cap(b.buf) < size {
		b.buf = make([]byte, 0, size) // every op's filter and update, in one array
	}
	buf := b.buf[:0]
	now := time.Now().UTC()
	for i, it := range items {
		var filter, update bson.Raw
		filter, update, buf = encodeModel(buf, it, now)
		b.updates[i] = mongo.UpdateOneModel{Filter: filter, Update: update, Upsert: &b.upsert}
		b.models[i] = &b.updates[i]
		b.all[i] = i
	}
	b.buf = buf
	// Send in key order: inserts and lookups then walk the unique index's B-tree left to right
	// instead of jumping around it (agents' items arrive interleaved). An unordered bulk's op
	// order carries no meaning, and results stay indexed by item (docs/benchmarks.md measures
	// the difference). Items from flush are in key order already (dedup's winners).
	byKey := func(x, y int) int { return compareStoredKeys(items[x].Key, items[y].Key) }
	if !slices.IsSortedFunc(b.all, byKey) {
		slices.SortFunc(b.all, byKey)
	}
	if dups := w.phase(ctx, b, b.all); len(dups) > 0 {
		w.resolve(ctx, b, items, dups)
	}
	return b.res
}

// phase runs the BulkWrite of b.models[idx...] with the resend-once policy and fills b.res
// for idx, except for the ops that failed with E11000, which it returns.
func (w *Writer) phase(ctx context.Context, b *batch, idx []int) []int {
	res := b.res
	b.sub = grow(b.sub, len(idx))
	sub := b.sub
	for j, i := range idx {
		sub[j] = b.models[i]
	}
	for attempt := 0; ; attempt++ {
		if !w.health.up() {
			// The store went down after this batch was cut, or during its first attempt.
			w.refuse(idx, res)
			return nil
		}
		err := w.bulkWrite(ctx, sub)
		if err == nil {
			w.health.succeeded()
			for _, i := range idx {
				res[i] = Result{Outcome: OutcomeApplied}
			}
			return nil
		}
		var bwe mongo.BulkWriteException
		if errors.As(err, &bwe) && bwe.WriteConcernError == nil && len(bwe.WriteErrors) > 0 {
			w.health.succeeded()
			return w.perIndex(bwe, idx, res)
		}
		class := classify(err)
		if ctx.Err() != nil {
			class = store.ClassContext
		}
		storeFault := class == store.ClassUnknownOutcome || class == store.ClassWriteConcern
		if attempt == 0 && storeFault {
			// One resend, if the store answers a probe; otherwise it is down and the resend
			// would only wait for it. Known down already (this attempt was ended for it, or
			// another batch found it): no probe either.
			if !w.health.up() {
				err = fmt.Errorf("%w (no resend: %w)", err, w.health.downErr())
			} else if perr := w.health.verify(); perr != nil {
				err = fmt.Errorf("%w (no resend: %w)", err, perr)
			} else {
				w.stats.retries[classIndex(class)].Add(1)
				w.log.Warn("bulk write outcome unknown, resending once",
					zap.Int("ops", len(sub)), zap.Stringer("class", class), zap.Error(err))
				continue
			}
		}
		if storeFault {
			// A resend that fails again (an attempt timeout, a connection the pool could not
			// give in time) while the store still answers a probe is a slow or saturated store,
			// not an outage: this batch's outcome is unknown (its agents resend), the other
			// writes go on. A store that does not answer the probe is down.
			if attempt > 0 && w.health.up() && w.health.verify() == nil {
				w.log.Warn("bulk write failed twice; the store answers: slow, not down",
					zap.Int("ops", len(sub)), zap.Error(err))
			} else {
				w.health.failed(err)
			}
		}
		w.stats.failures[classIndex(class)].Add(1)
		uerr := fmt.Errorf("%w: %w", ErrUnavailable, err)
		w.log.Error("bulk write failed", zap.Int("ops", len(sub)), zap.Stringer("class", class),
			zap.Int("attempts", attempt+1), zap.Error(err))
		for _, i := range idx {
			res[i] = Result{Outcome: OutcomeUnknown, Err: uerr}
		}
		return nil
	}
}

// refuse ends the ops of idx as OutcomeUnknown with the store-down error, without a write.
func (w *Writer) refuse(idx []int, res []Result) {
	err := w.health.downErr()
	w.stats.refused.Add(int64(len(idx)))
	for _, i := range idx {
		res[i] = Result{Outcome: OutcomeUnknown, Err: err}
	}
}

// bulkWrite runs one unordered BulkWrite. Its context has no deadline, so the driver retries
// a retryable error once (with a deadline it would retry until the deadline); the writer's
// own timer cancels it after Options.AttemptTimeout.
func (w *Writer) bulkWrite(ctx context.Context, models []mongo.WriteModel) error {
	return w.attempt(ctx, func(ctx context.Context) error {
		_, err := w.coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		return err
	})
}

// attempt runs one store command under ctx (which has no deadline), canceled by the writer's
// own timer after Options.AttemptTimeout, or when the store goes down meanwhile (another batch
// or the StoreMonitor found it unreachable: the driver would only wait for a server).
func (w *Writer) attempt(ctx context.Context, fn func(context.Context) error) error {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if w.opts.AttemptTimeout > 0 {
		t := time.AfterFunc(w.opts.AttemptTimeout, func() { cancel(errAttemptTimeout) })
		defer t.Stop()
	}
	defer w.health.track(func() { cancel(errStoreDown) })()
	err := fn(actx)
	if err != nil {
		switch cause := context.Cause(actx); {
		case errors.Is(cause, errAttemptTimeout), errors.Is(cause, errStoreDown):
			return fmt.Errorf("%w: %w", cause, err)
		}
	}
	return err
}

// perIndex maps the write errors of a BulkWriteException back to the items: Index is the
// position in the models slice passed to BulkWrite (the driver maps it back through its
// regrouping), so idx[Index] is the item.
func (w *Writer) perIndex(bwe mongo.BulkWriteException, idx []int, res []Result) []int {
	failed := make(map[int]bool, len(bwe.WriteErrors))
	var dups []int
	for _, we := range bwe.WriteErrors {
		if we.Index < 0 || we.Index >= len(idx) {
			w.log.Error("write error index out of range", zap.Int("index", we.Index), zap.Int("ops", len(idx)))
			continue
		}
		i := idx[we.Index]
		failed[we.Index] = true
		switch store.ClassifyWriteError(we.WriteError) {
		case store.ClassDuplicateKey:
			dups = append(dups, i)
		default:
			res[i] = Result{Outcome: OutcomeRejected, Err: fmt.Errorf("rejected by the store: %w", we.WriteError)}
		}
	}
	for j, i := range idx {
		if !failed[j] {
			res[i] = Result{Outcome: OutcomeApplied}
		}
	}
	return dups
}
