package bsonval

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Format renders a decoded value the way mongod's BSONObj::toString does, as it appears in
// server messages such as E11000's "dup key: { id: "a", n: 1 }": strings double-quoted (with
// `"` and `\` escaped), integers plain, doubles in shortest form with ".0" on integral
// values, ObjectId('hex'), new Date(ms), Timestamp(t, i), { a: 1 } documents, [ 1, 2 ]
// arrays, BinData(subtype, HEX), MinKey and MaxKey.
func Format(v any) string {
	var sb strings.Builder
	formatValue(&sb, v)
	return sb.String()
}

func formatValue(sb *strings.Builder, v any) {
	switch x := v.(type) {
	case nil, bson.Null:
		sb.WriteString("null")
	case bson.Undefined:
		sb.WriteString("undefined")
	case string:
		formatString(sb, x)
	case bson.Symbol:
		formatString(sb, string(x))
	case int32:
		sb.WriteString(strconv.FormatInt(int64(x), 10))
	case int64:
		sb.WriteString(strconv.FormatInt(x, 10))
	case int:
		sb.WriteString(strconv.Itoa(x))
	case float64:
		sb.WriteString(formatDouble(x))
	case bool:
		sb.WriteString(strconv.FormatBool(x))
	case bson.ObjectID:
		sb.WriteString("ObjectId('")
		sb.WriteString(x.Hex())
		sb.WriteString("')")
	case bson.DateTime:
		sb.WriteString("new Date(")
		sb.WriteString(strconv.FormatInt(int64(x), 10))
		sb.WriteString(")")
	case bson.Timestamp:
		sb.WriteString("Timestamp(")
		sb.WriteString(strconv.FormatUint(uint64(x.T), 10))
		sb.WriteString(", ")
		sb.WriteString(strconv.FormatUint(uint64(x.I), 10))
		sb.WriteString(")")
	case bson.D:
		formatDoc(sb, x)
	case bson.Raw:
		formatDoc(sb, toD(x))
	case bson.A:
		formatArray(sb, x)
	case []any:
		formatArray(sb, x)
	case bson.Binary:
		sb.WriteString("BinData(")
		sb.WriteString(strconv.Itoa(int(x.Subtype)))
		sb.WriteString(", ")
		sb.WriteString(strings.ToUpper(hex.EncodeToString(x.Data)))
		sb.WriteString(")")
	case bson.Regex:
		sb.WriteString("/")
		sb.WriteString(x.Pattern)
		sb.WriteString("/")
		sb.WriteString(x.Options)
	case bson.Decimal128:
		sb.WriteString("NumberDecimal(")
		sb.WriteString(x.String())
		sb.WriteString(")")
	case bson.MinKey:
		sb.WriteString("MinKey")
	case bson.MaxKey:
		sb.WriteString("MaxKey")
	case bson.JavaScript:
		sb.WriteString(string(x))
	case bson.CodeWithScope:
		sb.WriteString(string(x.Code))
	case bson.DBPointer:
		sb.WriteString("DBRef('")
		sb.WriteString(x.DB)
		sb.WriteString("', ")
		sb.WriteString(x.Pointer.Hex())
		sb.WriteString(")")
	default:
		sb.WriteString("?")
	}
}

func formatString(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			sb.WriteByte('\\')
		}
		sb.WriteByte(s[i])
	}
	sb.WriteByte('"')
}

func formatDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".en") {
		s += ".0"
	}
	return s
}

func formatDoc(sb *strings.Builder, d bson.D) {
	if len(d) == 0 {
		sb.WriteString("{}")
		return
	}
	sb.WriteString("{ ")
	for i, e := range d {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(e.Key)
		sb.WriteString(": ")
		formatValue(sb, e.Value)
	}
	sb.WriteString(" }")
}

func formatArray(sb *strings.Builder, a []any) {
	if len(a) == 0 {
		sb.WriteString("[]")
		return
	}
	sb.WriteString("[ ")
	for i, v := range a {
		if i > 0 {
			sb.WriteString(", ")
		}
		formatValue(sb, v)
	}
	sb.WriteString(" ]")
}

// TypeName returns MongoDB's alias of a value's BSON type ("string", "object", "array", ...).
func TypeName(v any) string {
	switch v.(type) {
	case float64:
		return "double"
	case string:
		return "string"
	case bson.D:
		return "object"
	case bson.A:
		return "array"
	case bson.Binary:
		return "binData"
	case bson.Undefined:
		return "undefined"
	case bson.ObjectID:
		return "objectId"
	case bool:
		return "bool"
	case bson.DateTime:
		return "date"
	case nil, bson.Null:
		return "null"
	case bson.Regex:
		return "regex"
	case bson.DBPointer:
		return "dbPointer"
	case bson.JavaScript:
		return "javascript"
	case bson.Symbol:
		return "symbol"
	case bson.CodeWithScope:
		return "javascriptWithScope"
	case int32, int:
		return "int"
	case bson.Timestamp:
		return "timestamp"
	case int64:
		return "long"
	case bson.Decimal128:
		return "decimal"
	case bson.MinKey:
		return "minKey"
	case bson.MaxKey:
		return "maxKey"
	}
	return "unknown"
}

// typeAliases maps MongoDB's type aliases to BSON type numbers (as $type and $convert use
// them); "number" is not a single type and is not listed.
var typeAliases = map[string]int32{
	"double": 1, "string": 2, "object": 3, "array": 4, "binData": 5, "undefined": 6,
	"objectId": 7, "bool": 8, "date": 9, "null": 10, "regex": 11, "dbPointer": 12,
	"javascript": 13, "symbol": 14, "javascriptWithScope": 15, "int": 16, "timestamp": 17,
	"long": 18, "decimal": 19, "minKey": -1, "maxKey": 127,
}

// TypeNumber returns the BSON type number of a decoded value (1 double … 19 decimal, -1 minKey,
// 127 maxKey), as $type reports it.
func TypeNumber(v any) int32 {
	switch v.(type) {
	case float64:
		return 1
	case string:
		return 2
	case bson.D:
		return 3
	case bson.A:
		return 4
	case bson.Binary:
		return 5
	case bson.Undefined:
		return 6
	case bson.ObjectID:
		return 7
	case bool:
		return 8
	case bson.DateTime:
		return 9
	case nil, bson.Null:
		return 10
	case bson.Regex:
		return 11
	case bson.DBPointer:
		return 12
	case bson.JavaScript:
		return 13
	case bson.Symbol:
		return 14
	case bson.CodeWithScope:
		return 15
	case int32, int:
		return 16
	case bson.Timestamp:
		return 17
	case int64:
		return 18
	case bson.Decimal128:
		return 19
	case bson.MinKey:
		return -1
	case bson.MaxKey:
		return 127
	}
	return 0
}

// TypeByAlias returns the BSON type number of a MongoDB type alias ("string", "long", …).
func TypeByAlias(alias string) (int32, bool) {
	n, ok := typeAliases[alias]
	return n, ok
}
