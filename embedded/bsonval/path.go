package bsonval

import (
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Get returns the value of the top-level field key of d.
func Get(d bson.D, key string) (any, bool) {
	for _, e := range d {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

// Lookup follows a dotted path through embedded documents and, for numeric components, array
// positions ("a.0.b"). It does not fan out over arrays: query matching does that.
func Lookup(d bson.D, path string) (any, bool) {
	var cur any = d
	for path != "" {
		var part string
		part, path, _ = strings.Cut(path, ".")
		switch x := cur.(type) {
		case bson.D:
			v, ok := Get(x, part)
			if !ok {
				return nil, false
			}
			cur = v
		case bson.A:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			cur = x[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// Set sets the top-level field key of d to v, appending it when absent, and returns d.
func Set(d bson.D, key string, v any) bson.D {
	for i := range d {
		if d[i].Key == key {
			d[i].Value = v
			return d
		}
	}
	return append(d, bson.E{Key: key, Value: v})
}

// Clone returns a deep copy of a decoded value (documents and arrays are copied; scalars are
// immutable).
func Clone(v any) any {
	switch x := v.(type) {
	case bson.D:
		return CloneDoc(x)
	case bson.A:
		out := make(bson.A, len(x))
		for i, e := range x {
			out[i] = Clone(e)
		}
		return out
	case bson.Binary:
		return bson.Binary{Subtype: x.Subtype, Data: append([]byte(nil), x.Data...)}
	}
	return v
}

// CloneDoc returns a deep copy of d.
func CloneDoc(d bson.D) bson.D {
	if d == nil {
		return nil
	}
	out := make(bson.D, len(d))
	for i, e := range d {
		out[i] = bson.E{Key: e.Key, Value: Clone(e.Value)}
	}
	return out
}
