package bsonval

import (
	"encoding/binary"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// AppendKey appends an order-preserving encoding of v to dst: for any decoded values a and b,
// bytes.Compare(AppendKey(nil, a), AppendKey(nil, b)) has the sign of Compare(a, b), and the
// encodings are equal exactly when Compare returns 0 (so 1, int64(1) and 1.0 encode alike, as
// they collide in a MongoDB unique index). Encodings are prefix-free, so the concatenation of
// several values' keys orders like the tuple of values (a compound index key).
//
// Decimal128 values are encoded through their nearest double; they are outside rollup's
// subset and documented as such.
func AppendKey(dst []byte, v any) []byte {
	c := Class(v)
	dst = append(dst, byte(c))
	return appendPayload(dst, c, v)
}

// KeyOf returns AppendKey(nil, v).
func KeyOf(v any) []byte { return AppendKey(nil, v) }

func appendPayload(dst []byte, class int, v any) []byte {
	switch class {
	case ClassMinKey, ClassNull, ClassMaxKey:
		return dst
	case ClassNumber:
		return appendNumber(dst, toNumber(v))
	case ClassString:
		return appendEscaped(dst, str(v))
	case ClassObject:
		for _, e := range toD(v) {
			ec := Class(e.Value)
			dst = append(dst, byte(ec))
			dst = appendEscaped(dst, e.Key)
			dst = appendPayload(dst, ec, e.Value)
		}
		return append(dst, 0)
	case ClassArray:
		for _, e := range toA(v) {
			dst = AppendKey(dst, e)
		}
		return append(dst, 0)
	case ClassBinary:
		x := v.(bson.Binary)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(x.Data)))
		dst = append(dst, x.Subtype)
		return append(dst, x.Data...)
	case ClassObjectID:
		x := v.(bson.ObjectID)
		return append(dst, x[:]...)
	case ClassBool:
		if v.(bool) {
			return append(dst, 1)
		}
		return append(dst, 0)
	case ClassDate:
		return binary.BigEndian.AppendUint64(dst, uint64(int64(v.(bson.DateTime)))^(1<<63))
	case ClassTimestamp:
		x := v.(bson.Timestamp)
		dst = binary.BigEndian.AppendUint32(dst, x.T)
		return binary.BigEndian.AppendUint32(dst, x.I)
	case ClassRegex:
		x := v.(bson.Regex)
		dst = appendEscaped(dst, x.Pattern)
		return appendEscaped(dst, x.Options)
	case ClassDBPointer:
		x := v.(bson.DBPointer)
		dst = appendEscaped(dst, x.DB)
		return append(dst, x.Pointer[:]...)
	case ClassCode:
		return appendEscaped(dst, string(v.(bson.JavaScript)))
	case ClassCodeScope:
		x := v.(bson.CodeWithScope)
		dst = appendEscaped(dst, string(x.Code))
		return appendPayload(dst, ClassObject, x.Scope)
	}
	return dst
}

// appendEscaped writes s with 0x00 escaped as 0x00 0xFF and terminated by 0x00 0x00, so that
// byte order equals string order and the encoding is prefix-free.
func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			dst = append(dst, 0, 0xFF)
			continue
		}
		dst = append(dst, s[i])
	}
	return append(dst, 0, 0)
}

const two63 = 9223372036854775808.0

// appendNumber writes 16 bytes: the value rounded to a double in order-preserving form, then
// the exact distance of an int64 from that double (zero for doubles and small integers).
func appendNumber(dst []byte, n number) []byte {
	var f float64
	var delta int64
	if n.isInt {
		f = float64(n.i)
		if f >= two63 {
			delta = (n.i - math.MaxInt64) - 1
		} else {
			delta = n.i - int64(f)
		}
	} else {
		f = n.f
	}
	var bits uint64
	switch {
	case math.IsNaN(f):
		bits = 0
	case f == 0:
		bits = 1 << 63 // +0 and -0 are equal
	case f > 0:
		bits = math.Float64bits(f) | 1<<63
	default:
		bits = ^math.Float64bits(f)
	}
	dst = binary.BigEndian.AppendUint64(dst, bits)
	return binary.BigEndian.AppendUint64(dst, uint64(delta)^(1<<63))
}
