package bsonval

import (
	"bytes"
	"cmp"
	"math"
	"math/big"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Canonical type classes in MongoDB's comparison order (canonicalizeBSONType). Values of
// different classes compare by class; numbers of all kinds form one class.
const (
	ClassMinKey    = 1
	ClassNull      = 5 // null and undefined; a missing field compares as null
	ClassNumber    = 10
	ClassString    = 15 // string and symbol
	ClassObject    = 20
	ClassArray     = 25
	ClassBinary    = 30
	ClassObjectID  = 35
	ClassBool      = 40
	ClassDate      = 45
	ClassTimestamp = 47
	ClassRegex     = 50
	ClassDBPointer = 55
	ClassCode      = 60
	ClassCodeScope = 65
	ClassMaxKey    = 100
)

// Class returns the canonical type class of a decoded value.
func Class(v any) int {
	switch v.(type) {
	case bson.MinKey:
		return ClassMinKey
	case nil, bson.Null, bson.Undefined:
		return ClassNull
	case float64, int32, int64, int, bson.Decimal128:
		return ClassNumber
	case string, bson.Symbol:
		return ClassString
	case bson.D, bson.Raw:
		return ClassObject
	case bson.A, []any:
		return ClassArray
	case bson.Binary:
		return ClassBinary
	case bson.ObjectID:
		return ClassObjectID
	case bool:
		return ClassBool
	case bson.DateTime:
		return ClassDate
	case bson.Timestamp:
		return ClassTimestamp
	case bson.Regex:
		return ClassRegex
	case bson.DBPointer:
		return ClassDBPointer
	case bson.JavaScript:
		return ClassCode
	case bson.CodeWithScope:
		return ClassCodeScope
	case bson.MaxKey:
		return ClassMaxKey
	}
	return ClassMaxKey
}

// IsNumber reports whether v is a numeric value.
func IsNumber(v any) bool { return Class(v) == ClassNumber }

// Compare orders two decoded values as MongoDB does with the simple collation: by type class
// first, then by value. Numbers compare exactly across int32, int64 and double; NaN sorts
// before every other number and equals itself. Documents compare element by element (type
// class, then field name, then value); arrays element by element.
func Compare(a, b any) int {
	ca, cb := Class(a), Class(b)
	if ca != cb {
		return cmp.Compare(ca, cb)
	}
	switch ca {
	case ClassMinKey, ClassNull, ClassMaxKey:
		return 0
	case ClassNumber:
		return compareNumbers(a, b)
	case ClassString:
		return strings.Compare(str(a), str(b))
	case ClassObject:
		return compareDocs(toD(a), toD(b))
	case ClassArray:
		return compareArrays(toA(a), toA(b))
	case ClassBinary:
		x, y := a.(bson.Binary), b.(bson.Binary)
		if len(x.Data) != len(y.Data) {
			return cmp.Compare(len(x.Data), len(y.Data))
		}
		if x.Subtype != y.Subtype {
			return cmp.Compare(x.Subtype, y.Subtype)
		}
		return bytes.Compare(x.Data, y.Data)
	case ClassObjectID:
		x, y := a.(bson.ObjectID), b.(bson.ObjectID)
		return bytes.Compare(x[:], y[:])
	case ClassBool:
		x, y := a.(bool), b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case ClassDate:
		return cmp.Compare(int64(a.(bson.DateTime)), int64(b.(bson.DateTime)))
	case ClassTimestamp:
		x, y := a.(bson.Timestamp), b.(bson.Timestamp)
		if x.T != y.T {
			return cmp.Compare(x.T, y.T)
		}
		return cmp.Compare(x.I, y.I)
	case ClassRegex:
		x, y := a.(bson.Regex), b.(bson.Regex)
		if c := strings.Compare(x.Pattern, y.Pattern); c != 0 {
			return c
		}
		return strings.Compare(x.Options, y.Options)
	case ClassDBPointer:
		x, y := a.(bson.DBPointer), b.(bson.DBPointer)
		if c := strings.Compare(x.DB, y.DB); c != 0 {
			return c
		}
		return bytes.Compare(x.Pointer[:], y.Pointer[:])
	case ClassCode:
		return strings.Compare(string(a.(bson.JavaScript)), string(b.(bson.JavaScript)))
	case ClassCodeScope:
		x, y := a.(bson.CodeWithScope), b.(bson.CodeWithScope)
		if c := strings.Compare(string(x.Code), string(y.Code)); c != 0 {
			return c
		}
		return Compare(x.Scope, y.Scope)
	}
	return 0
}

// Equal reports Compare(a, b) == 0.
func Equal(a, b any) bool { return Compare(a, b) == 0 }

func str(v any) string {
	if s, ok := v.(bson.Symbol); ok {
		return string(s)
	}
	return v.(string)
}

func toD(v any) bson.D {
	switch x := v.(type) {
	case bson.D:
		return x
	case bson.Raw:
		d, err := Decode(x)
		if err != nil {
			return nil
		}
		return d
	}
	return nil
}

func toA(v any) bson.A {
	if x, ok := v.([]any); ok {
		return bson.A(x)
	}
	return v.(bson.A)
}

func compareDocs(x, y bson.D) int {
	for i := 0; i < len(x) && i < len(y); i++ {
		if c := cmp.Compare(Class(x[i].Value), Class(y[i].Value)); c != 0 {
			return c
		}
		if c := strings.Compare(x[i].Key, y[i].Key); c != 0 {
			return c
		}
		if c := Compare(x[i].Value, y[i].Value); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(x), len(y))
}

func compareArrays(x, y bson.A) int {
	for i := 0; i < len(x) && i < len(y); i++ {
		if c := Compare(x[i], y[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(x), len(y))
}

// number is an exact representation of a BSON number: either an int64 or a float64.
type number struct {
	isInt bool
	i     int64
	f     float64
}

func toNumber(v any) number {
	switch x := v.(type) {
	case int32:
		return number{isInt: true, i: int64(x)}
	case int64:
		return number{isInt: true, i: x}
	case int:
		return number{isInt: true, i: int64(x)}
	case float64:
		return number{f: x}
	case bson.Decimal128:
		return number{f: decimalToFloat(x)}
	}
	return number{}
}

func decimalToFloat(d bson.Decimal128) float64 {
	s := d.String()
	switch s {
	case "NaN", "-NaN":
		return math.NaN()
	case "Infinity":
		return math.Inf(1)
	case "-Infinity":
		return math.Inf(-1)
	}
	f, _, err := big.ParseFloat(s, 10, 200, big.ToNearestEven)
	if err != nil {
		return math.NaN()
	}
	r, _ := f.Float64()
	return r
}

// ToFloat returns a numeric value as float64 (ok false for non-numbers).
func ToFloat(v any) (float64, bool) {
	if !IsNumber(v) {
		return 0, false
	}
	n := toNumber(v)
	if n.isInt {
		return float64(n.i), true
	}
	return n.f, true
}

// Truthy reports whether v counts as true where MongoDB wants a boolean
// (BSONElement::trueValue, Value::coerceToBool): null, undefined, false and numeric zero are
// false, every other value is true.
func Truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case nil, bson.Null, bson.Undefined:
		return false
	case int32:
		return x != 0
	case int64:
		return x != 0
	case int:
		return x != 0
	case float64:
		return x != 0
	case bson.Decimal128:
		f, _ := ToFloat(x)
		return f != 0
	}
	return true
}

func compareNumbers(a, b any) int {
	x, y := toNumber(a), toNumber(b)
	switch {
	case x.isInt && y.isInt:
		return cmp.Compare(x.i, y.i)
	case !x.isInt && !y.isInt:
		return cmp.Compare(x.f, y.f) // NaN first and equal to itself, as MongoDB orders it
	case x.isInt:
		return -compareFloatInt(y.f, x.i)
	default:
		return compareFloatInt(x.f, y.i)
	}
}

// compareFloatInt compares a double with an int64 exactly.
func compareFloatInt(f float64, i int64) int {
	if math.IsNaN(f) {
		return -1
	}
	const two63 = 9223372036854775808.0
	if f >= two63 {
		return 1
	}
	if f < -two63 {
		return -1
	}
	// f is within int64 range: compare integer parts, then the fraction.
	t := math.Trunc(f)
	ti := int64(t)
	if ti != i {
		return cmp.Compare(ti, i)
	}
	frac := f - t
	switch {
	case frac > 0:
		return 1
	case frac < 0:
		return -1
	}
	return 0
}
