package bsonval

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// ErrMalformed reports BSON bytes that cannot be decoded.
var ErrMalformed = errors.New("malformed BSON")

// Decode decodes a BSON document into a bson.D whose values have the types listed in the
// package comment. It is several times faster than bson.Unmarshal. Malformed input returns an
// error wrapping ErrMalformed; it never panics.
func Decode(raw []byte) (bson.D, error) {
	d, ok := decodeDoc(raw)
	if !ok {
		return nil, ErrMalformed
	}
	return d, nil
}

// EachElement calls fn with the key and the raw value of each top-level element of a BSON
// document, in order, until fn returns false. It returns an error wrapping ErrMalformed for
// bytes that do not frame a document or an element; values are not checked inside.
func EachElement(raw []byte, fn func(key []byte, v bsoncore.Value) bool) error {
	return eachElement(raw, func(_, key []byte, v bsoncore.Value) bool { return fn(key, v) })
}

// eachElement is EachElement that also passes each element's raw bytes (type, key, value).
func eachElement(raw []byte, fn func(elem, key []byte, v bsoncore.Value) bool) error {
	rem, ok := elements(raw)
	if !ok {
		return ErrMalformed
	}
	for len(rem) > 0 {
		key, v, rest, ok := nextElement(rem)
		if !ok {
			return ErrMalformed
		}
		elem := rem[:len(rem)-len(rest)]
		rem = rest
		if !fn(elem, key, v) {
			return nil
		}
	}
	return nil
}

// elements returns the element bytes of the document raw, without its length and terminator
// (ok false for bytes that do not frame a document).
func elements(raw []byte) ([]byte, bool) {
	length, _, ok := bsoncore.ReadLength(raw)
	if !ok || length < 5 || int(length) > len(raw) || raw[length-1] != 0 {
		return nil, false
	}
	return raw[4 : length-1], true
}

// nextElement reads the first element of element bytes rem: its key, its value and the
// elements after it (ok false for bytes that do not frame an element).
func nextElement(rem []byte) (key []byte, v bsoncore.Value, rest []byte, ok bool) {
	if len(rem) < 2 {
		return nil, bsoncore.Value{}, nil, false
	}
	t := bsoncore.Type(rem[0])
	if key, rest, ok = bsoncore.ReadKeyBytes(rem[1:]); !ok {
		return nil, bsoncore.Value{}, nil, false
	}
	v, rest, ok = bsoncore.ReadValue(rest, t)
	return key, v, rest, ok
}

// SelectFields returns a new BSON document of the top-level elements of raw whose keys are
// among fields (keep true) or are not (keep false), copied byte for byte in document order
// (every occurrence): an inclusion or exclusion projection of whole top-level fields without
// decoding a value. Malformed input returns an error wrapping ErrMalformed.
func SelectFields(raw []byte, fields []string, keep bool) ([]byte, error) {
	size := 5
	err := eachElement(raw, func(elem, key []byte, _ bsoncore.Value) bool {
		if (fieldIndex(fields, key) >= 0) == keep {
			size += len(elem)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 4, size)
	_ = eachElement(raw, func(elem, key []byte, _ bsoncore.Value) bool {
		if (fieldIndex(fields, key) >= 0) == keep {
			out = append(out, elem...)
		}
		return true
	})
	out = append(out, 0)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out, nil
}

// fieldIndex returns the index of key among fields, -1 if absent (without converting key to a
// string).
func fieldIndex(fields []string, key []byte) int {
	for i, f := range fields {
		if string(key) == f {
			return i
		}
	}
	return -1
}

// DecodeFields decodes the top-level elements of a BSON document whose keys are among fields
// (every occurrence, in document order), skipping the others without decoding them: what a
// filter reading only those fields needs of a large document. Malformed input returns an
// error wrapping ErrMalformed.
func DecodeFields(raw []byte, fields []string) (bson.D, error) {
	d := make(bson.D, 0, len(fields))
	valid := true
	err := EachElement(raw, func(key []byte, val bsoncore.Value) bool {
		i := fieldIndex(fields, key)
		if i < 0 {
			return true
		}
		v, ok := decodeValue(val)
		if !ok {
			valid = false
			return false
		}
		d = append(d, bson.E{Key: fields[i], Value: v}) // the caller's string: no key copy
		return true
	})
	if err != nil || !valid {
		return nil, ErrMalformed
	}
	return d, nil
}

func decodeDoc(raw []byte) (bson.D, bool) {
	rem, n, ok := elementList(raw)
	if !ok {
		return nil, false
	}
	d := make(bson.D, 0, n)
	for len(rem) > 0 {
		var e bson.E
		if e, rem, ok = decodeElement(rem); !ok {
			return nil, false
		}
		d = append(d, e)
	}
	return d, true
}

// decodeArray decodes an array's values in order (its keys are not read: not even allocated).
func decodeArray(raw []byte) (bson.A, bool) {
	rem, n, ok := elementList(raw)
	if !ok {
		return nil, false
	}
	a := make(bson.A, 0, n)
	for len(rem) > 0 {
		_, val, rest, ok := nextElement(rem)
		if !ok {
			return nil, false
		}
		v, ok := decodeValue(val)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		rem = rest
	}
	return a, true
}

// elementList returns the element bytes of the document raw (without its length and
// terminator) and how many elements they frame, so that a decode allocates its slice once;
// ok is false for bytes that do not frame a document of elements.
func elementList(raw []byte) (rem []byte, n int, ok bool) {
	if rem, ok = elements(raw); !ok {
		return nil, 0, false
	}
	for r := rem; len(r) > 0; n++ {
		if _, _, r, ok = nextElement(r); !ok {
			return nil, 0, false
		}
	}
	return rem, n, true
}

func decodeElement(rem []byte) (bson.E, []byte, bool) {
	key, val, rest, ok := nextElement(rem)
	if !ok {
		return bson.E{}, nil, false
	}
	v, ok := decodeValue(val)
	if !ok {
		return bson.E{}, nil, false
	}
	return bson.E{Key: string(key), Value: v}, rest, true
}

// DecodeValue decodes one raw value.
func DecodeValue(v bsoncore.Value) (any, error) {
	x, ok := decodeValue(v)
	if !ok {
		return nil, ErrMalformed
	}
	return x, nil
}

func decodeValue(v bsoncore.Value) (any, bool) {
	switch v.Type {
	case bsoncore.TypeDouble:
		return v.DoubleOK()
	case bsoncore.TypeString:
		return v.StringValueOK()
	case bsoncore.TypeEmbeddedDocument:
		doc, ok := v.DocumentOK()
		if !ok {
			return nil, false
		}
		return decodeDoc(doc)
	case bsoncore.TypeArray:
		arr, ok := v.ArrayOK()
		if !ok {
			return nil, false
		}
		return decodeArray(arr)
	case bsoncore.TypeBinary:
		st, data, ok := v.BinaryOK()
		return bson.Binary{Subtype: st, Data: append([]byte(nil), data...)}, ok
	case bsoncore.TypeUndefined:
		return bson.Undefined{}, true
	case bsoncore.TypeObjectID:
		oid, ok := v.ObjectIDOK()
		return bson.ObjectID(oid), ok
	case bsoncore.TypeBoolean:
		return v.BooleanOK()
	case bsoncore.TypeDateTime:
		dt, ok := v.DateTimeOK()
		return bson.DateTime(dt), ok
	case bsoncore.TypeNull:
		return nil, true
	case bsoncore.TypeRegex:
		p, o, ok := v.RegexOK()
		return bson.Regex{Pattern: p, Options: o}, ok
	case bsoncore.TypeDBPointer:
		ns, oid, ok := v.DBPointerOK()
		return bson.DBPointer{DB: ns, Pointer: bson.ObjectID(oid)}, ok
	case bsoncore.TypeJavaScript:
		js, ok := v.JavaScriptOK()
		return bson.JavaScript(js), ok
	case bsoncore.TypeSymbol:
		s, ok := v.SymbolOK()
		return bson.Symbol(s), ok
	case bsoncore.TypeCodeWithScope:
		code, scope, ok := v.CodeWithScopeOK()
		if !ok {
			return nil, false
		}
		sd, ok := decodeDoc(scope)
		return bson.CodeWithScope{Code: bson.JavaScript(code), Scope: sd}, ok
	case bsoncore.TypeInt32:
		return v.Int32OK()
	case bsoncore.TypeTimestamp:
		t, i, ok := v.TimestampOK()
		return bson.Timestamp{T: t, I: i}, ok
	case bsoncore.TypeInt64:
		return v.Int64OK()
	case bsoncore.TypeDecimal128:
		h, l, ok := v.Decimal128OK()
		return bson.NewDecimal128(h, l), ok
	case bsoncore.TypeMinKey:
		return bson.MinKey{}, true
	case bsoncore.TypeMaxKey:
		return bson.MaxKey{}, true
	}
	return nil, false
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

// ValueSize is the size in bytes of v's BSON encoding as an element value (what mongod's
// BSONElement::valuesize reports): for a document or an array, the whole embedded document.
// Values of a type the codec does not know are measured by encoding them.
func ValueSize(v any) int {
	switch x := v.(type) {
	case float64, int64, bson.DateTime, bson.Timestamp:
		return 8
	case int32:
		return 4
	case int:
		if x >= math.MinInt32 && x <= math.MaxInt32 {
			return 4
		}
		return 8
	case bool:
		return 1
	case nil, bson.Null, bson.Undefined, bson.MinKey, bson.MaxKey:
		return 0
	case string:
		return 4 + len(x) + 1
	case bson.Symbol:
		return 4 + len(x) + 1
	case bson.JavaScript:
		return 4 + len(x) + 1
	case bson.ObjectID:
		return 12
	case bson.Decimal128:
		return 16
	case bson.Binary:
		if x.Subtype == 0x02 {
			return 4 + 1 + 4 + len(x.Data)
		}
		return 4 + 1 + len(x.Data)
	case bson.Regex:
		return len(x.Pattern) + 1 + len(x.Options) + 1
	case bson.D:
		return DocSize(x)
	case bson.A:
		return arraySize(x)
	case []any:
		return arraySize(x)
	case bson.Raw:
		return len(x)
	case bson.RawValue:
		return len(x.Value)
	}
	b, err := AppendElement(nil, "", v)
	if err != nil {
		return 0
	}
	return len(b) - 2 // type byte and the empty key's terminator
}

// DocSize is the size in bytes of d's BSON encoding.
func DocSize(d bson.D) int {
	n := 5
	for _, e := range d {
		n += 1 + len(e.Key) + 1 + ValueSize(e.Value)
	}
	return n
}

func arraySize(a []any) int {
	n := 5
	for i, v := range a {
		n += 1 + digits(i) + 1 + ValueSize(v)
	}
	return n
}

// digits is the number of decimal digits of n >= 0.
func digits(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}
