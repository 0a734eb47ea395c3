package query

import (
	"math"
	"reflect"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

func TestApply(t *testing.T) {
	tests := []struct {
		name    string
		doc     D
		update  D
		insert  bool
		want    D
		changed bool
		updated D
		removed []string
	}{
		{"set existing keeps position", D{e("_id", 1), e("a", int32(1)), e("b", int32(2))}, D{e("$set", D{e("a", int32(5))})}, false,
			D{e("_id", 1), e("a", int32(5)), e("b", int32(2))}, true, D{e("a", int32(5))}, nil},
		{"set new fields appended lexicographically", D{e("_id", 1)}, D{e("$set", D{e("online", int32(3)), e("version", "v"), e("b", true)})}, false,
			D{e("_id", 1), e("b", true), e("online", int32(3)), e("version", "v")}, true, D{e("b", true), e("online", int32(3)), e("version", "v")}, nil},
		{"set across operators ordered", D{e("_id", 1)}, D{e("$set", D{e("z", int32(1))}), e("$inc", D{e("a", int32(1))})}, false,
			D{e("_id", 1), e("a", int32(1)), e("z", int32(1))}, true, D{e("a", int32(1)), e("z", int32(1))}, nil},
		{"set same value no-op", D{e("_id", 1), e("a", int32(1))}, D{e("$set", D{e("a", int32(1))})}, false,
			D{e("_id", 1), e("a", int32(1))}, false, nil, nil},
		{"set other numeric type changes", D{e("_id", 1), e("a", int32(1))}, D{e("$set", D{e("a", 1.0)})}, false,
			D{e("_id", 1), e("a", 1.0)}, true, D{e("a", 1.0)}, nil},
		{"set dotted existing", D{e("_id", 1), e("a", D{e("b", int32(1)), e("c", int32(2))})}, D{e("$set", D{e("a.b", int32(9))})}, false,
			D{e("_id", 1), e("a", D{e("b", int32(9)), e("c", int32(2))})}, true, D{e("a.b", int32(9))}, nil},
		{"set dotted new leaf", D{e("_id", 1), e("a", D{e("c", int32(2))})}, D{e("$set", D{e("a.b", int32(9))})}, false,
			D{e("_id", 1), e("a", D{e("c", int32(2)), e("b", int32(9))})}, true, D{e("a.b", int32(9))}, nil},
		{"set dotted creates docs", D{e("_id", 1)}, D{e("$set", D{e("a.c", int32(2)), e("a.b.x", int32(1))})}, false,
			D{e("_id", 1), e("a", D{e("b", D{e("x", int32(1))}), e("c", int32(2))})}, true, D{e("a", D{e("b", D{e("x", int32(1))}), e("c", int32(2))})}, nil},
		{"set numeric path missing creates field", D{e("_id", 1)}, D{e("$set", D{e("a.0", int32(1))})}, false,
			D{e("_id", 1), e("a", D{e("0", int32(1))})}, true, D{e("a", D{e("0", int32(1))})}, nil},
		{"set array index", D{e("_id", 1), e("a", A{int32(1), int32(2)})}, D{e("$set", D{e("a.1", int32(5))})}, false,
			D{e("_id", 1), e("a", A{int32(1), int32(5)})}, true, D{e("a.1", int32(5))}, nil},
		{"set array index pads", D{e("_id", 1), e("a", A{int32(1)})}, D{e("$set", D{e("a.3", int32(5))})}, false,
			D{e("_id", 1), e("a", A{int32(1), nil, nil, int32(5)})}, true, D{e("a.1", nil), e("a.2", nil), e("a.3", int32(5))}, nil},
		{"set array element field", D{e("_id", 1), e("a", A{D{e("b", int32(1))}, D{e("b", int32(2))}})}, D{e("$set", D{e("a.1.b", int32(7))})}, false,
			D{e("_id", 1), e("a", A{D{e("b", int32(1))}, D{e("b", int32(7))}})}, true, D{e("a.1.b", int32(7))}, nil},
		{"set numeric order of indexes", D{e("_id", 1), e("a", A{})}, D{e("$set", D{e("a.10", int32(10)), e("a.2", int32(2))})}, false,
			D{e("_id", 1), e("a", A{nil, nil, int32(2), nil, nil, nil, nil, nil, nil, nil, int32(10)})}, true, nil, nil},
		{"setOnInsert ignored on update", D{e("_id", 1)}, D{e("$setOnInsert", D{e("a", int32(1))})}, false,
			D{e("_id", 1)}, false, nil, nil},
		{"setOnInsert on insert", D{e("_id", 1), e("id", "x")}, D{e("$set", D{e("b", int32(2))}), e("$setOnInsert", D{e("a", int32(1))})}, true,
			D{e("_id", 1), e("id", "x"), e("a", int32(1)), e("b", int32(2))}, true, D{e("a", int32(1)), e("b", int32(2))}, nil},
		{"insert moves _id first", D{e("x", int32(1))}, D{e("$set", D{e("_id", int32(7))})}, true,
			D{e("_id", int32(7)), e("x", int32(1))}, true, D{e("_id", int32(7))}, nil},
		{"set _id same value", D{e("_id", int32(1)), e("a", int32(1))}, D{e("$set", D{e("_id", int32(1)), e("a", int32(2))})}, false,
			D{e("_id", int32(1)), e("a", int32(2))}, true, D{e("a", int32(2))}, nil},

		{"unset", D{e("_id", 1), e("a", int32(1)), e("b", int32(2))}, D{e("$unset", D{e("a", "")})}, false,
			D{e("_id", 1), e("b", int32(2))}, true, nil, []string{"a"}},
		{"unset missing no-op", D{e("_id", 1)}, D{e("$unset", D{e("a", 1), e("b.c", 1)})}, false,
			D{e("_id", 1)}, false, nil, nil},
		{"unset dotted", D{e("_id", 1), e("a", D{e("b", 1), e("c", 2)})}, D{e("$unset", D{e("a.b", 1)})}, false,
			D{e("_id", 1), e("a", D{e("c", 2)})}, true, nil, []string{"a.b"}},
		{"unset through scalar no-op", D{e("_id", 1), e("a", 5)}, D{e("$unset", D{e("a.b", 1)})}, false,
			D{e("_id", 1), e("a", 5)}, false, nil, nil},
		{"unset array element nulls", D{e("_id", 1), e("a", A{1, 2})}, D{e("$unset", D{e("a.0", 1)})}, false,
			D{e("_id", 1), e("a", A{nil, 2})}, true, D{e("a.0", nil)}, nil},

		{"inc int32", D{e("_id", 1), e("n", int32(41))}, D{e("$inc", D{e("n", int32(1))})}, false,
			D{e("_id", 1), e("n", int32(42))}, true, D{e("n", int32(42))}, nil},
		{"inc int32 overflow to int64", D{e("_id", 1), e("n", int32(math.MaxInt32))}, D{e("$inc", D{e("n", int32(1))})}, false,
			D{e("_id", 1), e("n", int64(math.MaxInt32)+1)}, true, D{e("n", int64(math.MaxInt32)+1)}, nil},
		{"inc int32 by int64", D{e("_id", 1), e("n", int32(1))}, D{e("$inc", D{e("n", int64(1))})}, false,
			D{e("_id", 1), e("n", int64(2))}, true, D{e("n", int64(2))}, nil},
		{"inc int by double", D{e("_id", 1), e("n", int32(1))}, D{e("$inc", D{e("n", 0.5)})}, false,
			D{e("_id", 1), e("n", 1.5)}, true, D{e("n", 1.5)}, nil},
		{"inc double by int", D{e("_id", 1), e("n", 1.5)}, D{e("$inc", D{e("n", int32(1))})}, false,
			D{e("_id", 1), e("n", 2.5)}, true, D{e("n", 2.5)}, nil},
		{"inc missing", D{e("_id", 1)}, D{e("$inc", D{e("n", int64(3))})}, false,
			D{e("_id", 1), e("n", int64(3))}, true, D{e("n", int64(3))}, nil},
		{"inc zero no-op", D{e("_id", 1), e("n", int32(3))}, D{e("$inc", D{e("n", int32(0))})}, false,
			D{e("_id", 1), e("n", int32(3))}, false, nil, nil},
		{"inc double zero on int changes type", D{e("_id", 1), e("n", int32(3))}, D{e("$inc", D{e("n", 0.0)})}, false,
			D{e("_id", 1), e("n", 3.0)}, true, D{e("n", 3.0)}, nil},
		{"inc Go int literal", D{e("_id", 1), e("n", int32(3))}, D{e("$inc", D{e("n", 2)})}, false,
			D{e("_id", 1), e("n", int32(5))}, true, D{e("n", int32(5))}, nil},

		{"min lower", D{e("_id", 1), e("n", int32(5))}, D{e("$min", D{e("n", int32(3))})}, false,
			D{e("_id", 1), e("n", int32(3))}, true, D{e("n", int32(3))}, nil},
		{"min higher no-op", D{e("_id", 1), e("n", int32(5))}, D{e("$min", D{e("n", int32(7))})}, false,
			D{e("_id", 1), e("n", int32(5))}, false, nil, nil},
		{"min equal other type no-op", D{e("_id", 1), e("n", int32(5))}, D{e("$min", D{e("n", 5.0)})}, false,
			D{e("_id", 1), e("n", int32(5))}, false, nil, nil},
		{"min cross type null lower", D{e("_id", 1), e("n", int32(5))}, D{e("$min", D{e("n", nil)})}, false,
			D{e("_id", 1), e("n", nil)}, true, D{e("n", nil)}, nil},
		{"max higher", D{e("_id", 1), e("n", int32(5))}, D{e("$max", D{e("n", int64(9))})}, false,
			D{e("_id", 1), e("n", int64(9))}, true, D{e("n", int64(9))}, nil},
		{"max string above numbers", D{e("_id", 1), e("n", int32(5))}, D{e("$max", D{e("n", "a")})}, false,
			D{e("_id", 1), e("n", "a")}, true, D{e("n", "a")}, nil},
		{"max missing", D{e("_id", 1)}, D{e("$max", D{e("n", int32(1))})}, false,
			D{e("_id", 1), e("n", int32(1))}, true, D{e("n", int32(1))}, nil},

		{"push existing", D{e("_id", 1), e("a", A{int32(1)})}, D{e("$push", D{e("a", int32(2))})}, false,
			D{e("_id", 1), e("a", A{int32(1), int32(2)})}, true, D{e("a.1", int32(2))}, nil},
		{"push missing", D{e("_id", 1)}, D{e("$push", D{e("a", int32(2))})}, false,
			D{e("_id", 1), e("a", A{int32(2)})}, true, D{e("a", A{int32(2)})}, nil},
		{"push each", D{e("_id", 1), e("a", A{})}, D{e("$push", D{e("a", D{e("$each", A{int32(1), int32(1)})})})}, false,
			D{e("_id", 1), e("a", A{int32(1), int32(1)})}, true, D{e("a.0", int32(1)), e("a.1", int32(1))}, nil},
		{"push each empty no-op", D{e("_id", 1), e("a", A{})}, D{e("$push", D{e("a", D{e("$each", A{})})})}, false,
			D{e("_id", 1), e("a", A{})}, false, nil, nil},
		{"push doc value", D{e("_id", 1), e("a", A{})}, D{e("$push", D{e("a", D{e("x", int32(1))})})}, false,
			D{e("_id", 1), e("a", A{D{e("x", int32(1))}})}, true, D{e("a.0", D{e("x", int32(1))})}, nil},
		{"push array value", D{e("_id", 1), e("a", A{})}, D{e("$push", D{e("a", A{int32(1)})})}, false,
			D{e("_id", 1), e("a", A{A{int32(1)}})}, true, D{e("a.0", A{int32(1)})}, nil},
		{"addToSet new", D{e("_id", 1), e("a", A{int32(1)})}, D{e("$addToSet", D{e("a", int32(2))})}, false,
			D{e("_id", 1), e("a", A{int32(1), int32(2)})}, true, D{e("a.1", int32(2))}, nil},
		{"addToSet present numeric equal", D{e("_id", 1), e("a", A{int32(1)})}, D{e("$addToSet", D{e("a", 1.0)})}, false,
			D{e("_id", 1), e("a", A{int32(1)})}, false, nil, nil},
		{"addToSet each dedup", D{e("_id", 1), e("a", A{int32(1)})}, D{e("$addToSet", D{e("a", D{e("$each", A{int32(1), int32(2), int32(2), int32(3)})})})}, false,
			D{e("_id", 1), e("a", A{int32(1), int32(2), int32(3)})}, true, D{e("a.1", int32(2)), e("a.2", int32(3))}, nil},
		{"addToSet missing", D{e("_id", 1)}, D{e("$addToSet", D{e("a", D{e("$each", A{"x", "x"})})})}, false,
			D{e("_id", 1), e("a", A{"x"})}, true, D{e("a", A{"x"})}, nil},
		{"pull value", D{e("_id", 1), e("a", A{int32(1), int32(2), 1.0})}, D{e("$pull", D{e("a", int32(1))})}, false,
			D{e("_id", 1), e("a", A{int32(2)})}, true, D{e("a", A{int32(2)})}, nil},
		{"pull condition", D{e("_id", 1), e("a", A{int32(1), int32(6), int32(9), "x"})}, D{e("$pull", D{e("a", D{e("$gte", int32(6))})})}, false,
			D{e("_id", 1), e("a", A{int32(1), "x"})}, true, D{e("a", A{int32(1), "x"})}, nil},
		{"pull doc query", D{e("_id", 1), e("a", A{D{e("s", 8), e("i", "B")}, D{e("s", 8), e("i", "C")}, 8})}, D{e("$pull", D{e("a", D{e("s", 8), e("i", "B")})})}, false,
			D{e("_id", 1), e("a", A{D{e("s", 8), e("i", "C")}, 8})}, true, D{e("a", A{D{e("s", 8), e("i", "C")}, 8})}, nil},
		{"pull none no-op", D{e("_id", 1), e("a", A{int32(1)})}, D{e("$pull", D{e("a", int32(5))})}, false,
			D{e("_id", 1), e("a", A{int32(1)})}, false, nil, nil},
		{"pull missing no-op", D{e("_id", 1)}, D{e("$pull", D{e("a", int32(5))})}, false,
			D{e("_id", 1)}, false, nil, nil},

		{"replacement", D{e("_id", 1), e("a", 1)}, D{e("b", int32(2)), e("c", int32(3))}, false,
			D{e("_id", 1), e("b", int32(2)), e("c", int32(3))}, true, nil, nil},
		{"replacement same _id later", D{e("_id", int32(1)), e("a", 1)}, D{e("b", int32(2)), e("_id", int32(1))}, false,
			D{e("_id", int32(1)), e("b", int32(2))}, true, nil, nil},
		{"replacement identical", D{e("_id", int32(1)), e("a", int32(1))}, D{e("a", int32(1))}, false,
			D{e("_id", int32(1)), e("a", int32(1))}, false, nil, nil},
		{"replacement empty", D{e("_id", int32(1)), e("a", int32(1))}, D{}, false,
			D{e("_id", int32(1))}, true, nil, nil},
		{"replacement insert without seed id", D{}, D{e("a", int32(1)), e("_id", int32(4))}, true,
			D{e("_id", int32(4)), e("a", int32(1))}, true, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := CompileUpdate(tc.update)
			if err != nil {
				t.Fatalf("CompileUpdate: %v", err)
			}
			before := bsonval.CloneDoc(tc.doc)
			out, desc, changed, err := u.Apply(tc.doc, tc.insert)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if !reflect.DeepEqual(tc.doc, before) {
				t.Fatalf("Apply mutated its input: %v, was %v", tc.doc, before)
			}
			if !strictEqual(out, tc.want) {
				t.Fatalf("out = %v, want %v", out, tc.want)
			}
			if changed != tc.changed {
				t.Fatalf("changed = %v, want %v", changed, tc.changed)
			}
			if tc.updated != nil && !strictEqual(desc.UpdatedFields, tc.updated) {
				t.Fatalf("UpdatedFields = %v, want %v", desc.UpdatedFields, tc.updated)
			}
			if tc.updated == nil && len(desc.UpdatedFields) != 0 && tc.name != "set numeric order of indexes" {
				t.Fatalf("UpdatedFields = %v, want none", desc.UpdatedFields)
			}
			if !reflect.DeepEqual(desc.RemovedFields, tc.removed) {
				t.Fatalf("RemovedFields = %v, want %v", desc.RemovedFields, tc.removed)
			}
			if u.IsReplacement() != (len(tc.update) == 0 || tc.update[0].Key[0] != '$') {
				t.Fatal("IsReplacement mismatch")
			}
		})
	}
}

func TestApplyDoesNotAliasInput(t *testing.T) {
	inner := make(A, 1, 4) // spare capacity: an in-place append would be visible
	inner[0] = int32(1)
	doc := D{e("_id", 1), e("a", inner), e("s", D{e("x", 1)})}
	u, err := CompileUpdate(D{e("$push", D{e("a", int32(2))}), e("$set", D{e("s.y", 2)})})
	if err != nil {
		t.Fatal(err)
	}
	out1, _, _, err := u.Apply(doc, false)
	if err != nil {
		t.Fatal(err)
	}
	out2, _, _, err := u.Apply(doc, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strictEqual(out1, out2) {
		t.Fatalf("applies differ: %v vs %v", out1, out2)
	}
	if len(doc[1].Value.(A)) != 1 || len(doc[2].Value.(D)) != 1 {
		t.Fatalf("input mutated: %v", doc)
	}
	// Mutating the output must not reach the input either.
	out1[2].Value.(D)[0].Value = "changed"
	if doc[2].Value.(D)[0].Value != 1 {
		t.Fatal("output shares a modified sub-document with the input")
	}
}

func TestApplyErrors(t *testing.T) {
	oid := bson.ObjectID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	tests := []struct {
		name   string
		doc    D
		update D
		insert bool
		code   int32
		msg    string
	}{
		{"inc string", D{e("_id", "string"), e("x", "foo")}, D{e("$inc", D{e("x", int32(1))})}, false, mongoerr.TypeMismatch,
			`Cannot apply $inc to a value of non-numeric type. {_id: "string"} has the field 'x' of non-numeric type string`},
		{"inc object id", D{e("_id", oid), e("x", D{})}, D{e("$inc", D{e("x", int32(1))})}, false, mongoerr.TypeMismatch,
			`Cannot apply $inc to a value of non-numeric type. {_id: ObjectId('0102030405060708090a0b0c')} has the field 'x' of non-numeric type object`},
		{"inc null", D{e("_id", int32(1)), e("x", nil)}, D{e("$inc", D{e("x", int32(1))})}, false, mongoerr.TypeMismatch,
			`Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'x' of non-numeric type null`},
		{"inc int64 overflow", D{e("_id", int32(1)), e("x", int64(math.MaxInt64))}, D{e("$inc", D{e("x", int32(1))})}, false, mongoerr.BadValue,
			`Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) for document {_id: 1}`},
		{"set through scalar", D{e("_id", int32(1)), e("a", int32(5))}, D{e("$set", D{e("a.b", int32(1))})}, false, PathNotViable,
			"Cannot create field 'b' in element {a: 5}"},
		{"set through array", D{e("_id", int32(1)), e("a", A{int32(1), int32(2)})}, D{e("$set", D{e("a.b", int32(1))})}, false, PathNotViable,
			"Cannot create field 'b' in element {a: [ 1, 2 ]}"},
		{"set through null", D{e("_id", int32(1)), e("a", nil)}, D{e("$set", D{e("a.b", int32(1))})}, false, PathNotViable,
			"Cannot create field 'b' in element {a: null}"},
		{"set _id", D{e("_id", int32(1))}, D{e("$set", D{e("_id", int32(2))})}, false, mongoerr.ImmutableField,
			"Performing an update on the path '_id' would modify the immutable field '_id'"},
		{"set _id other type", D{e("_id", int32(1))}, D{e("$set", D{e("_id", 1.0)})}, false, mongoerr.ImmutableField,
			"Performing an update on the path '_id' would modify the immutable field '_id'"},
		{"set _id on upsert seed", D{e("_id", int32(1))}, D{e("$set", D{e("_id", int32(2))})}, true, mongoerr.ImmutableField,
			"Performing an update on the path '_id' would modify the immutable field '_id'"},
		{"set _id sub path", D{e("_id", D{e("a", 1)})}, D{e("$set", D{e("_id.a", int32(2))})}, false, mongoerr.ImmutableField,
			"Performing an update on the path '_id.a' would modify the immutable field '_id'"},
		{"unset _id", D{e("_id", int32(1))}, D{e("$unset", D{e("_id", 1)})}, false, mongoerr.ImmutableField,
			"Performing an update on the path '_id' would modify the immutable field '_id'"},
		{"replace _id", D{e("_id", int32(1))}, D{e("_id", int32(2)), e("a", 1)}, false, mongoerr.ImmutableField,
			"After applying the update, the (immutable) field '_id' was found to have been altered to _id: 2"},
		{"push non-array", D{e("_id", int32(1)), e("a", "x")}, D{e("$push", D{e("a", 1)})}, false, mongoerr.BadValue,
			"The field 'a' must be an array but is of type string in document {_id: 1}"},
		{"addToSet non-array", D{e("_id", int32(1)), e("a", int32(1))}, D{e("$addToSet", D{e("a", 1)})}, false, mongoerr.BadValue,
			"Cannot apply $addToSet to non-array field. Field named 'a' has non-array type int"},
		{"pull non-array", D{e("_id", int32(1)), e("a", int32(1))}, D{e("$pull", D{e("a", 1)})}, false, mongoerr.BadValue,
			"Cannot apply $pull to a non-array value"},
		{"pad too far", D{e("_id", int32(1)), e("a", A{})}, D{e("$set", D{e("a.2000000", 1)})}, false, mongoerr.BadValue, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := CompileUpdate(tc.update)
			if err != nil {
				t.Fatalf("CompileUpdate: %v", err)
			}
			_, _, _, err = u.Apply(tc.doc, tc.insert)
			checkErr(t, err, tc.code, tc.msg)
		})
	}
}

func TestCompileUpdateErrors(t *testing.T) {
	tests := []struct {
		name   string
		update D
		code   int32
		msg    string
	}{
		{"unknown", D{e("$foo", D{e("a", 1)})}, mongoerr.FailedToParse,
			"Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update specified as an array"},
		{"mixed op first", D{e("$set", D{e("a", 1)}), e("b", 1)}, mongoerr.FailedToParse,
			"Unknown modifier: b. Expected a valid update modifier or pipeline-style update specified as an array"},
		{"mixed replacement first", D{e("b", 1), e("$set", D{e("a", 1)})}, mongoerr.DollarPrefixedFieldName, ""},
		{"rename", D{e("$rename", D{e("a", "b")})}, mongoerr.NotImplemented, ""},
		{"mul", D{e("$mul", D{e("a", 2)})}, mongoerr.NotImplemented, ""},
		{"currentDate bad type", D{e("$currentDate", D{e("a", D{e("$type", "int")})})}, mongoerr.BadValue,
			"The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}"},
		{"currentDate bad option", D{e("$currentDate", D{e("a", D{e("x", "date")})})}, mongoerr.BadValue,
			"The only valid field of the option is '$type': {$currentDate: {field : {$type: 'date/timestamp'}}}"},
		{"currentDate number", D{e("$currentDate", D{e("a", 1)})}, mongoerr.BadValue,
			"int is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({$type: 'timestamp/date'})."},
		{"pop", D{e("$pop", D{e("a", 1)})}, mongoerr.NotImplemented, ""},
		{"pullAll", D{e("$pullAll", D{e("a", A{1})})}, mongoerr.NotImplemented, ""},
		{"bit", D{e("$bit", D{e("a", D{e("and", 1)})})}, mongoerr.NotImplemented, ""},
		{"push slice", D{e("$push", D{e("a", D{e("$each", A{1}), e("$slice", 1)})})}, mongoerr.NotImplemented, ""},
		{"push sort", D{e("$push", D{e("a", D{e("$each", A{1}), e("$sort", 1)})})}, mongoerr.NotImplemented, ""},
		{"push position", D{e("$push", D{e("a", D{e("$each", A{1}), e("$position", 0)})})}, mongoerr.NotImplemented, ""},
		{"push each not array", D{e("$push", D{e("a", D{e("$each", 1)})})}, mongoerr.BadValue,
			"The argument to $each in $push must be an array but it was of type: int"},
		{"push bad clause", D{e("$push", D{e("a", D{e("$each", A{}), e("$foo", 1)})})}, mongoerr.BadValue, "Unrecognized clause in $push: $foo"},
		{"filtered positional without filter", D{e("$set", D{e("a.$[x]", 1)})}, mongoerr.BadValue,
			"No array filter found for identifier 'x' in path 'a.$[x]'"},
		{"placeholder and field at one level", D{e("$set", D{e("a.$[].b", 1), e("a.0", 2)})}, mongoerr.ConflictingUpdateOps,
			"Updating the path 'a.0' would create a conflict at 'a'"},
		{"same placeholder path twice", D{e("$set", D{e("a.$[].b", 1)}), e("$inc", D{e("a.$[].b", 1)})}, mongoerr.ConflictingUpdateOps, ""},
		{"conflict prefix", D{e("$set", D{e("a", 1), e("a.b", 2)})}, mongoerr.ConflictingUpdateOps,
			"Updating the path 'a.b' would create a conflict at 'a'"},
		{"conflict prefix reversed", D{e("$set", D{e("a.b", 1)}), e("$unset", D{e("a", 1)})}, mongoerr.ConflictingUpdateOps,
			"Updating the path 'a' would create a conflict at 'a'"},
		{"conflict same path", D{e("$set", D{e("a", 1)}), e("$inc", D{e("a", 1)})}, mongoerr.ConflictingUpdateOps,
			"Updating the path 'a' would create a conflict at 'a'"},
		{"conflict deep", D{e("$set", D{e("a.b", 1), e("a.b.c.d", 1)})}, mongoerr.ConflictingUpdateOps,
			"Updating the path 'a.b.c.d' would create a conflict at 'a.b'"},
		{"not a document", D{e("$inc", "string")}, mongoerr.FailedToParse,
			`Modifiers operate on fields but we found type string instead. For example: {$mod: {<field>: ...}} not {$inc: "string"}`},
		{"inc non-numeric", D{e("$inc", D{e("value", "bad value")})}, mongoerr.TypeMismatch,
			`Cannot increment with non-numeric argument: {value: "bad value"}`},
		{"empty path", D{e("$set", D{e("", 1)})}, EmptyFieldName, "An empty update path is not valid."},
		{"empty component", D{e("$set", D{e("a..b", 1)})}, EmptyFieldName,
			"The update path 'a..b' contains an empty field name, which is not allowed."},
		{"dollar field", D{e("$set", D{e("a.$x", 1)})}, mongoerr.DollarPrefixedFieldName, ""},
		{"replacement dollar", D{e("a", 1), e("$x", 1)}, mongoerr.DollarPrefixedFieldName, ""},
		{"pull regex", D{e("$pull", D{e("a", bson.Regex{Pattern: "x"})})}, mongoerr.NotImplemented, ""},
		{"pull bad condition", D{e("$pull", D{e("a", D{e("$bitsAllSet", 1)})})}, mongoerr.NotImplemented, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CompileUpdate(tc.update)
			checkErr(t, err, tc.code, tc.msg)
		})
	}
}

func TestArrayFilterUpdates(t *testing.T) {
	doc := D{e("_id", int32(1)), e("y", A{D{e("b", int32(3))}, D{e("b", int32(1))}, D{e("b", int32(3)), e("c", A{D{e("d", int32(1))}, D{e("d", int32(2))}})}}), e("n", A{int32(1), int32(5), int32(9)})}
	tests := []struct {
		name    string
		update  D
		filters A
		want    D
		updated D
		changed bool
	}{
		{"all positional leaf", D{e("$inc", D{e("n.$[]", int32(1))})}, nil,
			D{e("_id", int32(1)), e("y", get(doc, "y")), e("n", A{int32(2), int32(6), int32(10)})},
			D{e("n.0", int32(2)), e("n.1", int32(6)), e("n.2", int32(10))}, true},
		{"filtered by value", D{e("$set", D{e("n.$[big]", int32(0))})}, A{D{e("big", D{e("$gt", int32(4))})}},
			D{e("_id", int32(1)), e("y", get(doc, "y")), e("n", A{int32(1), int32(0), int32(0)})},
			D{e("n.1", int32(0)), e("n.2", int32(0))}, true},
		{"filtered by subfield", D{e("$set", D{e("y.$[i].b", int32(2))})}, A{D{e("i.b", int32(3))}},
			D{e("_id", int32(1)), e("y", A{D{e("b", int32(2))}, D{e("b", int32(1))}, D{e("b", int32(2)), e("c", get(doc, "y.2.c"))}}), e("n", get(doc, "n"))},
			D{e("y.0.b", int32(2)), e("y.2.b", int32(2))}, true},
		{"nested filters", D{e("$set", D{e("y.$[i].c.$[j].d", int32(7))})}, A{D{e("i.c", D{e("$exists", true)})}, D{e("j.d", int32(2))}},
			D{e("_id", int32(1)), e("y", A{D{e("b", int32(3))}, D{e("b", int32(1))}, D{e("b", int32(3)), e("c", A{D{e("d", int32(1))}, D{e("d", int32(7))}})}}), e("n", get(doc, "n"))},
			D{e("y.2.c.1.d", int32(7))}, true},
		{"no element matches", D{e("$set", D{e("n.$[x]", int32(0))})}, A{D{e("x", int32(100))}},
			doc, nil, false},
		{"two placeholders on one element merge", D{e("$set", D{e("y.$[i].e", int32(1)), e("y.$[j].f", int32(2))})}, A{D{e("i.b", int32(1))}, D{e("j.b", D{e("$lt", int32(2))})}},
			D{e("_id", int32(1)), e("y", A{D{e("b", int32(3))}, D{e("b", int32(1)), e("e", int32(1)), e("f", int32(2))}, get(doc, "y.2")}), e("n", get(doc, "n"))},
			D{e("y.1.e", int32(1)), e("y.1.f", int32(2))}, true},
		{"or filter", D{e("$set", D{e("n.$[x]", int32(0))})}, A{D{e("$or", A{D{e("x", int32(1))}, D{e("x", int32(9))}})}},
			D{e("_id", int32(1)), e("y", get(doc, "y")), e("n", A{int32(0), int32(5), int32(0)})},
			D{e("n.0", int32(0)), e("n.2", int32(0))}, true},
		{"unset element leaves null", D{e("$unset", D{e("n.$[x]", "")})}, A{D{e("x", int32(5))}},
			D{e("_id", int32(1)), e("y", get(doc, "y")), e("n", A{int32(1), nil, int32(9)})},
			D{e("n.1", nil)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := CompileUpdateEnv(tc.update, tc.filters, nil)
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			out, desc, changed, err := u.Apply(doc, false)
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			if !strictEqual(out, tc.want) || changed != tc.changed {
				t.Fatalf("Apply = %v (changed %v), want %v (changed %v)", out, changed, tc.want, tc.changed)
			}
			if formatValue(desc.UpdatedFields) != formatValue(tc.updated) {
				t.Fatalf("updated fields %v, want %v", desc.UpdatedFields, tc.updated)
			}
		})
	}
}

func TestArrayFilterErrors(t *testing.T) {
	tests := []struct {
		name    string
		doc     D
		update  D
		filters A
		code    int32
		msg     string
		insert  bool
	}{
		{"unused filter", nil, D{e("$set", D{e("a", 1)})}, A{D{e("x", 1)}}, mongoerr.FailedToParse,
			"The array filter for identifier 'x' was not used in the update { $set: { a: 1 } }", false},
		{"duplicate identifier", nil, D{e("$set", D{e("a.$[x]", 1)})}, A{D{e("x", 1)}, D{e("x", 2)}}, mongoerr.FailedToParse,
			"Found multiple array filters with the same top-level field name x", false},
		{"two identifiers in one filter", nil, D{e("$set", D{e("a.$[x]", 1)})}, A{D{e("x", 1), e("y", 2)}}, mongoerr.FailedToParse, "", false},
		{"uppercase identifier", nil, D{e("$set", D{e("a.$[X]", 1)})}, A{D{e("X", 1)}}, mongoerr.BadValue, "", false},
		{"empty filter", nil, D{e("$set", D{e("a.$[x]", 1)})}, A{D{}}, mongoerr.FailedToParse, "", false},
		{"expr in filter", nil, D{e("$set", D{e("a.$[x]", 1)})}, A{D{e("x", 1), e("$expr", true)}}, 224, "", false},
		{"filter not a document", nil, D{e("$set", D{e("a.$[x]", 1)})}, A{1}, mongoerr.TypeMismatch, "", false},
		{"replacement with filters", nil, D{e("a", 1)}, A{D{e("x", 1)}}, mongoerr.FailedToParse, "", false},
		{"missing array", D{e("_id", 1)}, D{e("$set", D{e("a.$[]", 1)})}, nil, mongoerr.BadValue,
			"The path 'a' must exist in the document in order to apply array updates.", false},
		{"missing array on upsert", D{e("_id", 1)}, D{e("$set", D{e("a.$[]", 1)})}, nil, mongoerr.BadValue, "", true},
		{"not an array", D{e("_id", 1), e("a", int32(5))}, D{e("$set", D{e("a.$[]", 1)})}, nil, mongoerr.BadValue,
			"Cannot apply array updates to non-array element a: 5", false},
		{"merge conflict", D{e("_id", 1), e("a", A{int32(1)})}, D{e("$set", D{e("a.$[x]", 1), e("a.$[y]", 2)})}, A{D{e("x", 1)}, D{e("y", 1)}},
			mongoerr.ConflictingUpdateOps, "Update created a conflict at 'a.0'", false},
		{"create field in scalar element", D{e("_id", 1), e("a", A{int32(1)})}, D{e("$set", D{e("a.$[].b", 1)})}, nil, PathNotViable, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := CompileUpdateEnv(tc.update, tc.filters, nil)
			if err == nil {
				_, _, _, err = u.Apply(tc.doc, tc.insert)
			}
			checkErr(t, err, tc.code, tc.msg)
		})
	}
}

func TestCurrentDate(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_500)
	env := &Env{Now: now, ClusterTime: bson.Timestamp{T: 1_700_000_000, I: 3}}
	u, err := CompileUpdateEnv(D{e("$currentDate", D{e("a", true), e("b", D{e("$type", "timestamp")}), e("c.d", D{e("$type", "date")}), e("f", false)})}, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	out, _, changed, err := u.Apply(D{e("_id", 1), e("a", "old")}, false)
	if err != nil || !changed {
		t.Fatalf("apply: %v changed=%v", err, changed)
	}
	date := bson.NewDateTimeFromTime(now)
	want := D{e("_id", 1), e("a", date), e("b", env.ClusterTime), e("c", D{e("d", date)}), e("f", date)}
	if !strictEqual(out, want) {
		t.Fatalf("got %v, want %v", out, want)
	}
	// Without an Env the clock is read at compile time.
	before := time.Now().Add(-time.Second)
	u, err = CompileUpdate(D{e("$currentDate", D{e("a", true)})})
	if err != nil {
		t.Fatal(err)
	}
	out, _, _, _ = u.Apply(D{e("_id", 1)}, false)
	if got, ok := get(out, "a").(bson.DateTime); !ok || got.Time().Before(before) {
		t.Fatalf("a = %v, want a recent date", get(out, "a"))
	}
}

func TestEmptyOperatorIsNoop(t *testing.T) {
	u, err := CompileUpdate(D{e("$set", D{})})
	if err != nil {
		t.Fatal(err)
	}
	doc := D{e("_id", 1), e("a", 1)}
	out, _, changed, err := u.Apply(doc, false)
	if err != nil || changed || !strictEqual(out, doc) {
		t.Fatalf("got %v %v %v", out, changed, err)
	}
}

// get returns the value at a dotted path of d, following array positions (nil when absent).
func get(d D, path string) any {
	var cur any = d
	for _, part := range splitPath(path) {
		switch x := cur.(type) {
		case D:
			v, ok := getField(x, part)
			if !ok {
				return nil
			}
			cur = v
		case A:
			i, ok := parseIndex(part)
			if !ok || i >= len(x) {
				return nil
			}
			cur = x[i]
		default:
			return nil
		}
	}
	return cur
}

func TestPositionalUpdates(t *testing.T) {
	grades := D{e("_id", int32(1)), e("grades", A{int32(80), int32(85), int32(90)}),
		e("docs", A{D{e("grade", int32(80)), e("mean", int32(75))}, D{e("grade", int32(85)), e("mean", int32(90))}, D{e("grade", int32(85)), e("mean", int32(85))}})}
	tests := []struct {
		name   string
		filter D
		update D
		path   string
		want   any
		code   int32
	}{
		{"scalar element", D{e("grades", int32(85))}, D{e("$set", D{e("grades.$", int32(82))})}, "grades", A{int32(80), int32(82), int32(90)}, 0},
		{"range picks the first matching element", D{e("grades", D{e("$gte", int32(85))})}, D{e("$inc", D{e("grades.$", int32(1))})}, "grades", A{int32(80), int32(86), int32(90)}, 0},
		{"dotted through documents", D{e("docs.grade", int32(85))}, D{e("$set", D{e("docs.$.std", int32(6))})}, "docs.1.std", int32(6), 0},
		{"elemMatch", D{e("docs", D{e("$elemMatch", D{e("grade", D{e("$lte", int32(90))}), e("mean", D{e("$gt", int32(86))})})})}, D{e("$set", D{e("docs.$.std", int32(18))})}, "docs.1.std", int32(18), 0},
		{"elemMatch on values", D{e("grades", D{e("$elemMatch", D{e("$gt", int32(86))})})}, D{e("$set", D{e("grades.$", int32(0))})}, "grades", A{int32(80), int32(85), int32(0)}, 0},
		{"with other conditions", D{e("_id", int32(1)), e("grades", int32(90))}, D{e("$set", D{e("grades.$", int32(0))})}, "grades", A{int32(80), int32(85), int32(0)}, 0},
		{"no array in the query", D{e("_id", int32(1))}, D{e("$set", D{e("grades.$", int32(0))})}, "", nil, mongoerr.BadValue},
		{"whole array equality has no position", D{e("grades", A{int32(80), int32(85), int32(90)})}, D{e("$set", D{e("grades.$", int32(0))})}, "", nil, mongoerr.BadValue},
		{"or has no position", D{e("$or", A{D{e("grades", int32(85))}})}, D{e("$set", D{e("grades.$", int32(0))})}, "", nil, mongoerr.BadValue},
		{"conflict with a literal index", D{e("grades", int32(80))}, D{e("$set", D{e("grades.$", int32(1)), e("grades.0", int32(2))})}, "", nil, mongoerr.ConflictingUpdateOps},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := CompileFilter(tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			ok, pos, err := f.MatchPosition(grades)
			if err != nil || !ok {
				t.Fatalf("MatchPosition = %v, %v", ok, err)
			}
			u, err := CompileUpdate(tc.update)
			if err != nil {
				t.Fatal(err)
			}
			if !u.Positional() {
				t.Fatal("Positional() = false")
			}
			out, _, _, err := u.ApplyPosition(grades, false, pos)
			if tc.code != 0 {
				checkErr(t, err, tc.code, "")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := get(out, tc.path); !strictEqual(got, tc.want) {
				t.Fatalf("%s = %v, want %v (position %d)", tc.path, got, tc.want, pos)
			}
		})
	}
	for _, bad := range []string{"$", "$.a", "a.$.b.$"} {
		if _, err := CompileUpdate(D{e("$set", D{e(bad, 1)})}); !mongoerr.Is(err, mongoerr.BadValue) {
			t.Errorf("path %q: %v, want BadValue", bad, err)
		}
	}
	u, _ := CompileUpdate(D{e("$set", D{e("a.$", 1)})})
	if _, _, _, err := u.Apply(D{e("a", A{1})}, true); !mongoerr.Is(err, mongoerr.NotImplemented) {
		t.Errorf("positional upsert insert: %v, want NotImplemented", err)
	}
}
