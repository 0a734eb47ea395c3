package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

func cmdDropIndexes(ctx context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	idx, _ := r.arg("index")
	var nWas int
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		info, ok := w.Collection(r.db, coll)
		if !ok {
			return mongoerr.New(mongoerr.NamespaceNotFound, "ns not found %s.%s", r.db, coll)
		}
		nWas = len(info.Indexes)
		switch x := idx.(type) {
		case string:
			if x == "*" {
				return w.DropIndexes(r.db, coll)
			}
			return w.DropIndex(r.db, coll, x)
		case bson.A:
			for _, n := range x {
				name, ok := n.(string)
				if !ok {
					return mongoerr.TypeMismatchf("dropIndexes.index array must contain index names")
				}
				if err := w.DropIndex(r.db, coll, name); err != nil {
					return err
				}
			}
			return nil
		case bson.D:
			for _, spec := range info.Indexes {
				if bsonval.Compare(spec.Key, x) == 0 {
					return w.DropIndex(r.db, coll, spec.Name)
				}
			}
			return mongoerr.New(mongoerr.IndexNotFound, "can't find index with key: %v", x)
		default:
			return mongoerr.TypeMismatchf("dropIndexes.index must be a string, an array of strings or an index key")
		}
	})
	if err != nil {
		return result{opTime: op}, err
	}
	return result{fields: bson.D{{Key: "nIndexesWas", Value: int32(nWas)}}, opTime: op}, nil
}
