package query

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// formatValue renders a decoded value the way mongod's BSONElement::toString does in error
// messages: strings quoted, numbers plain, documents as { a: 1 } and arrays as [ 1, 2 ].
func formatValue(v any) string {
	var b strings.Builder
	appendFormat(&b, v)
	return b.String()
}

// formatElem renders "{key: value}" as mongod does for one element wrapped in braces.
func formatElem(key string, v any) string {
	return "{" + key + ": " + formatValue(v) + "}"
}

func appendFormat(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil, bson.Null:
		b.WriteString("null")
	case bson.Undefined:
		b.WriteString("undefined")
	case string:
		appendQuoted(b, x)
	case bson.Symbol:
		appendQuoted(b, string(x))
	case int32:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case int:
		b.WriteString(strconv.Itoa(x))
	case float64:
		b.WriteString(formatDouble(x))
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case bson.ObjectID:
		b.WriteString("ObjectId('" + x.Hex() + "')")
	case bson.DateTime:
		b.WriteString("new Date(" + strconv.FormatInt(int64(x), 10) + ")")
	case bson.Timestamp:
		b.WriteString("Timestamp(" + strconv.FormatUint(uint64(x.T), 10) + ", " + strconv.FormatUint(uint64(x.I), 10) + ")")
	case bson.D:
		if len(x) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{ ")
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(e.Key)
			b.WriteString(": ")
			appendFormat(b, e.Value)
		}
		b.WriteString(" }")
	case bson.A:
		if len(x) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[ ")
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			appendFormat(b, e)
		}
		b.WriteString(" ]")
	case bson.Regex:
		b.WriteString("/" + x.Pattern + "/" + x.Options)
	case bson.MinKey:
		b.WriteString("MinKey")
	case bson.MaxKey:
		b.WriteString("MaxKey")
	case bson.Binary:
		b.WriteString("BinData(" + strconv.Itoa(int(x.Subtype)) + ", " + strings.ToUpper(hex.EncodeToString(x.Data)) + ")")
	case bson.Decimal128:
		b.WriteString("NumberDecimal(\"" + x.String() + "\")")
	case bson.JavaScript:
		b.WriteString(string(x))
	default:
		b.WriteString("?")
	}
}

func appendQuoted(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

func formatDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan.0"
	case math.IsInf(f, 1):
		return "inf.0"
	case math.IsInf(f, -1):
		return "-inf.0"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// typeName returns MongoDB's alias of a value's BSON type ("string", "object", "array", ...).
func typeName(v any) string {
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
