package embedded

import (
	"context"

	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

func cmdListIndexes(_ context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	var info storage.CollectionInfo
	var ok bool
	s.engine.Read(func(rd *storage.Reader) { info, ok = rd.Collection(r.db, coll) })
	if !ok {
		return result{}, mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist: %s.%s", r.db, coll)
	}
	docs, err := encodeAll(info.Indexes, indexDoc)
	if err != nil {
		return result{}, err
	}
	return result{fields: s.firstBatch(r.db+"."+coll, docs, cursorBatchSize(r), false)}, nil
}
