package bulk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/rollup"
)

// model returns the guarded upsert of it: filter on exactly the key plus version < v and
// "not a rollup document", absolute $set values, upsert. Re-sending it is idempotent. The
// rollup guard means a leaf reported under a parent's (id, type) can never overwrite the
// watcher's document: it fails on the unique index like a stale write (the API rejects such
// leaves before they get here when it knows the tree).
func model(it Item, writtenAt time.Time) mongo.WriteModel {
	filter := bson.D{
		{Key: migrations.FieldID, Value: it.ID},
		{Key: migrations.FieldType, Value: it.Type},
		{Key: migrations.FieldTimestamp, Value: it.Timestamp.UTC()},
		{Key: migrations.FieldVersion, Value: bson.D{{Key: "$lt", Value: it.Version}}},
		{Key: rollup.FieldRollup, Value: bson.D{{Key: "$ne", Value: true}}},
	}
	update := bson.D{{Key: "$set", Value: bson.D{
		{Key: migrations.FieldOnline, Value: it.Online},
		{Key: migrations.FieldVersion, Value: it.Version},
		{Key: migrations.FieldProject, Value: it.Project},
		{Key: migrations.FieldSubmissionID, Value: it.SubmissionID},
		{Key: migrations.FieldWrittenAt, Value: writtenAt},
	}}}
	return mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(update).SetUpsert(true)
}

// write writes deduplicated items (at most one per key) and returns one result per item.
//
// Policy, per batch:
//  1. One unordered BulkWrite of every item's guarded upsert.
//  2. BulkWriteException with write errors only: items without a write error are applied;
//     E11000 items go to step 3; other write errors reject their item.
//  3. The E11000 items, and only they, are re-issued once in one BulkWrite. A second E11000
//     means a same-or-newer version is stored (stale); no error means applied.
//
// Either BulkWrite whose outcome is unknown (a write-concern error, or a command-level error
// left after the driver's own retry) is re-sent whole once; if that fails too, its items end
// as OutcomeUnknown with an error wrapping ErrUnavailable. A command-level error a resend
// cannot fix (ClassPermanent, e.g. Unauthorized) ends them the same way without a resend, so
// agents keep their data and resend later.
func (w *Writer) write(ctx context.Context, items []Item) []Result {
	res := make([]Result, len(items))
	models := make([]mongo.WriteModel, len(items))
	now := time.Now().UTC()
	all := make([]int, len(items))
	for i, it := range items {
		models[i] = model(it, now)
		all[i] = i
	}
	dups := w.phase(ctx, models, all, res, OutcomeApplied)
	if len(dups) > 0 {
		w.stats.reissued.Add(int64(len(dups)))
		w.log.Debug("re-issuing duplicate-key ops", zap.Int("ops", len(dups)), zap.Int("batch", len(items)))
		w.phase(ctx, models, dups, res, OutcomeStale)
	}
	return res
}

// phase runs the BulkWrite of models[idx...] with the resend-once policy and fills res for
// idx. Ops that fail with E11000 are returned when dupOutcome is OutcomeApplied (first
// phase) and set to dupOutcome otherwise.
func (w *Writer) phase(ctx context.Context, models []mongo.WriteModel, idx []int, res []Result, dupOutcome Outcome) []int {
	sub := make([]mongo.WriteModel, len(idx))
	for j, i := range idx {
		sub[j] = models[i]
	}
	for attempt := 0; ; attempt++ {
		err := w.bulkWrite(ctx, sub)
		if err == nil {
			for _, i := range idx {
				res[i] = Result{Outcome: OutcomeApplied}
			}
			return nil
		}
		var bwe mongo.BulkWriteException
		if errors.As(err, &bwe) && bwe.WriteConcernError == nil && len(bwe.WriteErrors) > 0 {
			return w.perIndex(bwe, idx, res, dupOutcome)
		}
		class := Classify(err)
		if ctx.Err() != nil {
			class = ClassContext
		}
		if attempt == 0 && (class == ClassUnknownOutcome || class == ClassWriteConcern) {
			w.stats.retries[classIndex(class)].Add(1)
			w.log.Warn("bulk write outcome unknown, resending once",
				zap.Int("ops", len(sub)), zap.Stringer("class", class), zap.Error(err))
			continue
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

// bulkWrite runs one unordered BulkWrite, bounded by Options.AttemptTimeout.
func (w *Writer) bulkWrite(ctx context.Context, models []mongo.WriteModel) error {
	if w.opts.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.opts.AttemptTimeout)
		defer cancel()
	}
	_, err := w.coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
	return err
}

// perIndex maps the write errors of a BulkWriteException back to the items: Index is the
// position in the models slice passed to BulkWrite (the driver maps it back through its
// regrouping), so idx[Index] is the item.
func (w *Writer) perIndex(bwe mongo.BulkWriteException, idx []int, res []Result, dupOutcome Outcome) []int {
	failed := make(map[int]bool, len(bwe.WriteErrors))
	var dups []int
	for _, we := range bwe.WriteErrors {
		if we.Index < 0 || we.Index >= len(idx) {
			w.log.Error("write error index out of range", zap.Int("index", we.Index), zap.Int("ops", len(idx)))
			continue
		}
		i := idx[we.Index]
		failed[we.Index] = true
		switch ClassifyWriteError(we.WriteError) {
		case ClassDuplicateKey:
			if dupOutcome == OutcomeApplied {
				dups = append(dups, i)
			} else {
				res[i] = Result{Outcome: dupOutcome}
			}
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
