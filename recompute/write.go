package recompute

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/lease"
	"github.com/gameops/rollup/store"
)

// guardedWrite is one parent document write under optimistic concurrency on its rev (the
// document's version field).
type guardedWrite struct {
	key store.Key
	// exists says a stored document was read; rev is its version then.
	exists bool
	rev    int64
	// update is the absolute {$set: ...} document (every field of the parent, new rev
	// included), from store.ParentUpdate.
	update bson.D
	// term, when > 0, is the writer's lease term: it is set on the document and the write
	// is refused (as a conflict) when the stored document has a newer term.
	term int64
}

// model returns the write as an upsert whose filter holds the rev guard: when the stored rev
// is still the one read it is updated; when the document is absent it is inserted; in every
// other case (someone changed or created it meanwhile) the upsert tries to insert a second
// document with the same unique key and fails with E11000 at its own index, because the guard
// field keeps the server from retrying the upsert as an update (see MONGODB-FACTS.md). So
// every conflict surfaces as a write error of exactly that op — a plain filter miss would not.
func (g guardedWrite) model() mongo.WriteModel {
	guard := any(g.rev)
	if !g.exists {
		guard = bson.D{{Key: "$exists", Value: false}}
	}
	filter := append(store.KeyFilter(g.key), bson.E{Key: store.FieldVersion, Value: guard})
	update := g.update
	if g.term > 0 {
		filter = append(filter, lease.TermGuard(g.term))
		update = lease.WithTerm(update, g.term)
	}
	return mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(update).SetUpsert(true)
}

// errUnknownOutcome marks a write whose effect is unknown (write-concern error, network error,
// timeout): the caller re-reads and re-merges every document of the write, which is safe
// because merging is idempotent and the writes are absolute.
var errUnknownOutcome = errors.New("parent write outcome unknown")

// writeGuarded sends ws in one unordered BulkWrite and returns the indices of ws that
// conflicted (another writer changed the document since it was read). Any other write error
// is returned as is (permanent); a write-concern or command-level failure wraps
// errUnknownOutcome.
func writeGuarded(ctx context.Context, coll *mongo.Collection, ws []guardedWrite) ([]int, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	models := make([]mongo.WriteModel, len(ws))
	for i, w := range ws {
		models[i] = w.model()
	}
	_, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
	switch c := bulk.Classify(err); c {
	case bulk.ClassNone:
		return nil, nil
	case bulk.ClassContext:
		return nil, fmt.Errorf("write parents: %w", err)
	case bulk.ClassWriteConcern, bulk.ClassUnknownOutcome:
		return nil, fmt.Errorf("write parents: %w: %w", errUnknownOutcome, err)
	}
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) {
		return nil, fmt.Errorf("write parents: %w", err)
	}
	var conflicts []int
	for _, we := range bwe.WriteErrors {
		if we.Index < 0 || we.Index >= len(ws) {
			return nil, fmt.Errorf("write parents: write error for index %d of %d: %w", we.Index, len(ws), err)
		}
		if bulk.ClassifyWriteError(we.WriteError) != bulk.ClassDuplicateKey {
			return nil, fmt.Errorf("write parent %d (%s %s): %w", we.Index, ws[we.Index].key.ID, ws[we.Index].key.Tick.Format(time.RFC3339), err)
		}
		conflicts = append(conflicts, we.Index)
	}
	return conflicts, nil
}

// Fence is what a lease holder's writes carry: its term, and how to check that the lease is
// still its own.
type Fence struct {
	// Term is the holder's lease term: every parent it writes carries it, and a write to a
	// parent with a newer term is refused.
	Term int64
	// Check returns an error wrapping lease.ErrFenced when a newer term holds the lease.
	Check func(context.Context) error
}

// writeParents is writeGuarded for the engine: a lease holder's writes carry its term, and
// after any conflict or unknown outcome the lease is checked, so a stale holder stops (an
// error wrapping lease.ErrFenced) instead of re-merging over its successor's work.
func (e *Engine) writeParents(ctx context.Context, ws []guardedWrite) ([]int, error) {
	coll := e.counts.Collection()
	if e.fence == nil {
		return writeGuarded(ctx, coll, ws)
	}
	for i := range ws {
		ws[i].term = e.fence.Term
	}
	if pause := e.opts.Knobs.BeforeFencedWrite; pause != nil {
		pause()
	}
	conflicts, err := writeGuarded(ctx, coll, ws)
	if len(conflicts) > 0 || errors.Is(err, errUnknownOutcome) {
		if ferr := e.fence.Check(ctx); ferr != nil {
			if errors.Is(ferr, lease.ErrFenced) {
				e.stats.fenced.Add(1)
			}
			return nil, ferr
		}
	}
	return conflicts, err
}
