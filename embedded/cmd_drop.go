package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/storage"
)

func cmdDrop(ctx context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	var nIndexes int
	var existed bool
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		if info, ok := w.Collection(r.db, coll); ok {
			nIndexes = len(info.Indexes)
		}
		existed, err = w.DropCollection(r.db, coll)
		return err
	})
	if err != nil {
		return result{}, err
	}
	if !existed {
		// MongoDB 7.0 drops a missing collection successfully.
		return result{opTime: op}, nil
	}
	return result{fields: bson.D{{Key: "nIndexesWas", Value: int32(nIndexes)}, {Key: "ns", Value: r.db + "." + coll}}, opTime: op}, nil
}
