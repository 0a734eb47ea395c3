package bulk

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"
)

// Writer coalesces submitted items into unordered BulkWrites of guarded upserts.
type Writer struct {
	coll *mongo.Collection
	opts Options
	log  *zap.Logger
}

// New returns a writer to coll (the counts collection; its write concern applies). Run must be
// running for Submit to make progress. A nil logger logs nothing.
func New(coll *mongo.Collection, opts Options, log *zap.Logger) *Writer {
	if log == nil {
		log = zap.NewNop()
	}
	return &Writer{coll: coll, opts: opts.withDefaults(), log: log.Named("bulk")}
}

// Run coalesces and writes batches until ctx is done, then stops accepting, writes what is
// pending (bounded by Options.DrainTimeout) and returns nil.
func (w *Writer) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Submit writes items and blocks until every one is durably written or classified: it returns
// one Result per item, in order. If the outcome of any item is unknown because the store is
// unavailable, the error wraps ErrUnavailable (the results are returned too). It returns ctx's
// error if ctx ends first (items already accepted are still written).
func (w *Writer) Submit(ctx context.Context, items []Item) ([]Result, error) {
	return nil, ctx.Err()
}
