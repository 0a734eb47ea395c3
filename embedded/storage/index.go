package storage

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/google/btree"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

const (
	btreeDegree = 32
	// undefinedKey is the key component of undefined and of an empty array (as in MongoDB,
	// where [] is indexed as undefined); it sorts between MinKey and null.
	undefinedKey = 3
	// maxPoints bounds the number of point lookups one Find plans ($in cross products): about
	// 4 MiB of keys. Past it an index keeps only the fields whose product fits, so the bound
	// must stay above what rollup asks of the unique index (5,000 parent ids × 3 types of a
	// summaries chunk): at 4,096 those reads fell back to every document of the project's hour,
	// a million leaves a tick at 1M leaves.
	maxPoints = 1 << 17
)

// entry is one index entry. For a unique index key is the field key; otherwise the field key
// followed by the document's _id key, so that entries are distinct.
type entry struct {
	key []byte
	doc *Doc
}

func entryLess(a, b entry) bool { return bytes.Compare(a.key, b.key) < 0 }

// index is one index of a collection.
type index struct {
	spec   IndexSpec
	paths  [][]string // split key paths
	isID   bool       // the _id_ index: key = _id key, always unique
	simple bool       // every key path is a top-level field
	// multikey is set once any document produced several keys or an array key; it is never
	// cleared (conservative for range planning). Atomic: a plan may be made outside the
	// engine's lock (IndexSet.Point).
	multikey atomic.Bool
	tree     *btree.BTreeG[entry]
}

func newIndex(spec IndexSpec) *index {
	ix := &index{spec: spec, tree: btree.NewG[entry](btreeDegree, entryLess)}
	for _, e := range spec.Key {
		ix.paths = append(ix.paths, strings.Split(e.Key, "."))
	}
	ix.isID = spec.Name == idIndexName
	ix.simple = true
	for _, p := range ix.paths {
		ix.simple = ix.simple && len(p) == 1
	}
	return ix
}

const idIndexName = "_id_"

func idIndexSpec() IndexSpec {
	return IndexSpec{Name: idIndexName, Key: bson.D{{Key: "_id", Value: int32(1)}}, Unique: true}
}

// validateIndexSpec checks a user index specification as createIndexes does.
func validateIndexSpec(spec *IndexSpec) error {
	if len(spec.Key) == 0 {
		return mongoerr.New(mongoerr.CannotCreateIndex, "Index keys cannot be empty.")
	}
	seen := map[string]bool{}
	for _, e := range spec.Key {
		if e.Key == "" {
			return mongoerr.New(mongoerr.CannotCreateIndex, "Index keys cannot be an empty field.")
		}
		for _, part := range strings.Split(e.Key, ".") {
			if part == "" {
				return mongoerr.New(mongoerr.CannotCreateIndex, "Index keys cannot contain an empty field.")
			}
			if part[0] == '$' {
				return mongoerr.New(mongoerr.CannotCreateIndex,
					"Index key contains an illegal field name: field name starts with '$'.")
			}
			if _, err := strconv.Atoi(part); err == nil {
				return mongoerr.NotImplementedf("index key paths with numeric components (%q)", e.Key)
			}
		}
		if seen[e.Key] {
			return mongoerr.New(mongoerr.CannotCreateIndex,
				"Error in specification %s :: caused by :: duplicate field name in index key: %s",
				bsonval.Format(spec.Key), e.Key)
		}
		seen[e.Key] = true
		switch v := e.Value.(type) {
		case int32, int64, float64, int:
			f, _ := bsonval.ToFloat(v)
			if f == 0 || math.IsNaN(f) {
				return mongoerr.New(mongoerr.CannotCreateIndex, "Values in the index key pattern can't be 0.")
			}
		case string:
			return mongoerr.NotImplementedf("index type %q", v)
		default:
			return mongoerr.New(mongoerr.CannotCreateIndex,
				"Values in v:2 index key pattern cannot be of type %s. Only numbers > 0, numbers < 0, and strings are allowed.",
				typeName(v))
		}
	}
	if spec.Name == "" {
		spec.Name = DefaultIndexName(spec.Key)
	}
	if spec.Name == idIndexName && (len(spec.Key) != 1 || spec.Key[0].Key != "_id") {
		return mongoerr.New(mongoerr.BadValue, "The index name '_id_' is reserved for the _id index, which must have key pattern {_id: 1}")
	}
	if spec.TTL {
		if len(spec.Key) != 1 {
			return mongoerr.New(mongoerr.CannotCreateIndex, "TTL indexes are single-field indexes, compound indexes do not support TTL. Index spec: %s", specString(*spec))
		}
		if spec.Key[0].Key == "_id" {
			return mongoerr.New(197, "The field 'expireAfterSeconds' is not valid for an _id index specification. Specification: %s", specString(*spec))
		}
		if err := ValidateExpireAfterSeconds(spec.ExpireAfterSeconds); err != nil {
			return err
		}
	}
	return nil
}

// MaxExpireAfterSeconds bounds a TTL index's expireAfterSeconds: MongoDB refuses values
// beyond the time since the epoch; this is that bound for dates up to 2106, and it fits the
// int32 that listIndexes reports.
const MaxExpireAfterSeconds = 1<<31 - 1

// ValidateExpireAfterSeconds checks a TTL index's expireAfterSeconds as MongoDB does.
func ValidateExpireAfterSeconds(secs int64) error {
	if secs < 0 {
		return mongoerr.New(mongoerr.InvalidOptions, "TTL index 'expireAfterSeconds' option cannot be less than 0")
	}
	if secs > MaxExpireAfterSeconds {
		return mongoerr.New(mongoerr.InvalidOptions, "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number")
	}
	return nil
}

func typeName(v any) string {
	switch v.(type) {
	case bson.D:
		return "object"
	case bson.A:
		return "array"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// DefaultIndexName returns the name MongoDB generates for a key pattern: "a_1_b_-1".
func DefaultIndexName(key bson.D) string {
	var sb strings.Builder
	for i, e := range key {
		if i > 0 {
			sb.WriteByte('_')
		}
		sb.WriteString(e.Key)
		sb.WriteByte('_')
		switch v := e.Value.(type) {
		case float64:
			if v == math.Trunc(v) && math.Abs(v) < 1e15 {
				sb.WriteString(strconv.FormatInt(int64(v), 10))
			} else {
				sb.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
			}
		case string:
			sb.WriteString(v)
		default:
			sb.WriteString(bsonval.Format(v))
		}
	}
	return sb.String()
}

// sameKeyPattern reports whether two key patterns are equal (field names, order, values).
func sameKeyPattern(a, b bson.D) bool {
	return bsonval.Compare(a, b) == 0
}

// indexKeys returns the distinct field keys (without the _id suffix) a document produces
// for ix, and whether it produced them from an array (multikey). dec is d decoded (nil: read
// from d's encoding, decoding only what the index needs).
func (ix *index) indexKeys(d *Doc, dec bson.D) (keys [][]byte, multi bool, err error) {
	if ix.isID {
		return [][]byte{d.idKey}, false, nil
	}
	if ix.simple {
		// Fast path: top-level fields without arrays give exactly one key.
		var k []byte
		if dec == nil {
			k = ix.simpleKeyRaw(d.Raw)
		} else {
			k = ix.simpleKey(dec)
		}
		if k != nil {
			return [][]byte{k}, false, nil
		}
	}
	if dec == nil {
		dec = d.D()
	}
	if len(ix.paths) == 1 {
		vals, arr := collectPath(dec, ix.paths[0])
		if len(vals) == 1 {
			return [][]byte{appendKeyComponent(nil, vals[0])}, arr, nil
		}
		keys = make([][]byte, 0, len(vals))
		for _, v := range vals {
			keys = append(keys, appendKeyComponent(nil, v))
		}
		return dedupeKeys(keys), true, nil
	}
	// Compound: at most one field may come from an array; keys are the product.
	var perBuf [8][]any
	per := perBuf[:0]
	arrField := -1
	for i, p := range ix.paths {
		vals, arr := collectPath(dec, p)
		per = append(per, vals)
		if arr {
			if arrField >= 0 {
				return nil, false, mongoerr.New(CannotIndexParallelArrays,
					"cannot index parallel arrays [%s] [%s]", ix.spec.Key[i].Key, ix.spec.Key[arrField].Key)
			}
			arrField = i
		}
	}
	if arrField < 0 {
		var k []byte
		for _, vals := range per {
			k = appendKeyComponent(k, vals[0])
		}
		return [][]byte{k}, false, nil
	}
	keys = make([][]byte, 0, len(per[arrField]))
	for _, av := range per[arrField] {
		var k []byte
		for i, vals := range per {
			if i == arrField {
				k = appendKeyComponent(k, av)
				continue
			}
			k = appendKeyComponent(k, vals[0])
		}
		keys = append(keys, k)
	}
	return dedupeKeys(keys), true, nil
}

// simpleKey is the key of a simple index (top-level fields) for dec; nil when a field holds
// an array (the general path handles it).
func (ix *index) simpleKey(dec bson.D) []byte {
	k := make([]byte, 0, 64)
	for _, p := range ix.paths {
		v, _ := bsonval.Get(dec, p[0])
		if _, isArr := v.(bson.A); isArr {
			return nil
		}
		k = appendKeyComponent(k, v)
	}
	return k
}

// simpleKeyRaw is simpleKey read from a document's encoding: only the indexed fields are
// decoded (a parent document of rollup embeds hundreds of children none of its indexes read).
func (ix *index) simpleKeyRaw(raw bson.Raw) []byte {
	k := make([]byte, 0, 64)
	for _, p := range ix.paths {
		var v any
		if rv, err := bsoncore.Document(raw).LookupErr(p[0]); err == nil {
			if rv.Type == bsoncore.TypeArray {
				return nil
			}
			if v, err = bsonval.DecodeValue(rv); err != nil {
				return nil
			}
		}
		k = appendKeyComponent(k, v)
	}
	return k
}

// keyValues returns the field values of d (decoded: dec) that produce field key k in ix (for
// DupKeyError).
func (ix *index) keyValues(dec bson.D, k []byte) bson.D {
	out := make(bson.D, len(ix.spec.Key))
	per := make([][]any, len(ix.paths))
	for i, p := range ix.paths {
		per[i], _ = collectPath(dec, p)
		out[i] = bson.E{Key: ix.spec.Key[i].Key, Value: per[i][0]}
	}
	// Find the combination whose key is k (at most one field has several values).
	for i := range per {
		if len(per[i]) < 2 {
			continue
		}
		for _, v := range per[i] {
			out[i].Value = v
			var kk []byte
			for _, e := range out {
				kk = appendKeyComponent(kk, e.Value)
			}
			if bytes.Equal(kk, k) {
				return out
			}
		}
	}
	return out
}

func dedupeKeys(keys [][]byte) [][]byte {
	if len(keys) < 2 {
		return keys
	}
	slices.SortFunc(keys, bytes.Compare)
	return slices.CompactFunc(keys, bytes.Equal)
}

// appendKeyComponent appends the index key encoding of one field value.
func appendKeyComponent(dst []byte, v any) []byte {
	if _, ok := v.(bson.Undefined); ok {
		return append(dst, undefinedKey)
	}
	return bsonval.AppendKey(dst, v)
}

// collectPath returns the index values of a (dotted) path in d, as MongoDB's key generator:
// arrays along the path fan out over their document elements, an array at the end yields its
// elements (an empty array yields undefined), and a missing value yields null. arr reports
// whether an array was traversed.
func collectPath(d bson.D, path []string) (vals []any, arr bool) {
	if len(path) == 1 {
		v, ok := bsonval.Get(d, path[0])
		if !ok {
			return []any{nil}, false
		}
		if a, ok := v.(bson.A); ok {
			if len(a) == 0 {
				return []any{bson.Undefined{}}, true
			}
			return a, true
		}
		return []any{v}, false
	}
	vals = collect(d, path, nil, &arr)
	if len(vals) == 0 {
		vals = append(vals, nil)
	}
	return vals, arr
}

func collect(v any, path []string, out []any, arr *bool) []any {
	if len(path) == 0 {
		if a, ok := v.(bson.A); ok {
			*arr = true
			if len(a) == 0 {
				return append(out, bson.Undefined{})
			}
			return append(out, a...)
		}
		return append(out, v)
	}
	switch x := v.(type) {
	case bson.D:
		fv, ok := bsonval.Get(x, path[0])
		if !ok {
			return out
		}
		return collect(fv, path[1:], out, arr)
	case bson.A:
		*arr = true
		for _, el := range x {
			if ed, ok := el.(bson.D); ok {
				n := len(out)
				out = collect(ed, path, out, arr)
				if len(out) == n {
					out = append(out, nil)
				}
			}
		}
	}
	return out
}

// entryKey returns the btree key of a document's field key k.
func (ix *index) entryKey(k []byte, d *Doc) []byte {
	if ix.spec.Unique {
		return k
	}
	out := make([]byte, 0, len(k)+len(d.idKey))
	out = append(out, k...)
	return append(out, d.idKey...)
}

// conflict returns the document other than self (by _id) holding field key k in a unique
// index, or nil.
func (ix *index) conflict(k []byte, self *Doc) *Doc {
	if !ix.spec.Unique {
		return nil
	}
	e, ok := ix.tree.Get(entry{key: k})
	if !ok || bytes.Equal(e.doc.idKey, self.idKey) {
		return nil
	}
	return e.doc
}

func (ix *index) add(keys [][]byte, multi bool, d *Doc) {
	if multi && !ix.multikey.Load() {
		ix.multikey.Store(true)
	}
	for _, k := range keys {
		ix.tree.ReplaceOrInsert(entry{key: ix.entryKey(k, d), doc: d})
	}
}

func (ix *index) remove(keys [][]byte, d *Doc) {
	for _, k := range keys {
		ix.tree.Delete(entry{key: ix.entryKey(k, d)})
	}
}

func keysEqual(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, bytes.Equal)
}
