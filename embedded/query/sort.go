package query

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// Sort is a compiled sort specification. It is immutable and safe for concurrent use.
type Sort struct {
	keys []sortKey
}

type sortKey struct {
	parts []string
	desc  bool
}

// CompileSort compiles a sort specification {f: 1|-1, ...} with dotted paths. {$meta: ...}
// is NotImplemented; other values fail with mongod's codes 15974/15975.
func CompileSort(sort bson.D) (*Sort, error) {
	s := &Sort{keys: make([]sortKey, 0, len(sort))}
	for _, e := range sort {
		if e.Key == "" {
			return nil, mongoerr.New(mongoerr.Location40352, "FieldPath cannot be constructed with empty string")
		}
		parts := splitPath(e.Key)
		for _, p := range parts {
			if p == "" {
				return nil, mongoerr.New(15998, "FieldPath field names may not be empty strings.")
			}
			if strings.HasPrefix(p, "$") {
				return nil, mongoerr.New(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
			}
		}
		if d, ok := e.Value.(bson.D); ok && len(d) > 0 && d[0].Key == "$meta" {
			return nil, mongoerr.NotImplementedf("sort by $meta")
		}
		if !bsonval.IsNumber(e.Value) {
			return nil, mongoerr.New(15974, "Illegal key in $sort specification: %s: %s", e.Key, formatValue(e.Value))
		}
		f, _ := bsonval.ToFloat(e.Value)
		if f != 1 && f != -1 {
			return nil, mongoerr.New(15975, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		}
		s.keys = append(s.keys, sortKey{parts: parts, desc: f == -1})
	}
	return s, nil
}

// Single returns the field path and direction of a sort on one field (ok false for a sort
// on several fields, or none: s is nil).
func (s *Sort) Single() (path string, desc, ok bool) {
	if s == nil || len(s.keys) != 1 {
		return "", false, false
	}
	return strings.Join(s.keys[0].parts, "."), s.keys[0].desc, true
}

// TopFields returns the top-level fields of a document that the sort reads (the first
// component of each sort path): the sort key of a document with only those fields is the
// sort key of the whole document.
func (s *Sort) TopFields() []string {
	var fields []string
	for _, k := range s.keys {
		if !slices.Contains(fields, k.parts[0]) {
			fields = append(fields, k.parts[0])
		}
	}
	return fields
}

// Compare orders a before b (<0), after (>0) or as equal (0) under MongoDB sort semantics:
// a missing field sorts as null, an empty array before null, and an array by its smallest
// element ascending or its largest descending.
func (s *Sort) Compare(a, b bson.D) int {
	for i := range s.keys {
		k := &s.keys[i]
		c := compareSortValues(k.value(a), k.value(b))
		if k.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// Key returns the sort key values of doc (one per sort field), for callers that sort many
// documents and want to extract keys once; compare them with CompareKeys.
func (s *Sort) Key(doc bson.D) []any {
	out := make([]any, len(s.keys))
	for i := range s.keys {
		out[i] = s.keys[i].value(doc)
	}
	return out
}

// CompareKeys compares two results of Key as Compare compares their documents.
func (s *Sort) CompareKeys(a, b []any) int {
	for i := range s.keys {
		c := compareSortValues(a[i], b[i])
		if s.keys[i].desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// keyPicker collects the extreme value reached by a sort path.
type keyPicker struct {
	best any
	has  bool
	desc bool
}

func (k *keyPicker) test(v any, missing bool) bool {
	if missing {
		v = nil
	}
	if !k.has {
		k.best, k.has = v, true
		return false
	}
	c := compareSortValues(v, k.best)
	if (k.desc && c > 0) || (!k.desc && c < 0) {
		k.best = v
	}
	return false
}

func (k *sortKey) value(d bson.D) any {
	if len(k.parts) == 1 {
		v, ok := getField(d, k.parts[0])
		if !ok {
			return nil
		}
		if _, isArr := v.(bson.A); !isArr {
			return v
		}
	}
	p := keyPicker{desc: k.desc}
	walkDoc(d, k.parts, modeSortKey, &p)
	return p.best
}

func compareSortValues(a, b any) int {
	_, ea := a.(emptyArrayKey)
	_, eb := b.(emptyArrayKey)
	switch {
	case ea && eb:
		return 0
	case ea:
		if _, min := b.(bson.MinKey); min {
			return 1
		}
		return -1
	case eb:
		if _, min := a.(bson.MinKey); min {
			return -1
		}
		return 1
	}
	return bsonval.Compare(a, b)
}
