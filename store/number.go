package store

import (
	"fmt"
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Count reads a stored number the one way every reader of rollup's documents reads it: an
// int32, an int64, or a double whose value is a whole number within int64's range (mongosh
// and many scripts store `online: 7` as the double 7.0). Anything else is not a count: a
// fraction, NaN, an infinity, a double beyond int64, a decimal, a string. Ingest writes int64
// only; the watcher, replay, verify, the read API, the business metrics and the migrations all
// decode through this function, so they cannot disagree about a document.
func Count(v bson.RawValue) (int64, bool) {
	switch v.Type {
	case bson.TypeInt64:
		return v.Int64(), true
	case bson.TypeInt32:
		return int64(v.Int32()), true
	case bson.TypeDouble:
		f := v.Double()
		// -2^63 is exact as a double; 2^63 is the first double above math.MaxInt64.
		if f != math.Trunc(f) || f < math.MinInt64 || f >= -math.MinInt64 {
			return 0, false
		}
		return int64(f), true
	}
	return 0, false
}

// countField reads field key of a document of kind (see Count).
func countField(kind, key string, v bson.RawValue) (int64, error) {
	n, ok := Count(v)
	if !ok {
		return 0, &InvalidDocError{Doc: kind, Field: key, Reason: "has " + describe(v) + ", want a whole number (int, long, or a double without a fraction)"}
	}
	return n, nil
}

// describe names v's type as MongoDB's $type does, with the value of a number.
func describe(v bson.RawValue) string {
	switch v.Type {
	case bson.TypeDouble:
		return "type double (" + strconv.FormatFloat(v.Double(), 'g', -1, 64) + ")"
	case bson.TypeDecimal128:
		return "type decimal (" + v.Decimal128().String() + ")"
	}
	return "type " + typeName(v.Type)
}

// typeName is the $type alias of t, as MongoDB names it in messages.
func typeName(t bson.Type) string {
	switch t {
	case bson.TypeDouble:
		return "double"
	case bson.TypeString:
		return "string"
	case bson.TypeEmbeddedDocument:
		return "object"
	case bson.TypeArray:
		return "array"
	case bson.TypeBinary:
		return "binData"
	case bson.TypeObjectID:
		return "objectId"
	case bson.TypeBoolean:
		return "bool"
	case bson.TypeDateTime:
		return "date"
	case bson.TypeNull:
		return "null"
	case bson.TypeInt32:
		return "int"
	case bson.TypeTimestamp:
		return "timestamp"
	case bson.TypeInt64:
		return "long"
	case bson.TypeDecimal128:
		return "decimal"
	default:
		return fmt.Sprintf("BSON type 0x%02x", byte(t))
	}
}

// InvalidDocError says why a stored document is not a valid leaf or parent document. Readers
// skip such a document (and count it); verify lists it as an invalid document with this
// message, which names the field to fix.
type InvalidDocError struct {
	// Doc is "leaf" or "parent".
	Doc string
	// Field is the dotted path of the offending field ("" for the document itself).
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *InvalidDocError) Error() string {
	if e.Field == "" {
		return "invalid " + e.Doc + " document: " + e.Reason
	}
	return "invalid " + e.Doc + " document: " + e.Field + ": " + e.Reason
}
