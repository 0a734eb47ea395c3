package aggregate

import (
	"math"
	"strconv"
	"strings"

	"github.com/gameops/rollup/embedded/bsonval"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// missingValue is the result of evaluating a path that does not exist. It never appears in an
// output document: object expressions and projections omit such fields, array expressions turn
// it into null, and $group reports it as null.
type missingValue struct{}

func isMissing(v any) bool {
	_, ok := v.(missingValue)
	return ok
}

// nullish reports missing, null and undefined, the values MongoDB's Value::nullish accepts.
func nullish(v any) bool {
	switch v.(type) {
	case missingValue, nil, bson.Null, bson.Undefined:
		return true
	}
	return false
}

// missingToNull turns a missing value into null.
func missingToNull(v any) any {
	if isMissing(v) {
		return nil
	}
	return v
}

// typeName returns MongoDB's name for the BSON type of a value, as used in error messages;
// a missing value is "missing".
func typeName(v any) string {
	if isMissing(v) {
		return "missing"
	}
	return bsonval.TypeName(v)
}

// compareValues orders two expression values as MongoDB's ValueComparator does: like
// bsonval.Compare, except that missing and undefined sort together after MinKey and before
// null (canonicalizeBSONType gives them 0, null 5), so {$eq: ["$missing", null]} is false.
func compareValues(a, b any) int {
	ra, rb := cmpRank(a), cmpRank(b)
	if ra != rb {
		if ra < rb {
			return -1
		}
		return 1
	}
	if ra == 0 {
		return 0
	}
	return bsonval.Compare(a, b)
}

func cmpRank(v any) int {
	switch v.(type) {
	case bson.MinKey:
		return -1
	case missingValue, bson.Undefined:
		return 0
	}
	return bsonval.Class(v)
}

// truthy is MongoDB's Value::coerceToBool: bsonval.Truthy, and false for a missing value.
func truthy(v any) bool { return !isMissing(v) && bsonval.Truthy(v) }

// normalizeLiteral converts a literal from a pipeline specification into the decoded value
// types (Go int, []any and bson.Null as tests and callers may write them). bson.M has no field
// order and is kept as is; it is rejected where a document is required.
func normalizeLiteral(v any) any {
	switch x := v.(type) {
	case int:
		if x >= math.MinInt32 && x <= math.MaxInt32 {
			return int32(x)
		}
		return int64(x)
	case bson.Null:
		return nil
	case []any:
		return normalizeArray(bson.A(x))
	case bson.A:
		return normalizeArray(x)
	case bson.D:
		out := make(bson.D, len(x))
		for i, e := range x {
			out[i] = bson.E{Key: e.Key, Value: normalizeLiteral(e.Value)}
		}
		return out
	}
	return v
}

func normalizeArray(a bson.A) bson.A {
	out := make(bson.A, len(a))
	for i, e := range a {
		out[i] = normalizeLiteral(e)
	}
	return out
}

// renderValue formats a value roughly as mongod's BSONElement::toString does in error
// messages ("1.5", "\"x\"", "true", "{ a: 1 }").
func renderValue(v any) string {
	switch x := v.(type) {
	case missingValue:
		return "MISSING"
	case nil, bson.Null:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return renderDouble(x)
	case string:
		return strconv.Quote(x)
	case bson.A:
		if len(x) == 0 {
			return "[]"
		}
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = renderValue(e)
		}
		return "[ " + strings.Join(parts, ", ") + " ]"
	case bson.D:
		if len(x) == 0 {
			return "{}"
		}
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = e.Key + ": " + renderValue(e.Value)
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	return typeName(v)
}

func renderDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan.0"
	case math.IsInf(f, 1):
		return "inf.0"
	case math.IsInf(f, -1):
		return "-inf.0"
	case f == math.Trunc(f) && math.Abs(f) < 1e15:
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// approxSize estimates the memory a value holds, in bytes, close to its BSON size.
func approxSize(v any) int64 {
	switch x := v.(type) {
	case bson.D:
		n := int64(5)
		for _, e := range x {
			n += int64(len(e.Key)) + 2 + approxSize(e.Value)
		}
		return n
	case bson.A:
		n := int64(5)
		for _, e := range x {
			n += 3 + approxSize(e)
		}
		return n
	case string:
		return int64(len(x)) + 5
	case bson.Binary:
		return int64(len(x.Data)) + 5
	case bson.Symbol:
		return int64(len(x)) + 5
	case bson.JavaScript:
		return int64(len(x)) + 5
	case bson.Regex:
		return int64(len(x.Pattern)+len(x.Options)) + 2
	case bson.CodeWithScope:
		return int64(len(x.Code)) + 9 + approxSize(x.Scope)
	case bson.DBPointer:
		return int64(len(x.DB)) + 17
	case bson.ObjectID:
		return 12
	case bson.Decimal128:
		return 16
	case int32:
		return 4
	case nil, bson.Null, bson.Undefined, bson.MinKey, bson.MaxKey, missingValue, bool:
		return 1
	}
	return 8
}
