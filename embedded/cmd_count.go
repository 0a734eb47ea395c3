package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

func cmdCount(_ context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	env, err := s.exprEnv(r)
	if err != nil {
		return result{}, err
	}
	var a findArgs
	if v, ok := r.arg("query"); ok && v != nil {
		a.q = asDoc(v)
	}
	if a.filter, err = env.CompileFilter(a.q); err != nil {
		return result{}, err
	}
	if a.skip, err = nonNegInt(r, "skip"); err != nil {
		return result{}, err
	}
	if v, ok := r.arg("limit"); ok {
		n, ok := toInt64(v)
		if !ok {
			return result{}, mongoerr.TypeMismatchf("count.limit must be a number")
		}
		if n < 0 {
			n = -n
		}
		a.limit = n
	}
	if v, ok := r.arg("collation"); ok {
		if err := checkCollation(v); err != nil {
			return result{}, err
		}
	}
	if err := s.checkHint(r); err != nil {
		return result{}, err
	}
	var n int64
	if len(a.q) == 0 && a.skip == 0 && a.limit == 0 {
		s.engine.Read(func(rd *storage.Reader) { n = int64(rd.Count(r.db, coll)) })
	} else {
		docs, err := s.runFind(r.db, coll, a)
		if err != nil {
			return result{}, err
		}
		n = int64(len(docs))
	}
	return result{fields: bson.D{{Key: "n", Value: intValue(n)}}}, nil
}
