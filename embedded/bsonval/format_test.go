package bsonval

import (
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestFormat(t *testing.T) {
	oid, _ := bson.ObjectIDFromHex("5f1d7f0c2b3a4c5d6e7f8091")
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"string", "a", `"a"`},
		{"string escaped", `a"b\c`, `"a\"b\\c"`},
		{"int32", int32(-7), "-7"},
		{"int64", int64(1) << 40, "1099511627776"},
		{"int", 100, "100"},
		{"double fractional", 1.5, "1.5"},
		{"double integral", 2.0, "2.0"},
		{"double negative zero", math.Copysign(0, -1), "-0.0"},
		{"double small", 0.1, "0.1"},
		{"double exponent", 1e21, "1e+21"},
		{"double nan", math.NaN(), "nan"},
		{"double inf", math.Inf(-1), "-inf"},
		{"true", true, "true"},
		{"false", false, "false"},
		{"null", nil, "null"},
		{"undefined", bson.Undefined{}, "undefined"},
		{"objectid", oid, "ObjectId('5f1d7f0c2b3a4c5d6e7f8091')"},
		{"date", bson.DateTime(1700000000000), "new Date(1700000000000)"},
		{"timestamp", bson.Timestamp{T: 5, I: 7}, "Timestamp(5, 7)"},
		{"doc", bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: "x"}}, `{ a: 1, b: "x" }`},
		{"empty doc", bson.D{}, "{}"},
		{"nested", bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: bson.A{int32(1), 2.5}}}}}, "{ a: { b: [ 1, 2.5 ] } }"},
		{"array", bson.A{int32(1), int32(2)}, "[ 1, 2 ]"},
		{"empty array", bson.A{}, "[]"},
		{"minkey", bson.MinKey{}, "MinKey"},
		{"maxkey", bson.MaxKey{}, "MaxKey"},
		{"bindata", bson.Binary{Subtype: 4, Data: []byte{0xab, 0x01}}, "BinData(4, AB01)"},
		{"regex", bson.Regex{Pattern: "^a", Options: "i"}, "/^a/i"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Format(tt.v); got != tt.want {
				t.Errorf("Format(%v) = %s, want %s", tt.v, got, tt.want)
			}
		})
	}
}
