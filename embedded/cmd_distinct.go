package embedded

import (
	"context"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

func cmdDistinct(_ context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	keyV, _ := r.arg("key")
	key, ok := keyV.(string)
	if !ok {
		return result{}, mongoerr.TypeMismatchf("BSON field 'distinct.key' is the wrong type '%s', expected type 'string'", typeName(keyV))
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
	if v, ok := r.arg("collation"); ok {
		if err := checkCollation(v); err != nil {
			return result{}, err
		}
	}
	if err := s.checkHint(r); err != nil {
		return result{}, err
	}
	var docs []matched
	s.engine.ReadYielding(func(rd *storage.Reader) { docs, err = findMatching(rd, r.db, coll, a.q, a.filter, 0) })
	if err != nil {
		return result{}, err
	}
	var values []any
	for _, d := range docs {
		values = appendPathValues(values, d.full(), key)
	}
	sort.SliceStable(values, func(i, j int) bool { return bsonval.Compare(values[i], values[j]) < 0 })
	out := bson.A{}
	for i, v := range values {
		if i > 0 && bsonval.Compare(values[i-1], v) == 0 {
			continue
		}
		out = append(out, v)
	}
	return result{fields: bson.D{{Key: "values", Value: out}}}, nil
}

// appendPathValues collects the values at a dotted path for distinct: arrays along the path
// fan out, and an array at the end contributes its elements.
func appendPathValues(dst []any, v any, path string) []any {
	if path == "" {
		if arr, ok := v.(bson.A); ok {
			return append(dst, arr...)
		}
		return append(dst, v)
	}
	head, rest := path, ""
	for i := 0; i < len(path); i++ {
		if path[i] == '.' {
			head, rest = path[:i], path[i+1:]
			break
		}
	}
	switch x := v.(type) {
	case bson.D:
		if f, ok := bsonval.Get(x, head); ok {
			return appendPathValues(dst, f, rest)
		}
	case bson.A:
		for _, e := range x {
			if d, ok := e.(bson.D); ok {
				dst = appendPathValues(dst, d, path)
			}
		}
	}
	return dst
}
