package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

func cmdCreateIndexes(ctx context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	v, _ := r.arg("indexes")
	arr, ok := v.(bson.A)
	if !ok || len(arr) == 0 {
		return result{}, mongoerr.BadValuef("Must specify at least one index to create")
	}
	specs := make([]storage.IndexSpec, len(arr))
	for i, x := range arr {
		if specs[i], err = parseIndexSpec(x); err != nil {
			return result{}, err
		}
	}
	var before, after int
	var createdColl bool
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		info, ok := w.Collection(r.db, coll)
		if ok {
			before = len(info.Indexes)
		} else {
			if createdColl, err = w.CreateCollection(r.db, coll); err != nil {
				return err
			}
			before = 1
		}
		for _, spec := range specs {
			if _, err := w.CreateIndex(r.db, coll, spec); err != nil {
				return err
			}
		}
		info, _ = w.Collection(r.db, coll)
		after = len(info.Indexes)
		return nil
	})
	if err != nil {
		return result{opTime: op}, toMongoErr(err)
	}
	f := bson.D{
		{Key: "numIndexesBefore", Value: int32(before)},
		{Key: "numIndexesAfter", Value: int32(after)},
		{Key: "createdCollectionAutomatically", Value: createdColl},
	}
	if before == after {
		f = append(f, bson.E{Key: "note", Value: "all indexes already exist"})
	}
	return result{fields: f, opTime: op}, nil
}
