package bsonval

import (
	"errors"
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// ErrMalformed reports BSON bytes that cannot be decoded.
var ErrMalformed = errors.New("malformed BSON")

// Decode decodes a BSON document into a bson.D whose values have the types listed in the
// package comment. It is several times faster than bson.Unmarshal.
func Decode(raw []byte) (bson.D, error) {
	if err := bsoncore.Document(raw).Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return decodeDoc(raw), nil
}

func decodeDoc(raw []byte) bson.D {
	elems, _ := bsoncore.Document(raw).Elements()
	d := make(bson.D, 0, len(elems))
	for _, e := range elems {
		d = append(d, bson.E{Key: e.Key(), Value: decodeValue(e.Value())})
	}
	return d
}

func decodeArray(raw []byte) bson.A {
	vals, _ := bsoncore.Array(raw).Values()
	a := make(bson.A, 0, len(vals))
	for _, v := range vals {
		a = append(a, decodeValue(v))
	}
	return a
}

// DecodeValue decodes one raw value.
func DecodeValue(v bsoncore.Value) any { return decodeValue(v) }

func decodeValue(v bsoncore.Value) any {
	switch v.Type {
	case bsoncore.TypeDouble:
		return v.Double()
	case bsoncore.TypeString:
		return v.StringValue()
	case bsoncore.TypeEmbeddedDocument:
		return decodeDoc(v.Document())
	case bsoncore.TypeArray:
		return decodeArray(v.Array())
	case bsoncore.TypeBinary:
		st, data := v.Binary()
		return bson.Binary{Subtype: st, Data: append([]byte(nil), data...)}
	case bsoncore.TypeUndefined:
		return bson.Undefined{}
	case bsoncore.TypeObjectID:
		return bson.ObjectID(v.ObjectID())
	case bsoncore.TypeBoolean:
		return v.Boolean()
	case bsoncore.TypeDateTime:
		return bson.DateTime(v.DateTime())
	case bsoncore.TypeNull:
		return nil
	case bsoncore.TypeRegex:
		p, o := v.Regex()
		return bson.Regex{Pattern: p, Options: o}
	case bsoncore.TypeDBPointer:
		ns, oid := v.DBPointer()
		return bson.DBPointer{DB: ns, Pointer: bson.ObjectID(oid)}
	case bsoncore.TypeJavaScript:
		return bson.JavaScript(v.JavaScript())
	case bsoncore.TypeSymbol:
		return bson.Symbol(v.Symbol())
	case bsoncore.TypeCodeWithScope:
		code, scope := v.CodeWithScope()
		return bson.CodeWithScope{Code: bson.JavaScript(code), Scope: decodeDoc(scope)}
	case bsoncore.TypeInt32:
		return v.Int32()
	case bsoncore.TypeTimestamp:
		t, i := v.Timestamp()
		return bson.Timestamp{T: t, I: i}
	case bsoncore.TypeInt64:
		return v.Int64()
	case bsoncore.TypeDecimal128:
		h, l := v.Decimal128()
		return bson.NewDecimal128(h, l)
	case bsoncore.TypeMinKey:
		return bson.MinKey{}
	case bsoncore.TypeMaxKey:
		return bson.MaxKey{}
	}
	return nil
}

// Encode encodes d as a BSON document. Values may be any of the decoded types, Go int, or
// anything bson.Marshal accepts (encoded through the driver's reflection path).
func Encode(d bson.D) ([]byte, error) { return AppendDocument(nil, d) }

// AppendDocument appends d's BSON encoding to dst.
func AppendDocument(dst []byte, d bson.D) ([]byte, error) {
	idx, dst := bsoncore.ReserveLength(dst)
	var err error
	for _, e := range d {
		if dst, err = AppendElement(dst, e.Key, e.Value); err != nil {
			return nil, err
		}
	}
	dst = append(dst, 0)
	return bsoncore.UpdateLength(dst, idx, int32(len(dst)-int(idx))), nil
}

func appendArray(dst []byte, a bson.A) ([]byte, error) {
	idx, dst := bsoncore.ReserveLength(dst)
	var err error
	var buf [20]byte
	for i, v := range a {
		key := appendUint(buf[:0], uint64(i))
		if dst, err = AppendElement(dst, string(key), v); err != nil {
			return nil, err
		}
	}
	dst = append(dst, 0)
	return bsoncore.UpdateLength(dst, idx, int32(len(dst)-int(idx))), nil
}

func appendUint(b []byte, n uint64) []byte {
	if n == 0 {
		return append(b, '0')
	}
	var tmp [20]byte
	i := len(tmp)
	for n > 0 {
		i--
		tmp[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, tmp[i:]...)
}

// AppendElement appends one element (type, key, value) to dst.
func AppendElement(dst []byte, key string, v any) ([]byte, error) {
	switch x := v.(type) {
	case float64:
		return bsoncore.AppendDoubleElement(dst, key, x), nil
	case string:
		return bsoncore.AppendStringElement(dst, key, x), nil
	case bson.D:
		dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, key)
		return AppendDocument(dst, x)
	case bson.A:
		dst = bsoncore.AppendHeader(dst, bsoncore.TypeArray, key)
		return appendArray(dst, x)
	case []any:
		dst = bsoncore.AppendHeader(dst, bsoncore.TypeArray, key)
		return appendArray(dst, bson.A(x))
	case bson.Binary:
		return bsoncore.AppendBinaryElement(dst, key, x.Subtype, x.Data), nil
	case bson.Undefined:
		return bsoncore.AppendUndefinedElement(dst, key), nil
	case bson.ObjectID:
		return bsoncore.AppendObjectIDElement(dst, key, x), nil
	case bool:
		return bsoncore.AppendBooleanElement(dst, key, x), nil
	case bson.DateTime:
		return bsoncore.AppendDateTimeElement(dst, key, int64(x)), nil
	case nil:
		return bsoncore.AppendNullElement(dst, key), nil
	case bson.Null:
		return bsoncore.AppendNullElement(dst, key), nil
	case bson.Regex:
		return bsoncore.AppendRegexElement(dst, key, x.Pattern, x.Options), nil
	case bson.DBPointer:
		return bsoncore.AppendDBPointerElement(dst, key, x.DB, x.Pointer), nil
	case bson.JavaScript:
		return bsoncore.AppendJavaScriptElement(dst, key, string(x)), nil
	case bson.Symbol:
		return bsoncore.AppendSymbolElement(dst, key, string(x)), nil
	case bson.CodeWithScope:
		scope, ok := x.Scope.(bson.D)
		if !ok {
			return appendReflect(dst, key, v)
		}
		sb, err := Encode(scope)
		if err != nil {
			return nil, err
		}
		return bsoncore.AppendCodeWithScopeElement(dst, key, string(x.Code), sb), nil
	case int32:
		return bsoncore.AppendInt32Element(dst, key, x), nil
	case bson.Timestamp:
		return bsoncore.AppendTimestampElement(dst, key, x.T, x.I), nil
	case int64:
		return bsoncore.AppendInt64Element(dst, key, x), nil
	case int:
		if x >= math.MinInt32 && x <= math.MaxInt32 {
			return bsoncore.AppendInt32Element(dst, key, int32(x)), nil
		}
		return bsoncore.AppendInt64Element(dst, key, int64(x)), nil
	case bson.Decimal128:
		h, l := x.GetBytes()
		return bsoncore.AppendDecimal128Element(dst, key, h, l), nil
	case bson.MinKey:
		return bsoncore.AppendMinKeyElement(dst, key), nil
	case bson.MaxKey:
		return bsoncore.AppendMaxKeyElement(dst, key), nil
	case bson.Raw:
		return bsoncore.AppendDocumentElement(dst, key, x), nil
	case bson.RawValue:
		return bsoncore.AppendValueElement(dst, key, bsoncore.Value{Type: bsoncore.Type(x.Type), Data: x.Value}), nil
	}
	return appendReflect(dst, key, v)
}

func appendReflect(dst []byte, key string, v any) ([]byte, error) {
	t, data, err := bson.MarshalValue(v)
	if err != nil {
		return nil, fmt.Errorf("encode field %q: %w", key, err)
	}
	return bsoncore.AppendValueElement(dst, key, bsoncore.Value{Type: bsoncore.Type(t), Data: data}), nil
}

// Normalize returns v as one of the decoded types (converting Go ints, []any, bson.M is not
// accepted because its order is undefined).
func Normalize(v any) any {
	switch x := v.(type) {
	case int:
		if x >= math.MinInt32 && x <= math.MaxInt32 {
			return int32(x)
		}
		return int64(x)
	case []any:
		return bson.A(x)
	case bson.Null:
		return nil
	}
	return v
}
