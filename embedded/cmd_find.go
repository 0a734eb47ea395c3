package embedded

import (
	"context"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/query"
	"github.com/gameops/rollup/embedded/storage"
)

var findFields = []string{"filter", "sort", "projection", "skip", "limit", "batchSize", "singleBatch",
	"hint", "noCursorTimeout", "allowPartialResults", "collation", "allowDiskUse", "let"}

// findArgs is a parsed find command.
type findArgs struct {
	q           bson.D
	filter      *query.Filter
	sort        *query.Sort
	proj        *query.Projection
	skip, limit int64
	batchSize   int64
	singleBatch bool
	// hint is the index a hint named (nil without one).
	hint *storage.IndexSpec
}

// findHint resolves a find's hint: the hinted index must exist; without a sort, documents come
// in its key order, as an index scan of it returns them. A $natural hint is refused (the
// server keeps no insertion order).
func (s *Server) findHint(r *request, a *findArgs) error {
	v, ok := r.arg("hint")
	if !ok {
		return nil
	}
	coll, _ := r.body[0].Value.(string)
	ix, natural, err := s.resolveHint(r.db, coll, v)
	if err != nil {
		return err
	}
	if natural {
		return mongoerr.NotImplementedf("hint {$natural: ...} (insertion order) in '%s'", r.name)
	}
	a.hint = ix
	if ix != nil && a.sort == nil {
		if a.sort, err = query.CompileSort(ix.Key); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) parseFind(r *request) (findArgs, error) {
	var a findArgs
	env, err := s.exprEnv(r)
	if err != nil {
		return a, err
	}
	if v, ok := r.arg("filter"); ok && v != nil {
		d, ok := v.(bson.D)
		if !ok {
			return a, mongoerr.TypeMismatchf("BSON field 'find.filter' is the wrong type '%s', expected type 'object'", typeName(v))
		}
		a.q = d
	}
	if a.filter, err = env.CompileFilter(a.q); err != nil {
		return a, err
	}
	sortV, _ := r.arg("sort")
	if a.sort, err = sortArg("find", sortV); err != nil {
		return a, err
	}
	projV, _ := r.arg("projection")
	if a.proj, err = projectionArg("find", "projection", projV); err != nil {
		return a, err
	}
	if err := s.findHint(r, &a); err != nil {
		return a, err
	}
	if a.skip, err = nonNegInt(r, "skip"); err != nil {
		return a, err
	}
	if a.limit, err = nonNegInt(r, "limit"); err != nil {
		return a, err
	}
	if a.batchSize, err = nonNegInt(r, "batchSize"); err != nil {
		return a, err
	}
	if _, ok := r.arg("batchSize"); !ok {
		a.batchSize = defaultFirstBatch
	}
	if v, ok := r.arg("singleBatch"); ok {
		a.singleBatch = boolArg(v)
	}
	if v, ok := r.arg("collation"); ok {
		if err := checkCollation(v); err != nil {
			return a, err
		}
	}
	return a, nil
}

// runFind evaluates a find over a consistent view (a long scan releases the store's lock and
// reads a point-in-time clone: storage.Engine.ReadYielding) and returns the result documents
// encoded.
func (s *Server) runFind(db, coll string, a findArgs) ([]bson.Raw, error) {
	var docs []matched
	stopAt := 0
	if a.limit > 0 {
		stopAt = int(min(a.skip+a.limit, math.MaxInt32))
	}
	var err error
	sorted := false
	s.engine.ReadYielding(func(rd *storage.Reader) {
		if path, desc, ok := a.sort.Single(); ok {
			// An index that yields the documents in sort order: read only what is returned.
			sorted = rd.FindInOrder(db, coll, a.q, path, desc, matchInto(&docs, &err, a.filter, stopAt))
		}
		if !sorted {
			limit := stopAt
			if a.sort != nil {
				limit = 0
			}
			docs, err = findMatching(rd, db, coll, a.q, a.filter, limit)
		}
	})
	if err != nil {
		return nil, err
	}
	if a.sort != nil && !sorted {
		sortMatched(docs, a.sort)
	}
	if a.skip > 0 {
		if a.skip >= int64(len(docs)) {
			docs = nil
		} else {
			docs = docs[a.skip:]
		}
	}
	if a.limit > 0 && int64(len(docs)) > a.limit {
		docs = docs[:a.limit]
	}
	out := make([]bson.Raw, len(docs))
	for i, d := range docs {
		raw, err := a.proj.ApplyRaw(d.doc.Raw)
		if err != nil {
			return nil, mongoerr.New(mongoerr.InternalError, "encode projection: %v", err)
		}
		out[i] = raw
	}
	return out, nil
}

func cmdFind(_ context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	a, err := s.parseFind(r)
	if err != nil {
		return result{}, err
	}
	docs, err := s.runFind(r.db, coll, a)
	if err != nil {
		return result{}, err
	}
	return result{fields: s.firstBatch(r.db+"."+coll, docs, a.batchSize, a.singleBatch)}, nil
}
