package recompute

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/lease"
	"github.com/gameops/rollup/store"
)

// guardedWrite is one parent or summary document write under optimistic concurrency on its
// rev (the document's version field).
type guardedWrite struct {
	key store.Key
	// exists says a stored document was read; rev is its version then.
	exists bool
	rev    int64
	// update is the absolute {$set: ...} document (every field of the document, new rev
	// included), from store.ParentUpdate or store.SummaryUpdate.
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

// writeGuarded sends ws (what, for messages: "parents", "1h summaries") in one unordered
// BulkWrite and returns the indices of ws that conflicted (another writer changed the document
// since it was read). Any other write error is returned as is (permanent); a write-concern or
// command-level failure wraps errUnknownOutcome.
func writeGuarded(ctx context.Context, coll *mongo.Collection, what string, ws []guardedWrite) ([]int, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	models := make([]mongo.WriteModel, len(ws))
	for i, w := range ws {
		models[i] = w.model()
	}
	_, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
	switch c := store.Classify(err); c {
	case store.ClassNone:
		return nil, nil
	case store.ClassContext:
		return nil, fmt.Errorf("write %s: %w", what, err)
	case store.ClassWriteConcern, store.ClassUnknownOutcome:
		return nil, fmt.Errorf("write %s: %w: %w", what, errUnknownOutcome, err)
	}
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) {
		return nil, fmt.Errorf("write %s: %w", what, err)
	}
	var conflicts []int
	for _, we := range bwe.WriteErrors {
		if we.Index < 0 || we.Index >= len(ws) {
			return nil, fmt.Errorf("write %s: write error for index %d of %d: %w", what, we.Index, len(ws), err)
		}
		if store.ClassifyWriteError(we.WriteError) != store.ClassDuplicateKey {
			return nil, fmt.Errorf("write %s %d (%s %s): %w", what, we.Index, ws[we.Index].key.ID, ws[we.Index].key.Tick.Format(time.RFC3339), err)
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

// isFenced reports whether err says a newer lease term holds.
func isFenced(err error) bool { return errors.Is(err, lease.ErrFenced) }
