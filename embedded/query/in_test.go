package query

import (
	"math/rand/v2"
	"regexp"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestInObjectIDsAgainstNaive: $in lists holding ObjectIDs and strings among other values and
// regexes (the sets that answer for the ObjectIDs and the strings) match exactly what a linear
// scan of the list does, on fields that are ObjectIDs, strings, other types, arrays of both,
// null or missing; and $nin the opposite.
func TestInObjectIDsAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	oid := func() bson.ObjectID { return bson.ObjectID{byte(r.IntN(6))} }
	scalar := func() any {
		switch r.IntN(7) {
		case 0, 1, 2:
			return oid()
		case 3:
			return int32(r.IntN(3))
		case 4:
			return "s" + string(rune('a'+r.IntN(3)))
		case 5:
			return nil
		}
		return bson.MaxKey{}
	}
	// naive: the list has an element equal to v (same type class, Compare 0), or v is an
	// array with an element in the list; null also matches a missing field.
	var inList func(list A, v any, missing bool) bool
	inList = func(list A, v any, missing bool) bool {
		if arr, ok := v.(A); ok {
			for _, x := range arr {
				if inList(list, x, false) {
					return true
				}
			}
		}
		for _, x := range list {
			if re, ok := x.(bson.Regex); ok {
				if s, isStr := v.(string); isStr && !missing && regexp.MustCompile(re.Pattern).MatchString(s) {
					return true
				}
				continue
			}
			switch {
			case x == nil && (missing || v == nil):
				return true
			case missing:
			case bsonEqual(x, v):
				return true
			}
		}
		return false
	}
	checks := 0
	for range 400 {
		list := A{}
		for range r.IntN(8) {
			list = append(list, scalar())
		}
		if r.IntN(4) == 0 {
			list = append(list, bson.Regex{Pattern: "^s[" + string(rune('a'+r.IntN(3))) + "z]$"})
		}
		for _, op := range []string{"$in", "$nin"} {
			f, err := CompileFilter(D{e("_id", D{e(op, list)})})
			if err != nil {
				t.Fatalf("compile %s %v: %v", op, list, err)
			}
			for range 20 {
				var doc D
				var v any
				missing := r.IntN(8) == 0
				if !missing {
					v = scalar()
					if r.IntN(4) == 0 {
						v = A{scalar(), scalar()}
					}
					doc = D{e("_id", v)}
				}
				want := inList(list, v, missing)
				if op == "$nin" {
					want = !want
				}
				if got := mustMatch(t, f, doc); got != want {
					t.Fatalf("{_id: {%s: %v}} on %v: Match = %v, naive = %v", op, list, doc, got, want)
				}
				checks++
			}
		}
	}
	t.Logf("%d filter/document pairs agreed", checks)
}

// bsonEqual is equality of the scalars TestInObjectIDsAgainstNaive generates.
func bsonEqual(a, b any) bool {
	switch x := a.(type) {
	case bson.ObjectID:
		y, ok := b.(bson.ObjectID)
		return ok && x == y
	case int32:
		y, ok := b.(int32)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bson.MaxKey:
		_, ok := b.(bson.MaxKey)
		return ok
	}
	return false
}

// BenchmarkInObjectIDs matches a document against {_id: {$in: [1,000 ObjectIDs]}}, the
// filter of a retention delete batch.
func BenchmarkInObjectIDs(b *testing.B) {
	list := make(A, 1000)
	for i := range list {
		list[i] = bson.NewObjectID()
	}
	f, err := CompileFilter(D{e("_id", D{e("$in", list)})})
	if err != nil {
		b.Fatal(err)
	}
	doc := D{e("_id", list[999]), e("id", "g01-s0001-p01")}
	for b.Loop() {
		if ok, _ := f.Match(doc); !ok {
			b.Fatal("no match")
		}
	}
}
