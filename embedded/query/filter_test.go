package query

import (
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
)

type D = bson.D
type A = bson.A

func e(k string, v any) bson.E { return bson.E{Key: k, Value: v} }

func TestMatch(t *testing.T) {
	oid := bson.NewObjectIDFromTimestamp(bson.DateTime(0).Time())
	tests := []struct {
		name   string
		filter D
		doc    D
		want   bool
	}{
		{"empty filter", D{}, D{e("a", 1)}, true},
		{"eq scalar", D{e("a", 1)}, D{e("a", int32(1))}, true},
		{"eq int vs double", D{e("a", 1.0)}, D{e("a", int64(1))}, true},
		{"eq no match", D{e("a", 2)}, D{e("a", int32(1))}, false},
		{"eq string vs number", D{e("a", "1")}, D{e("a", int32(1))}, false},
		{"eq missing", D{e("a", 1)}, D{e("b", 1)}, false},
		{"eq $eq", D{e("a", D{e("$eq", 1)})}, D{e("a", 1.0)}, true},
		{"eq array contains scalar", D{e("a", 2)}, D{e("a", A{1, 2, 3})}, true},
		{"eq array whole", D{e("a", A{1, 2})}, D{e("a", A{1, 2})}, true},
		{"eq array order matters", D{e("a", A{2, 1})}, D{e("a", A{1, 2})}, false},
		{"eq array nested element", D{e("a", A{1, 2})}, D{e("a", A{A{1, 2}, 3})}, true},
		{"eq array not subset", D{e("a", A{1})}, D{e("a", A{1, 2})}, false},
		{"eq doc exact", D{e("a", D{e("b", 1), e("c", 2)})}, D{e("a", D{e("b", 1), e("c", 2)})}, true},
		{"eq doc order matters", D{e("a", D{e("c", 2), e("b", 1)})}, D{e("a", D{e("b", 1), e("c", 2)})}, false},
		{"eq doc in array", D{e("a", D{e("b", 1)})}, D{e("a", A{D{e("b", 1)}})}, true},
		{"eq objectid", D{e("_id", oid)}, D{e("_id", oid)}, true},

		{"dotted doc", D{e("a.b", 1)}, D{e("a", D{e("b", 1)})}, true},
		{"dotted fan out", D{e("a.b", 1)}, D{e("a", A{D{e("b", 1)}, D{e("b", 2)}})}, true},
		{"dotted fan out second", D{e("a.b", 2)}, D{e("a", A{D{e("b", 1)}, D{e("b", 2)}})}, true},
		{"dotted fan out none", D{e("a.b", 3)}, D{e("a", A{D{e("b", 1)}, D{e("b", 2)}})}, false},
		{"dotted leaf array", D{e("a.b", 2)}, D{e("a", A{D{e("b", A{1, 2})}})}, true},
		{"dotted through scalar", D{e("a.b", 1)}, D{e("a", 1)}, false},
		{"dotted nested arrays not traversed", D{e("a.b", 1)}, D{e("a", A{A{D{e("b", 1)}}})}, false},
		{"numeric index", D{e("a.0", 1)}, D{e("a", A{1, 2})}, true},
		{"numeric index second", D{e("a.1", 1)}, D{e("a", A{1, 2})}, false},
		{"numeric index out of range", D{e("a.5", 1)}, D{e("a", A{1, 2})}, false},
		{"numeric field in doc", D{e("a.0", 1)}, D{e("a", D{e("0", 1)})}, true},
		{"numeric field in array element doc", D{e("a.0", 1)}, D{e("a", A{D{e("0", 1)}})}, true},
		{"numeric index then field", D{e("a.0.b", 1)}, D{e("a", A{D{e("b", 1)}, D{e("b", 2)}})}, true},
		{"numeric index then field miss", D{e("a.1.b", 1)}, D{e("a", A{D{e("b", 1)}, D{e("b", 2)}})}, false},
		{"numeric index nested array", D{e("a.0.b", 1)}, D{e("a", A{A{D{e("b", 1)}}})}, true},
		{"numeric index element array not expanded", D{e("a.0", 5)}, D{e("a", A{A{5}})}, false},
		{"numeric index element array whole", D{e("a.0", A{5})}, D{e("a", A{A{5}})}, true},
		{"numeric leading zero", D{e("a.00", 1)}, D{e("a", A{1})}, false},

		{"null matches missing", D{e("a", nil)}, D{e("b", 1)}, true},
		{"null matches null", D{e("a", nil)}, D{e("a", nil)}, true},
		{"null matches undefined", D{e("a", nil)}, D{e("a", bson.Undefined{})}, true},
		{"null no match value", D{e("a", nil)}, D{e("a", 0)}, false},
		{"null matches array with null", D{e("a", nil)}, D{e("a", A{1, nil})}, true},
		{"null no match array", D{e("a", nil)}, D{e("a", A{1})}, false},
		{"null no match empty array", D{e("a", nil)}, D{e("a", A{})}, false},
		{"null dotted missing in element", D{e("a.b", nil)}, D{e("a", A{D{e("c", 1)}})}, true},
		{"null dotted array of scalars", D{e("a.b", nil)}, D{e("a", A{1, 2})}, false},
		{"null dotted through scalar", D{e("a.b", nil)}, D{e("a", 1)}, true},
		{"ne null missing", D{e("a", D{e("$ne", nil)})}, D{e("b", 1)}, false},
		{"ne null value", D{e("a", D{e("$ne", nil)})}, D{e("a", 1)}, true},
		{"ne null array with null", D{e("a", D{e("$ne", nil)})}, D{e("a", A{nil, 1})}, false},

		{"type string", D{e("a", D{e("$type", "string")})}, D{e("a", "x")}, true},
		{"type string no", D{e("a", D{e("$type", "string")})}, D{e("a", 1)}, false},
		{"type number code", D{e("a", D{e("$type", 2)})}, D{e("a", "x")}, true},
		{"type number double code", D{e("a", D{e("$type", 16.0)})}, D{e("a", int32(1))}, true},
		{"type int vs long", D{e("a", D{e("$type", "int")})}, D{e("a", int64(1))}, false},
		{"type long", D{e("a", D{e("$type", "long")})}, D{e("a", int64(1))}, true},
		{"type number alias int", D{e("a", D{e("$type", "number")})}, D{e("a", int32(1))}, true},
		{"type number alias double", D{e("a", D{e("$type", "number")})}, D{e("a", 1.5)}, true},
		{"type number alias decimal", D{e("a", D{e("$type", "number")})}, D{e("a", bson.NewDecimal128(0, 1))}, true},
		{"type number alias string", D{e("a", D{e("$type", "number")})}, D{e("a", "1")}, false},
		{"type null", D{e("a", D{e("$type", "null")})}, D{e("a", nil)}, true},
		{"type null missing", D{e("a", D{e("$type", "null")})}, D{e("b", nil)}, false},
		{"type undefined", D{e("a", D{e("$type", "undefined")})}, D{e("a", bson.Undefined{})}, true},
		{"type null not undefined", D{e("a", D{e("$type", "null")})}, D{e("a", bson.Undefined{})}, false},
		{"type array whole", D{e("a", D{e("$type", "array")})}, D{e("a", A{1})}, true},
		{"type array empty", D{e("a", D{e("$type", "array")})}, D{e("a", A{})}, true},
		{"type array element", D{e("a", D{e("$type", "string")})}, D{e("a", A{1, "x"})}, true},
		{"type array nested", D{e("a", D{e("$type", "array")})}, D{e("a", D{e("b", 1)})}, false},
		{"type object", D{e("a", D{e("$type", "object")})}, D{e("a", D{e("b", 1)})}, true},
		{"type dotted fan out", D{e("a.b", D{e("$type", "bool")})}, D{e("a", A{D{e("b", 1)}, D{e("b", true)}})}, true},
		{"type list", D{e("a", D{e("$type", A{"string", 8})})}, D{e("a", true)}, true},
		{"type list no", D{e("a", D{e("$type", A{"string", 8})})}, D{e("a", 1.0)}, false},
		{"type minKey", D{e("a", D{e("$type", -1)})}, D{e("a", bson.MinKey{})}, true},
		{"type maxKey", D{e("a", D{e("$type", "maxKey")})}, D{e("a", bson.MaxKey{})}, true},
		{"type date", D{e("a", D{e("$type", "date")})}, D{e("a", bson.DateTime(0))}, true},
		{"type timestamp", D{e("a", D{e("$type", "timestamp")})}, D{e("a", bson.Timestamp{T: 1})}, true},
		{"not type", D{e("a", D{e("$not", D{e("$type", "string")})})}, D{e("a", 1)}, true},
		{"not type missing", D{e("a", D{e("$not", D{e("$type", "string")})})}, D{}, true},
		{"size", D{e("a", D{e("$size", 2)})}, D{e("a", A{1, A{2, 3}})}, true},
		{"size zero", D{e("a", D{e("$size", 0)})}, D{e("a", A{})}, true},
		{"size not array", D{e("a", D{e("$size", 1)})}, D{e("a", 1)}, false},
		{"size missing", D{e("a", D{e("$size", 0)})}, D{}, false},
		{"size nested not traversed", D{e("a", D{e("$size", 2)})}, D{e("a", A{A{1, 2}})}, false},
		{"size dotted fan out", D{e("a.b", D{e("$size", 1)})}, D{e("a", A{D{e("b", A{1, 2})}, D{e("b", A{3})}})}, true},
		{"size double integral", D{e("a", D{e("$size", 1.0)})}, D{e("a", A{1})}, true},
		{"all", D{e("a", D{e("$all", A{1, 3})})}, D{e("a", A{3, 2, 1})}, true},
		{"all missing one", D{e("a", D{e("$all", A{1, 4})})}, D{e("a", A{3, 2, 1})}, false},
		{"all scalar field", D{e("a", D{e("$all", A{1})})}, D{e("a", 1)}, true},
		{"all empty", D{e("a", D{e("$all", A{})})}, D{e("a", A{})}, false},
		{"all whole array element", D{e("a", D{e("$all", A{A{1, 2}})})}, D{e("a", A{A{1, 2}, 3})}, true},
		{"all regex", D{e("a", D{e("$all", A{bson.Regex{Pattern: "^x"}, "yz"})})}, D{e("a", A{"xa", "yz"})}, true},
		{"all elemMatch", D{e("a", D{e("$all", A{D{e("$elemMatch", D{e("b", 1)})}, D{e("$elemMatch", D{e("b", 2)})}})})}, D{e("a", A{D{e("b", 1)}, D{e("b", 2)}})}, true},
		{"all elemMatch miss", D{e("a", D{e("$all", A{D{e("$elemMatch", D{e("b", 1)})}, D{e("$elemMatch", D{e("b", 3)})}})})}, D{e("a", A{D{e("b", 1)}, D{e("b", 2)}})}, false},
		{"mod", D{e("a", D{e("$mod", A{4, 1})})}, D{e("a", int32(9))}, true},
		{"mod no", D{e("a", D{e("$mod", A{4, 1})})}, D{e("a", int32(8))}, false},
		{"mod double truncates", D{e("a", D{e("$mod", A{4, 1})})}, D{e("a", 9.9)}, true},
		{"mod negative", D{e("a", D{e("$mod", A{4, -1})})}, D{e("a", int64(-9))}, true},
		{"mod array element", D{e("a", D{e("$mod", A{2, 0})})}, D{e("a", A{1, 4})}, true},
		{"mod string", D{e("a", D{e("$mod", A{2, 0})})}, D{e("a", "4")}, false},
		{"mod divisor double", D{e("a", D{e("$mod", A{2.5, 0})})}, D{e("a", int32(4))}, true},
		{"gt number", D{e("a", D{e("$gt", 5)})}, D{e("a", 6)}, true},
		{"gt equal", D{e("a", D{e("$gt", 5)})}, D{e("a", 5.0)}, false},
		{"gt type bracket string", D{e("a", D{e("$gt", 5)})}, D{e("a", "9")}, false},
		{"gt type bracket bool", D{e("a", D{e("$gt", 5)})}, D{e("a", true)}, false},
		{"gt missing", D{e("a", D{e("$gt", 5)})}, D{}, false},
		{"gt array element", D{e("a", D{e("$gt", 5)})}, D{e("a", A{1, 10})}, true},
		{"gt exact int64 vs double", D{e("a", D{e("$gt", 9007199254740992.0)})}, D{e("a", int64(9007199254740993))}, true},
		{"gte equal", D{e("a", D{e("$gte", 5)})}, D{e("a", int64(5))}, true},
		{"lt", D{e("a", D{e("$lt", 5)})}, D{e("a", 4.5)}, true},
		{"lt string", D{e("a", D{e("$lt", "b")})}, D{e("a", "a")}, true},
		{"lt string vs number", D{e("a", D{e("$lt", "b")})}, D{e("a", 1)}, false},
		{"lte", D{e("a", D{e("$lte", 5)})}, D{e("a", 5)}, true},
		{"range both", D{e("a", D{e("$gt", 1), e("$lt", 5)})}, D{e("a", 3)}, true},
		{"range independent over array", D{e("a", D{e("$gt", 1), e("$lt", 5)})}, D{e("a", A{0, 10})}, true},
		{"range out", D{e("a", D{e("$gt", 1), e("$lt", 5)})}, D{e("a", 7)}, false},
		{"gte null missing", D{e("a", D{e("$gte", nil)})}, D{}, true},
		{"lte null null", D{e("a", D{e("$lte", nil)})}, D{e("a", nil)}, true},
		{"gt null null", D{e("a", D{e("$gt", nil)})}, D{e("a", nil)}, false},
		{"lt null missing", D{e("a", D{e("$lt", nil)})}, D{}, false},
		{"gte null number", D{e("a", D{e("$gte", nil)})}, D{e("a", 1)}, false},
		{"lt maxkey number", D{e("a", D{e("$lt", bson.MaxKey{})})}, D{e("a", 1)}, true},
		{"lt maxkey missing", D{e("a", D{e("$lt", bson.MaxKey{})})}, D{}, true},
		{"lt maxkey maxkey", D{e("a", D{e("$lt", bson.MaxKey{})})}, D{e("a", bson.MaxKey{})}, false},
		{"lte maxkey maxkey", D{e("a", D{e("$lte", bson.MaxKey{})})}, D{e("a", bson.MaxKey{})}, true},
		{"gt minkey string", D{e("a", D{e("$gt", bson.MinKey{})})}, D{e("a", "x")}, true},
		{"gt minkey minkey", D{e("a", D{e("$gt", bson.MinKey{})})}, D{e("a", bson.MinKey{})}, false},
		{"eq maxkey number", D{e("a", bson.MaxKey{})}, D{e("a", 1)}, false},
		{"lt number vs maxkey value", D{e("a", D{e("$lt", 5)})}, D{e("a", bson.MaxKey{})}, false},
		{"gt nan", D{e("a", D{e("$gt", math.NaN())})}, D{e("a", 1)}, false},
		{"lt nan", D{e("a", D{e("$lt", 1)})}, D{e("a", math.NaN())}, false},
		{"eq nan", D{e("a", math.NaN())}, D{e("a", math.NaN())}, true},
		{"gte nan nan", D{e("a", D{e("$gte", math.NaN())})}, D{e("a", math.NaN())}, true},
		{"gt date", D{e("a", D{e("$gt", bson.DateTime(5))})}, D{e("a", bson.DateTime(6))}, true},
		{"gt date vs number", D{e("a", D{e("$gt", bson.DateTime(5))})}, D{e("a", 6)}, false},
		{"gt array rhs", D{e("a", D{e("$gt", A{1})})}, D{e("a", A{2})}, true},

		{"in", D{e("a", D{e("$in", A{1, 2})})}, D{e("a", 2.0)}, true},
		{"in miss", D{e("a", D{e("$in", A{1, 2})})}, D{e("a", 3)}, false},
		{"in empty", D{e("a", D{e("$in", A{})})}, D{e("a", 3)}, false},
		{"in null missing", D{e("a", D{e("$in", A{nil})})}, D{}, true},
		{"in array field", D{e("a", D{e("$in", A{5, 7})})}, D{e("a", A{1, 7})}, true},
		{"in regex", D{e("a", D{e("$in", A{bson.Regex{Pattern: "^x"}})})}, D{e("a", "xyz")}, true},
		{"in regex miss", D{e("a", D{e("$in", A{bson.Regex{Pattern: "^x"}})})}, D{e("a", "yz")}, false},
		{"nin", D{e("a", D{e("$nin", A{1, 2})})}, D{e("a", 3)}, true},
		{"nin hit", D{e("a", D{e("$nin", A{1, 2})})}, D{e("a", 1)}, false},
		{"nin missing", D{e("a", D{e("$nin", A{1, 2})})}, D{}, true},
		{"nin null missing", D{e("a", D{e("$nin", A{nil})})}, D{}, false},
		{"nin array", D{e("a", D{e("$nin", A{1})})}, D{e("a", A{2, 1})}, false},
		{"nin empty", D{e("a", D{e("$nin", A{})})}, D{}, true},
		{"ne", D{e("a", D{e("$ne", 1)})}, D{e("a", 2)}, true},
		{"ne missing", D{e("a", D{e("$ne", 1)})}, D{}, true},
		{"ne array containing", D{e("a", D{e("$ne", 1)})}, D{e("a", A{1, 2})}, false},

		{"exists true", D{e("a", D{e("$exists", true)})}, D{e("a", nil)}, true},
		{"exists true missing", D{e("a", D{e("$exists", true)})}, D{}, false},
		{"exists false", D{e("a", D{e("$exists", false)})}, D{}, true},
		{"exists false present", D{e("a", D{e("$exists", false)})}, D{e("a", 1)}, false},
		{"exists 1", D{e("a", D{e("$exists", 1)})}, D{e("a", 1)}, true},
		{"exists 0", D{e("a", D{e("$exists", 0)})}, D{e("a", 1)}, false},
		{"exists empty array", D{e("a", D{e("$exists", true)})}, D{e("a", A{})}, true},
		{"exists dotted", D{e("a.b", D{e("$exists", true)})}, D{e("a", A{D{e("c", 1)}, D{e("b", 1)}})}, true},
		{"exists false dotted scalars", D{e("a.b", D{e("$exists", false)})}, D{e("a", A{1, 2})}, true},

		{"and", D{e("$and", A{D{e("a", 1)}, D{e("b", 2)}})}, D{e("a", 1), e("b", 2)}, true},
		{"and fail", D{e("$and", A{D{e("a", 1)}, D{e("b", 2)}})}, D{e("a", 1), e("b", 3)}, false},
		{"or", D{e("$or", A{D{e("a", 1)}, D{e("b", 2)}})}, D{e("b", 2)}, true},
		{"or fail", D{e("$or", A{D{e("a", 1)}, D{e("b", 2)}})}, D{e("b", 3)}, false},
		{"nor", D{e("$nor", A{D{e("a", 1)}, D{e("b", 2)}})}, D{e("b", 3)}, true},
		{"nor fail", D{e("$nor", A{D{e("a", 1)}, D{e("b", 2)}})}, D{e("a", 1)}, false},
		{"comment ignored", D{e("$comment", "x"), e("a", 1)}, D{e("a", 1)}, true},
		{"implicit and", D{e("a", 1), e("b", 2)}, D{e("a", 1), e("b", 2)}, true},
		{"implicit and fail", D{e("a", 1), e("b", 2)}, D{e("a", 1)}, false},

		{"not gt", D{e("a", D{e("$not", D{e("$gt", 5)})})}, D{e("a", 3)}, true},
		{"not gt hit", D{e("a", D{e("$not", D{e("$gt", 5)})})}, D{e("a", 6)}, false},
		{"not gt missing", D{e("a", D{e("$not", D{e("$gt", 5)})})}, D{}, true},
		{"not gt string", D{e("a", D{e("$not", D{e("$gt", 5)})})}, D{e("a", "x")}, true},
		{"not range", D{e("a", D{e("$not", D{e("$gt", 1), e("$lt", 5)})})}, D{e("a", 3)}, false},
		{"not regex", D{e("a", D{e("$not", bson.Regex{Pattern: "^a"})})}, D{e("a", "bc")}, true},
		{"not regex hit", D{e("a", D{e("$not", bson.Regex{Pattern: "^a"})})}, D{e("a", "abc")}, false},

		{"regex", D{e("a", bson.Regex{Pattern: "^ab"})}, D{e("a", "abc")}, true},
		{"regex case", D{e("a", bson.Regex{Pattern: "^AB", Options: "i"})}, D{e("a", "abc")}, true},
		{"regex number", D{e("a", bson.Regex{Pattern: "1"})}, D{e("a", 1)}, false},
		{"regex array", D{e("a", bson.Regex{Pattern: "^b"})}, D{e("a", A{"a", "b"})}, true},
		{"regex symbol", D{e("a", bson.Regex{Pattern: "^b"})}, D{e("a", bson.Symbol("bx"))}, true},
		{"regex matches equal regex", D{e("a", bson.Regex{Pattern: "x", Options: "i"})}, D{e("a", bson.Regex{Pattern: "x", Options: "i"})}, true},
		{"$regex string", D{e("a", D{e("$regex", "b$")})}, D{e("a", "ab")}, true},
		{"$regex dollar before final newline", D{e("a", D{e("$regex", "b$")})}, D{e("a", "ab\n")}, true},
		{"$regex dollar not before inner newline", D{e("a", D{e("$regex", "b$")})}, D{e("a", "ab\nc")}, false},
		{"$regex multiline", D{e("a", D{e("$regex", "b$"), e("$options", "m")})}, D{e("a", "ab\nc")}, true},
		{"$regex options first", D{e("a", D{e("$options", "i"), e("$regex", "B")})}, D{e("a", "ab")}, true},
		{"$regex dotall", D{e("a", D{e("$regex", "a.b"), e("$options", "s")})}, D{e("a", "a\nb")}, true},
		{"$regex no dotall", D{e("a", D{e("$regex", "a.b")})}, D{e("a", "a\nb")}, false},
		{"$regex class with dollar", D{e("a", D{e("$regex", "[$]")})}, D{e("a", "a$b")}, true},
		{"$eq regex is equality", D{e("a", D{e("$eq", bson.Regex{Pattern: "x"})})}, D{e("a", "x")}, false},

		{"elemMatch object", D{e("a", D{e("$elemMatch", D{e("b", 1), e("c", 2)})})}, D{e("a", A{D{e("b", 1)}, D{e("b", 1), e("c", 2)}})}, true},
		{"elemMatch object split", D{e("a", D{e("$elemMatch", D{e("b", 1), e("c", 2)})})}, D{e("a", A{D{e("b", 1)}, D{e("c", 2)}})}, false},
		{"elemMatch value", D{e("a", D{e("$elemMatch", D{e("$gt", 1), e("$lt", 5)})})}, D{e("a", A{0, 3})}, true},
		{"elemMatch value split", D{e("a", D{e("$elemMatch", D{e("$gt", 1), e("$lt", 5)})})}, D{e("a", A{0, 10})}, false},
		{"elemMatch not array", D{e("a", D{e("$elemMatch", D{e("$gt", 1)})})}, D{e("a", 3)}, false},
		{"elemMatch dotted", D{e("a.b", D{e("$elemMatch", D{e("$eq", 2)})})}, D{e("a", A{D{e("b", A{1, 2})}})}, true},
		{"elemMatch or", D{e("a", D{e("$elemMatch", D{e("$or", A{D{e("b", 1)}, D{e("c", 1)}})})})}, D{e("a", A{D{e("c", 1)}})}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := CompileFilter(tc.filter)
			if err != nil {
				t.Fatalf("CompileFilter(%v): %v", tc.filter, err)
			}
			if got := mustMatch(t, f, tc.doc); got != tc.want {
				t.Fatalf("Match(%v, %v) = %v, want %v", tc.filter, tc.doc, got, tc.want)
			}
		})
	}
}

// mustMatch is f.Match for filters whose evaluation cannot fail.
func mustMatch(t testing.TB, f *Filter, doc D) bool {
	t.Helper()
	ok, err := f.Match(doc)
	if err != nil {
		t.Fatalf("Match(%v): %v", doc, err)
	}
	return ok
}

func TestNilFilterMatchesAll(t *testing.T) {
	f, err := CompileFilter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !mustMatch(t, f, D{e("x", 1)}) || !mustMatch(t, f, nil) {
		t.Fatal("nil filter must match everything")
	}
	var nf *Filter
	if !mustMatch(t, nf, D{}) {
		t.Fatal("nil *Filter must match everything")
	}
}

func TestCompileFilterErrors(t *testing.T) {
	tests := []struct {
		name   string
		filter D
		code   int32
		msg    string
	}{
		{"unknown top", D{e("$foo", 1)}, mongoerr.BadValue, "unknown top level operator: $foo. If you have a field name that starts with a '$' symbol, consider using $getField or $setField."},
		{"top not", D{e("$not", D{e("a", 1)})}, mongoerr.BadValue, "unknown top level operator: $not. If you are trying to negate an entire expression, use $nor."},
		{"where", D{e("$where", "true")}, mongoerr.NotImplemented, ""},
		{"text", D{e("$text", D{e("$search", "x")})}, mongoerr.NotImplemented, ""},
		{"and empty", D{e("$and", A{})}, mongoerr.BadValue, "$and/$or/$nor must be a nonempty array"},
		{"or empty", D{e("$or", A{})}, mongoerr.BadValue, "$and/$or/$nor must be a nonempty array"},
		{"nor not array", D{e("$nor", D{})}, mongoerr.BadValue, "$nor must be an array"},
		{"and entry", D{e("$and", A{1})}, mongoerr.BadValue, "$or/$and/$nor entries need to be full objects"},
		{"and nested error", D{e("$and", A{D{e("a", D{e("$bitsAnySet", 1)})}})}, mongoerr.NotImplemented, ""},
		{"unknown field op", D{e("a", D{e("$foo", 1)})}, mongoerr.BadValue, "unknown operator: $foo"},
		{"op then field", D{e("a", D{e("$gt", 1), e("b", 1)})}, mongoerr.BadValue, "unknown operator: b"},
		{"type unknown alias", D{e("a", D{e("$type", "str")})}, mongoerr.BadValue, "Unknown type name alias: str"},
		{"type bad number", D{e("a", D{e("$type", 20)})}, mongoerr.BadValue, "Invalid numerical type code: 20"},
		{"type fraction", D{e("a", D{e("$type", 1.5)})}, mongoerr.BadValue, "Invalid numerical type code: 1.5"},
		{"type zero", D{e("a", D{e("$type", 0)})}, mongoerr.BadValue, "Invalid numerical type code: 0"},
		{"type empty array", D{e("a", D{e("$type", A{})})}, mongoerr.FailedToParse, "$type must match at least one type"},
		{"type bool arg", D{e("a", D{e("$type", true)})}, mongoerr.TypeMismatch, "type must be represented as a number or a string"},
		{"type bad in array", D{e("a", D{e("$type", A{"int", "nope"})})}, mongoerr.BadValue, "Unknown type name alias: nope"},
		{"expr without env", D{e("$expr", true)}, mongoerr.NotImplemented, ""},
		{"expr in elemMatch", D{e("a", D{e("$elemMatch", D{e("$expr", true)})})}, mongoerr.BadValue, "$expr can only be applied to the top-level document"},
		{"bits", D{e("a", D{e("$bitsAllSet", 1)})}, mongoerr.NotImplemented, ""},
		{"size not a number", D{e("a", D{e("$size", "1")})}, mongoerr.BadValue, "$size needs a number"},
		{"size negative", D{e("a", D{e("$size", -1)})}, mongoerr.BadValue, "$size may not be negative"},
		{"size fraction", D{e("a", D{e("$size", 1.5)})}, mongoerr.BadValue, "$size must be a whole number"},
		{"all not array", D{e("a", D{e("$all", 1)})}, mongoerr.BadValue, "$all needs an array"},
		{"all mixed elemMatch", D{e("a", D{e("$all", A{D{e("$elemMatch", D{e("b", 1)})}, 1})})}, mongoerr.BadValue, "$all/$elemMatch has to be consistent"},
		{"all operator", D{e("a", D{e("$all", A{D{e("$gt", 1)}})})}, mongoerr.BadValue, "no $ expressions in $all"},
		{"mod not array", D{e("a", D{e("$mod", 2)})}, mongoerr.BadValue, "malformed mod, needs to be an array"},
		{"mod short", D{e("a", D{e("$mod", A{2})})}, mongoerr.BadValue, "malformed mod, not enough elements"},
		{"mod long", D{e("a", D{e("$mod", A{2, 0, 1})})}, mongoerr.BadValue, "malformed mod, too many elements"},
		{"mod zero", D{e("a", D{e("$mod", A{0, 0})})}, mongoerr.BadValue, "divisor cannot be 0"},
		{"mod string", D{e("a", D{e("$mod", A{"2", 0})})}, mongoerr.BadValue, "malformed mod, divisor not a number"},
		{"geo", D{e("a", D{e("$geoWithin", D{})})}, mongoerr.NotImplemented, ""},
		{"in not array", D{e("a", D{e("$in", 1)})}, mongoerr.BadValue, "$in needs an array"},
		{"nin not array", D{e("a", D{e("$nin", 1)})}, mongoerr.BadValue, "$nin needs an array"},
		{"in nested op", D{e("a", D{e("$in", A{D{e("$gt", 1)}})})}, mongoerr.BadValue, "cannot nest $ under $in"},
		{"not empty", D{e("a", D{e("$not", D{})})}, mongoerr.BadValue, "$not cannot be empty"},
		{"not scalar", D{e("a", D{e("$not", 1)})}, mongoerr.BadValue, "$not needs a regex or a document"},
		{"gt regex", D{e("a", D{e("$gt", bson.Regex{Pattern: "x"})})}, mongoerr.BadValue, "Can't have RegEx as arg to predicate over field 'a'."},
		{"ne regex", D{e("a", D{e("$ne", bson.Regex{Pattern: "x"})})}, mongoerr.BadValue, "Can't have regex as arg to $ne."},
		{"options without regex", D{e("a", D{e("$options", "i")})}, mongoerr.BadValue, "$options needs a $regex"},
		{"regex not string", D{e("a", D{e("$regex", 1)})}, mongoerr.BadValue, "$regex has to be a string"},
		{"regex bad flag", D{e("a", D{e("$regex", "x"), e("$options", "q")})}, 51108, "invalid flag in regex options: q"},
		{"regex x flag", D{e("a", D{e("$regex", "x"), e("$options", "x")})}, mongoerr.NotImplemented, ""},
		{"regex lookahead", D{e("a", bson.Regex{Pattern: "a(?=b)"})}, mongoerr.NotImplemented, ""},
		{"regex backreference", D{e("a", bson.Regex{Pattern: `(a)\1`})}, mongoerr.NotImplemented, ""},
		{"elemMatch not doc", D{e("a", D{e("$elemMatch", 1)})}, mongoerr.BadValue, "$elemMatch needs an Object"},
		{"eq undefined", D{e("a", bson.Undefined{})}, mongoerr.BadValue, "cannot compare to undefined"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CompileFilter(tc.filter)
			checkErr(t, err, tc.code, tc.msg)
		})
	}
}

func checkErr(t *testing.T, err error, code int32, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error code %d, got nil", code)
	}
	me := mongoerr.As(err)
	if me.Code != code {
		t.Fatalf("code = %d (%v), want %d", me.Code, err, code)
	}
	if msg != "" && me.Msg != msg {
		t.Fatalf("msg = %q, want %q", me.Msg, msg)
	}
	if code == mongoerr.NotImplemented && me.Msg == "" {
		t.Fatal("NotImplemented must name what is missing")
	}
}
