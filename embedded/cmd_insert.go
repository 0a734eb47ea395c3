package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/storage"
)

func cmdInsert(ctx context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	docs, err := batchArg(r, "documents")
	if err != nil {
		return result{}, err
	}
	tot, op, writeErrors, err := s.writeStatements(ctx, r, len(docs), orderedArg(r), func(w *storage.Writer, i int) (stmtOutcome, error) {
		doc, err := withID(docs[i])
		if err == nil {
			_, err = w.Insert(r.db, coll, doc)
		}
		return stmtOutcome{n: 1}, err
	})
	if err != nil {
		return result{}, err
	}
	return writeReply(op, writeErrors, bson.E{Key: "n", Value: int32(tot.n)}), nil
}
