package aggregate

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

type D = bson.D
type A = bson.A

func e(k string, v any) bson.E { return bson.E{Key: k, Value: v} }

func TestNewEnvLet(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	env, err := NewEnv(D{e("id", 1), e("x", "foo"), e("y", D{e("$literal", "$bar")}), e("t", "$$NOW"), e("s", D{e("$add", A{1, 2})}), e("u", D{e("$add", A{"$$s", 1})})}, now, bson.Timestamp{T: 7, I: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := env.Compile([]D{
		{e("$match", D{e("$expr", D{e("$eq", A{"$_id", "$$id"})})})},
		{e("$project", D{e("_id", 0), e("x", "$$x"), e("y", "$$y"), e("t", "$$t"), e("s", "$$s"), e("u", "$$u"), e("now", "$$NOW"), e("ct", "$$CLUSTER_TIME")})},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Run(sliceSource([]D{{e("_id", int32(1))}, {e("_id", int32(2))}}))
	if err != nil {
		t.Fatal(err)
	}
	want := []D{{e("x", "foo"), e("y", "$bar"), e("t", bson.NewDateTimeFromTime(now)), e("s", int32(3)), e("u", int32(4)),
		e("now", bson.NewDateTimeFromTime(now)), e("ct", bson.Timestamp{T: 7, I: 1})}}
	if canon(t, got) != canon(t, want) {
		t.Fatalf("got %s, want %s", canon(t, got), canon(t, want))
	}
}

func TestNewEnvLetErrors(t *testing.T) {
	tests := []struct {
		name string
		let  D
		code int32
	}{
		{"field path", D{e("x", "$a")}, 4890500},
		{"ROOT", D{e("x", "$$ROOT")}, 4890500},
		{"uppercase name", D{e("X", 1)}, mongoerr.FailedToParse},
		{"bad character", D{e("x-y", 1)}, mongoerr.FailedToParse},
		{"refers to a later one", D{e("y", "$$x"), e("x", 1)}, 17276},
		{"runtime error", D{e("x", D{e("$divide", A{1, 0})})}, mongoerr.BadValue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewEnv(tc.let, time.Now(), bson.Timestamp{})
			if !mongoerr.Is(err, tc.code) {
				t.Fatalf("err = %v, want code %d", err, tc.code)
			}
		})
	}
}

func TestExprFilter(t *testing.T) {
	env, err := NewEnv(D{e("lim", 5)}, time.Now(), bson.Timestamp{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		filter D
		doc    D
		want   bool
		code   int32 // evaluation error
	}{
		{"compare fields", D{e("$expr", D{e("$gt", A{"$a", "$b"})})}, D{e("a", 2), e("b", 1)}, true, 0},
		{"compare fields false", D{e("$expr", D{e("$gt", A{"$a", "$b"})})}, D{e("a", 1), e("b", 2)}, false, 0},
		{"let variable", D{e("$expr", D{e("$lt", A{"$a", "$$lim"})})}, D{e("a", 4)}, true, 0},
		{"arrays compare whole", D{e("$expr", D{e("$eq", A{"$a", 1})})}, D{e("a", A{1})}, false, 0},
		{"missing is not null", D{e("$expr", D{e("$eq", A{"$a", nil})})}, D{}, false, 0},
		{"truthy number", D{e("$expr", "$a")}, D{e("a", 0)}, false, 0},
		{"truthy string", D{e("$expr", "$a")}, D{e("a", "")}, true, 0},
		{"missing is false", D{e("$expr", "$a")}, D{}, false, 0},
		{"with other conditions", D{e("b", 1), e("$expr", true)}, D{e("b", 2)}, false, 0},
		{"in or", D{e("$or", A{D{e("b", 1)}, D{e("$expr", D{e("$eq", A{"$b", 2})})}})}, D{e("b", 2)}, true, 0},
		{"in nor", D{e("$nor", A{D{e("$expr", D{e("$eq", A{"$b", 2})})}})}, D{e("b", 2)}, false, 0},
		{"evaluation error", D{e("$expr", D{e("$divide", A{1, "$z"})})}, D{e("z", int32(0))}, false, mongoerr.BadValue},
		{"error under or", D{e("$or", A{D{e("b", 9)}, D{e("$expr", D{e("$divide", A{1, 0})})}})}, D{}, false, mongoerr.BadValue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := env.CompileFilter(tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Match(tc.doc)
			if tc.code != 0 {
				if !mongoerr.Is(err, tc.code) {
					t.Fatalf("err = %v, want code %d", err, tc.code)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Match = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestExprFilterRandomAgainstNaive checks $expr comparisons of fields and constants against
// a direct evaluation: an expression comparison sees whole values (no array traversal),
// orders values with MongoDB's comparison order, and a missing field sorts before null.
func TestExprFilterRandomAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	env, err := NewEnv(nil, time.Now(), bson.Timestamp{})
	if err != nil {
		t.Fatal(err)
	}
	scalar := func() any {
		switch r.IntN(7) {
		case 0:
			return int32(r.IntN(3))
		case 1:
			return int64(r.IntN(3))
		case 2:
			return float64(r.IntN(3)) + 0.5*float64(r.IntN(2))
		case 3:
			return nil
		case 4:
			return []string{"x", "y"}[r.IntN(2)]
		case 5:
			return A{int32(r.IntN(3))}
		}
		return r.IntN(2) == 0
	}
	docs := make([]D, 200)
	for i := range docs {
		d := D{}
		for _, k := range []string{"a", "b"} {
			if r.IntN(4) > 0 {
				d = append(d, e(k, scalar()))
			}
		}
		docs[i] = d
	}
	// naive order: missing < everything; otherwise bsonval.Compare.
	naiveCmp := func(d D, x any, isField bool) (any, bool) {
		if !isField {
			return x, true
		}
		v, ok := bsonval.Get(d, x.(string)[1:])
		return v, ok
	}
	cmp3 := func(a any, aok bool, b any, bok bool) int {
		switch {
		case !aok && !bok:
			return 0
		case !aok:
			return -1
		case !bok:
			return 1
		}
		return bsonval.Compare(a, b)
	}
	ops := []string{"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"}
	checks := 0
	for range 400 {
		op := ops[r.IntN(len(ops))]
		lhs, rhs := any("$a"), any("$b")
		lField, rField := true, true
		if r.IntN(2) == 0 {
			rhs, rField = scalar(), false
			if _, isArr := rhs.(A); isArr {
				rhs = D{e("$literal", rhs)}
			}
		}
		f, err := env.CompileFilter(D{e("$expr", D{e(op, A{lhs, rhs})})})
		if err != nil {
			t.Fatal(err)
		}
		lit := rhs
		if d, ok := rhs.(D); ok {
			lit = d[0].Value
		}
		for _, d := range docs {
			a, aok := naiveCmp(d, lhs, lField)
			b, bok := naiveCmp(d, lit, rField)
			c := cmp3(a, aok, b, bok)
			want := map[string]bool{"$eq": c == 0, "$ne": c != 0, "$gt": c > 0, "$gte": c >= 0, "$lt": c < 0, "$lte": c <= 0}[op]
			got, err := f.Match(d)
			if err != nil || got != want {
				t.Fatalf("$expr {%s: [%v, %v]} on %v: got %v, %v; want %v", op, lhs, rhs, d, got, err, want)
			}
			checks++
		}
	}
	t.Logf("%d $expr/document pairs agreed", checks)
}

func TestUpdatePipeline(t *testing.T) {
	env, err := NewEnv(D{e("x", "foo")}, time.Now(), bson.Timestamp{})
	if err != nil {
		t.Fatal(err)
	}
	doc := D{e("_id", int32(1)), e("a", int32(1)), e("t", D{e("u", D{e("v", int32(1))})})}
	tests := []struct {
		name     string
		pipeline A
		insert   bool
		want     D
		updated  D
		removed  []string
		changed  bool
		// replacement: the delta is not smaller than the result (a small document), so mongod
		// logs a replacement and change streams show a replace event.
		replacement bool
		code        int32
	}{
		{name: "set", pipeline: A{D{e("$set", D{e("b", "$$x"), e("a", D{e("$add", A{"$a", 1})})})}},
			want:    D{e("_id", int32(1)), e("a", int32(2)), e("t", D{e("u", D{e("v", int32(1))})}), e("b", "foo")},
			updated: D{e("a", int32(2)), e("b", "foo")}, changed: true},
		{name: "replaceRoot keeps _id", pipeline: A{D{e("$replaceRoot", D{e("newRoot", "$t")})}, D{e("$addFields", D{e("foo", 1)})}},
			want:        D{e("_id", int32(1)), e("u", D{e("v", int32(1))}), e("foo", int32(1))},
			replacement: true, changed: true},
		{name: "unset and project", pipeline: A{D{e("$unset", "t")}, D{e("$project", D{e("a", 1)})}},
			want: D{e("_id", int32(1)), e("a", int32(1))}, replacement: true, changed: true},
		{name: "nested change", pipeline: A{D{e("$set", D{e("t.u.w", 2)})}},
			want:        D{e("_id", int32(1)), e("a", int32(1)), e("t", D{e("u", D{e("v", int32(1)), e("w", int32(2))})})},
			replacement: true, changed: true},
		{name: "no-op", pipeline: A{D{e("$set", D{e("a", "$a")})}}, want: doc},
		{name: "empty pipeline", pipeline: A{}, want: doc},
		{name: "dollar field via setField", pipeline: A{D{e("$replaceWith", D{e("$setField", D{e("field", D{e("$literal", "$a")}), e("value", 1), e("input", "$$ROOT")})})}},
			want:    D{e("_id", int32(1)), e("a", int32(1)), e("t", D{e("u", D{e("v", int32(1))})}), e("$a", int32(1))},
			updated: D{e("$a", int32(1))}, changed: true},
		{name: "changed _id", pipeline: A{D{e("$set", D{e("_id", 2)})}}, code: mongoerr.ImmutableField},
		{name: "insert path", pipeline: A{D{e("$set", D{e("n", 1)})}}, insert: true,
			want: D{e("_id", int32(1)), e("a", int32(1)), e("t", D{e("u", D{e("v", int32(1))})}), e("n", int32(1))}, changed: true},
		{name: "match not allowed", pipeline: A{D{e("$match", D{})}}, code: mongoerr.InvalidOptions},
		{name: "group not allowed", pipeline: A{D{e("$group", D{e("_id", nil)})}}, code: mongoerr.InvalidOptions},
		{name: "stage not a document", pipeline: A{1}, code: mongoerr.FailedToParse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := env.CompileUpdatePipeline(tc.pipeline)
			var out D
			var desc struct {
				U           D
				R           []string
				Replacement bool
			}
			changed := false
			if err == nil {
				d, dd, ch, aerr := u.Apply(doc, tc.insert)
				out, desc.U, desc.R, desc.Replacement, changed, err = d, dd.UpdatedFields, dd.RemovedFields, dd.Replacement, ch, aerr
			}
			if tc.code != 0 {
				if !mongoerr.Is(err, tc.code) {
					t.Fatalf("err = %v, want code %d", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if canon(t, []D{out}) != canon(t, []D{tc.want}) || changed != tc.changed {
				t.Fatalf("Apply = %s changed=%v, want %s changed=%v", canon(t, []D{out}), changed, canon(t, []D{tc.want}), tc.changed)
			}
			if canon(t, []D{append(D{}, desc.U...)}) != canon(t, []D{append(D{}, tc.updated...)}) || len(desc.R) != len(tc.removed) ||
				desc.Replacement != tc.replacement {
				t.Fatalf("desc = %v / %v replacement=%v, want %v / %v replacement=%v", desc.U, desc.R, desc.Replacement, tc.updated, tc.removed, tc.replacement)
			}
		})
	}
}

func TestOutput(t *testing.T) {
	tests := []struct {
		name  string
		stage D
		want  Output
	}{
		{"out string", D{e("$out", "c")}, Output{Stage: "$out", Coll: "c"}},
		{"out db and coll", D{e("$out", D{e("db", "d"), e("coll", "c")})}, Output{Stage: "$out", DB: "d", Coll: "c"}},
		{"merge string", D{e("$merge", "c")}, Output{Stage: "$merge", Coll: "c", On: []string{"_id"}, WhenMatched: "merge", WhenNotMatched: "insert"}},
		{"merge options", D{e("$merge", D{e("into", D{e("db", "d"), e("coll", "c")}), e("on", A{"a", "b.c"}), e("whenMatched", "keepExisting"), e("whenNotMatched", "discard")})},
			Output{Stage: "$merge", DB: "d", Coll: "c", On: []string{"a", "b.c"}, WhenMatched: "keepExisting", WhenNotMatched: "discard"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile([]D{{e("$match", D{})}, tc.stage})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Output(); got == nil || fmt.Sprint(*got) != fmt.Sprint(tc.want) {
				t.Fatalf("Output = %+v, want %+v", got, tc.want)
			}
		})
	}
	if p, err := Compile([]D{{e("$match", D{})}}); err != nil || p.Output() != nil {
		t.Fatalf("a pipeline without $out: %v, %v", p.Output(), err)
	}
}
