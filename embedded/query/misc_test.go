package query

import (
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
)

func TestUpsertSeed(t *testing.T) {
	tests := []struct {
		name   string
		filter D
		want   D
	}{
		{"empty", D{}, D{}},
		{"product key lexicographic", D{e("type", "p"), e("id", "x"), e("timestamp", int64(5))},
			D{e("id", "x"), e("timestamp", int64(5)), e("type", "p")}},
		{"_id first", D{e("b", 1), e("_id", "k"), e("a", 2)}, D{e("_id", "k"), e("a", int32(2)), e("b", int32(1))}},
		{"$eq", D{e("a", D{e("$eq", 3)})}, D{e("a", int32(3))}},
		{"range ignored", D{e("a", D{e("$gt", 3)}), e("b", 1)}, D{e("b", int32(1))}},
		{"eq with range", D{e("a", D{e("$gt", 0), e("$eq", 3)})}, D{e("a", int32(3))}},
		{"dotted", D{e("a.b", 1), e("a.c", 2)}, D{e("a", D{e("b", int32(1)), e("c", int32(2))})}},
		{"and", D{e("$and", A{D{e("x", 1)}, D{e("$and", A{D{e("y", 2)}})}})}, D{e("x", int32(1)), e("y", int32(2))}},
		{"or single clause", D{e("$or", A{D{e("x", 1)}})}, D{e("x", int32(1))}},
		{"or many ignored", D{e("$or", A{D{e("x", 1)}, D{e("x", 2)}})}, D{}},
		{"in single", D{e("a", D{e("$in", A{7})})}, D{e("a", int32(7))}},
		{"in many ignored", D{e("a", D{e("$in", A{7, 8})})}, D{}},
		{"regex ignored", D{e("a", bson.Regex{Pattern: "x"})}, D{}},
		{"null kept", D{e("a", nil)}, D{e("a", nil)}},
		{"doc value", D{e("a", D{e("z", 1), e("b", 2)})}, D{e("a", D{e("z", 1), e("b", 2)})}},
		{"ne ignored", D{e("a", D{e("$ne", 1)})}, D{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := UpsertSeed(tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if !strictEqual(got, tc.want) && (len(got) != 0 || len(tc.want) != 0) {
				t.Fatalf("UpsertSeed(%v) = %v, want %v", tc.filter, got, tc.want)
			}
		})
	}
}

func TestUpsertSeedConflicts(t *testing.T) {
	for _, f := range []D{
		{e("a", 1), e("a.b", 1)},
		{e("a", 1), e("$and", A{D{e("a", 2)}})},
		{e("_id", D{e("x", 1)}), e("_id.y", 1)},
	} {
		_, err := UpsertSeed(f)
		if !mongoerr.Is(err, NotSingleValueField) {
			t.Fatalf("UpsertSeed(%v) err = %v, want code 54", f, err)
		}
	}
}

func TestUpsertThenApply(t *testing.T) {
	seed, err := UpsertSeed(D{e("id", "x"), e("type", "p"), e("timestamp", int64(100))})
	if err != nil {
		t.Fatal(err)
	}
	u, err := CompileUpdate(D{e("$set", D{e("online", int32(3)), e("version", "1.2")}), e("$setOnInsert", D{e("created", int64(1))})})
	if err != nil {
		t.Fatal(err)
	}
	out, _, changed, err := u.Apply(seed, true)
	if err != nil || !changed {
		t.Fatalf("Apply: %v %v", changed, err)
	}
	want := D{e("id", "x"), e("timestamp", int64(100)), e("type", "p"), e("created", int64(1)), e("online", int32(3)), e("version", "1.2")}
	if !strictEqual(out, want) {
		t.Fatalf("got %v, want %v", out, want)
	}
}

func TestProjection(t *testing.T) {
	doc := D{e("_id", 1), e("a", int32(1)), e("b", D{e("c", 2), e("d", 3)}), e("arr", A{D{e("c", 1), e("d", 2)}, 5, A{D{e("c", 3)}}}), e("z", "s")}
	tests := []struct {
		name string
		proj D
		want D
	}{
		{"empty", D{}, doc},
		{"include", D{e("a", 1)}, D{e("_id", 1), e("a", int32(1))}},
		{"include keeps doc order", D{e("z", true), e("a", 1)}, D{e("_id", 1), e("a", int32(1)), e("z", "s")}},
		{"include no id", D{e("a", 1), e("_id", 0)}, D{e("a", int32(1))}},
		{"include dotted", D{e("b.c", 1)}, D{e("_id", 1), e("b", D{e("c", 2)})}},
		{"include nested spec", D{e("b", D{e("c", 1)})}, D{e("_id", 1), e("b", D{e("c", 2)})}},
		{"include dotted missing keeps empty doc", D{e("b.x", 1)}, D{e("_id", 1), e("b", D{})}},
		{"include dotted scalar dropped", D{e("a.x", 1)}, D{e("_id", 1)}},
		{"include through array", D{e("arr.c", 1)}, D{e("_id", 1), e("arr", A{D{e("c", 1)}, A{D{e("c", 3)}}})}},
		{"include missing", D{e("nope", 1)}, D{e("_id", 1)}},
		{"only id", D{e("_id", 1)}, D{e("_id", 1)}},
		{"only no id", D{e("_id", 0)}, D{e("a", int32(1)), e("b", D{e("c", 2), e("d", 3)}), e("arr", A{D{e("c", 1), e("d", 2)}, 5, A{D{e("c", 3)}}}), e("z", "s")}},
		{"exclude", D{e("a", 0), e("z", false)}, D{e("_id", 1), e("b", D{e("c", 2), e("d", 3)}), e("arr", A{D{e("c", 1), e("d", 2)}, 5, A{D{e("c", 3)}}})}},
		{"exclude dotted", D{e("b.c", 0), e("_id", 0)}, D{e("a", int32(1)), e("b", D{e("d", 3)}), e("arr", A{D{e("c", 1), e("d", 2)}, 5, A{D{e("c", 3)}}}), e("z", "s")}},
		{"exclude through array", D{e("arr.c", 0), e("a", 0), e("b", 0), e("z", 0)}, D{e("_id", 1), e("arr", A{D{e("d", 2)}, 5, A{D{}}})}},
		{"exclude with id 1", D{e("_id", 1), e("a", 0)}, D{e("_id", 1), e("b", D{e("c", 2), e("d", 3)}), e("arr", A{D{e("c", 1), e("d", 2)}, 5, A{D{e("c", 3)}}}), e("z", "s")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := CompileProjection(tc.proj)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Apply(doc); !strictEqual(got, tc.want) {
				t.Fatalf("Apply = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestProjectionErrors(t *testing.T) {
	tests := []struct {
		proj D
		code int32
		msg  string
	}{
		{D{e("a", 1), e("b", 0)}, 31254, "Cannot do exclusion on field b in inclusion projection"},
		{D{e("a", 0), e("b", 1)}, 31253, "Cannot do inclusion on field b in exclusion projection"},
		{D{e("a", D{e("$slice", 1)})}, mongoerr.NotImplemented, ""},
		{D{e("a", D{e("$elemMatch", D{e("b", 1)})})}, mongoerr.NotImplemented, ""},
		{D{e("a.$", 1)}, mongoerr.NotImplemented, ""},
		{D{e("a", "$b")}, mongoerr.NotImplemented, ""},
		{D{e("a", D{e("$add", A{1, 2})})}, mongoerr.NotImplemented, ""},
		{D{e("a", 1), e("a.b", 1)}, 31250, ""},
		{D{e("a.b", 1), e("a", 1)}, 31250, ""},
		{D{e("a", D{})}, 51270, ""},
	}
	for _, tc := range tests {
		_, err := CompileProjection(tc.proj)
		checkErr(t, err, tc.code, tc.msg)
	}
}

func TestSort(t *testing.T) {
	docs := []D{
		{e("_id", 0), e("a", int32(3))},
		{e("_id", 1)},
		{e("_id", 2), e("a", nil)},
		{e("_id", 3), e("a", A{int32(5), int32(1)})},
		{e("_id", 4), e("a", "str")},
		{e("_id", 5), e("a", A{})},
		{e("_id", 6), e("a", 2.5)},
		{e("_id", 7), e("a", bson.MinKey{})},
	}
	ids := func(ds []D) []int {
		out := make([]int, len(ds))
		for i, d := range ds {
			out[i] = d[0].Value.(int)
		}
		return out
	}
	sortBy := func(spec D) []int {
		s, err := CompileSort(spec)
		if err != nil {
			t.Fatal(err)
		}
		c := slices.Clone(docs)
		slices.SortStableFunc(c, s.Compare)
		// Key/CompareKeys must agree with Compare.
		for i := range c {
			for j := range c {
				if got, want := s.CompareKeys(s.Key(c[i]), s.Key(c[j])), s.Compare(c[i], c[j]); got != want {
					t.Fatalf("CompareKeys = %d, Compare = %d for %v, %v", got, want, c[i], c[j])
				}
			}
		}
		return ids(c)
	}
	// Ascending: MinKey, empty array, null/missing (stable), array by min (1), 2.5, 3, string.
	if got, want := sortBy(D{e("a", 1)}), []int{7, 5, 1, 2, 3, 6, 0, 4}; !slices.Equal(got, want) {
		t.Fatalf("asc = %v, want %v", got, want)
	}
	// Descending: string, array by max (5), 3, 2.5, null/missing (stable), empty array, MinKey.
	if got, want := sortBy(D{e("a", -1)}), []int{4, 3, 0, 6, 1, 2, 5, 7}; !slices.Equal(got, want) {
		t.Fatalf("desc = %v, want %v", got, want)
	}
	if got, want := sortBy(D{e("a", 1.0), e("_id", int64(-1))}), []int{7, 5, 2, 1, 3, 6, 0, 4}; !slices.Equal(got, want) {
		t.Fatalf("compound = %v, want %v", got, want)
	}
}

func TestSortDotted(t *testing.T) {
	s, err := CompileSort(D{e("a.b", 1)})
	if err != nil {
		t.Fatal(err)
	}
	x := D{e("a", A{D{e("b", 4)}, D{e("b", 2)}})}
	y := D{e("a", D{e("b", 3)})}
	z := D{e("a", A{D{e("b", 9)}, D{e("c", 1)}})} // the element without b sorts as null
	if s.Compare(x, y) >= 0 || s.Compare(y, x) <= 0 || s.Compare(z, x) >= 0 {
		t.Fatalf("dotted sort wrong: %d %d %d", s.Compare(x, y), s.Compare(y, x), s.Compare(z, x))
	}
	empty, _ := CompileSort(D{})
	if empty.Compare(x, y) != 0 {
		t.Fatal("empty sort must compare equal")
	}
}

func TestSortErrors(t *testing.T) {
	tests := []struct {
		spec D
		code int32
	}{
		{D{e("a", D{e("$meta", "textScore")})}, mongoerr.NotImplemented},
		{D{e("a", 2)}, 15975},
		{D{e("a", 0)}, 15975},
		{D{e("a", "asc")}, 15974},
		{D{e("", 1)}, mongoerr.Location40352},
		{D{e("a..b", 1)}, 15998},
		{D{e("$a", 1)}, 16410},
	}
	for _, tc := range tests {
		_, err := CompileSort(tc.spec)
		checkErr(t, err, tc.code, "")
	}
}
