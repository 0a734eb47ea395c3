package embedded

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/query"
	"github.com/gameops/rollup/embedded/storage"
)

// resolveHint checks a hint (an index name, or a key pattern) against the indexes of db.coll
// and returns the hinted index; nil with no hint, an empty hint, or a collection that does not
// exist (mongod answers such a query with nothing, whatever the hint). A hint naming no index
// is refused as mongod refuses it. {$natural: ±1} asks for a collection scan in insertion
// order, which the server does not keep: natural reports it, and the caller decides.
func (s *Server) resolveHint(db, coll string, v any) (ix *storage.IndexSpec, natural bool, err error) {
	var name string
	var pattern bson.D
	switch h := v.(type) {
	case nil:
		return nil, false, nil
	case string:
		if h == "" {
			return nil, false, nil
		}
		name = h
	case bson.D:
		if len(h) == 0 {
			return nil, false, nil
		}
		if h[0].Key == "$natural" {
			return nil, true, nil
		}
		pattern = h
	default:
		return nil, false, mongoerr.FailedToParsef("hint must be either a string or nested object")
	}
	var info storage.CollectionInfo
	var ok bool
	s.engine.Read(func(rd *storage.Reader) { info, ok = rd.Collection(db, coll) })
	if !ok {
		return nil, false, nil
	}
	for i := range info.Indexes {
		spec := &info.Indexes[i]
		if (name != "" && spec.Name == name) || (pattern != nil && sameKeyPattern(spec.Key, pattern)) {
			return spec, false, nil
		}
	}
	return nil, false, mongoerr.BadValuef("hint provided does not correspond to an existing index")
}

// sameKeyPattern compares key patterns as mongod matches a hint: same fields, same order,
// numerically equal directions.
func sameKeyPattern(a, b bson.D) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || bsonval.Compare(a[i].Value, b[i].Value) != 0 {
			return false
		}
	}
	return true
}

// sortArg compiles the sort option of cmd: a document (nil when empty or absent), refusing
// other types as mongod's command parser does and $natural, which the server does not keep.
func sortArg(cmd string, v any) (*query.Sort, error) {
	if v == nil {
		return nil, nil
	}
	d, ok := v.(bson.D)
	if !ok {
		return nil, mongoerr.TypeMismatchf("BSON field '%s.sort' is the wrong type '%s', expected type 'object'", cmd, typeName(v))
	}
	for _, e := range d {
		if e.Key == "$natural" {
			return nil, mongoerr.NotImplementedf("sort by $natural (insertion order) in '%s'", cmd)
		}
	}
	if len(d) == 0 {
		return nil, nil
	}
	return query.CompileSort(d)
}

// projectionArg compiles the projection option (field) of cmd, refusing a non-document.
func projectionArg(cmd, field string, v any) (*query.Projection, error) {
	if v == nil {
		return nil, nil
	}
	d, ok := v.(bson.D)
	if !ok {
		return nil, mongoerr.TypeMismatchf("BSON field '%s.%s' is the wrong type '%s', expected type 'object'", cmd, field, typeName(v))
	}
	if len(d) == 0 {
		return nil, nil
	}
	return query.CompileProjection(d)
}

// checkHint validates the hint option of a command whose result does not depend on the index
// used (count, distinct, aggregate, findAndModify): the hinted index must exist.
func (s *Server) checkHint(r *request) error {
	v, ok := r.arg("hint")
	if !ok {
		return nil
	}
	coll, _ := r.body[0].Value.(string)
	_, _, err := s.resolveHint(r.db, coll, v)
	return err
}

// checkStmtHint validates the hint of one update or delete statement (a write error at its
// index when it names no index, as in mongod).
func (s *Server) checkStmtHint(db, coll string, stmt bson.D) error {
	v, ok := bsonval.Get(stmt, "hint")
	if !ok {
		return nil
	}
	_, _, err := s.resolveHint(db, coll, v)
	return err
}
