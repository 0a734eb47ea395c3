package embedded

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/query"
)

// asDoc returns v as a document, or an empty one.
func asDoc(v any) bson.D {
	d, _ := v.(bson.D)
	return d
}

// listArgs reads the options listDatabases and listCollections share: filter, a query over
// the entries they list (nil when absent or null), and nameOnly.
func listArgs(r *request) (filter *query.Filter, nameOnly bool, err error) {
	if f, ok := r.arg("filter"); ok && f != nil {
		if filter, err = query.CompileFilter(asDoc(f)); err != nil {
			return nil, false, err
		}
	}
	if v, ok := r.arg("nameOnly"); ok {
		nameOnly = boolArg(v)
	}
	return filter, nameOnly, nil
}

func nonNegInt(r *request, key string) (int64, error) {
	v, ok := r.arg(key)
	if !ok || v == nil {
		return 0, nil
	}
	n, ok := toInt64(v)
	if !ok {
		return 0, mongoerr.TypeMismatchf("BSON field '%s.%s' is the wrong type '%s', expected types '[long, int, decimal, double]'", r.name, key, typeName(v))
	}
	if n < 0 {
		return 0, mongoerr.BadValuef("BSON field '%s' value must be >= 0, actual value '%d'", key, n)
	}
	return n, nil
}

// intValue returns n as int32 when it fits, as mongod replies do.
func intValue(n int64) any {
	if n >= -1<<31 && n < 1<<31 {
		return int32(n)
	}
	return n
}

// checkCollation accepts only the simple collation; anything else is outside the subset.
func checkCollation(v any) error {
	d, ok := v.(bson.D)
	if !ok {
		return mongoerr.TypeMismatchf("collation must be an object")
	}
	if len(d) == 0 {
		return nil
	}
	if len(d) == 1 && d[0].Key == "locale" && d[0].Value == "simple" {
		return nil
	}
	return mongoerr.NotImplementedf("collations other than {locale: \"simple\"}")
}
