package query

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
)

// The naive matcher below restates MongoDB's rules for a restricted grammar (no numeric path
// components): the values a path reaches are collected into a list first, then predicates are
// evaluated over that list.

type cand struct {
	v       any
	missing bool
}

func naiveValues(v any, parts []string) []cand { return naiveValuesMode(v, parts, true) }

// naiveValuesMode lists the values a path reaches; expand also lists the elements of an
// array at the end of the path (the whole-array operators $size and $elemMatch do not).
func naiveValuesMode(v any, parts []string, expand bool) []cand {
	if len(parts) == 0 {
		if arr, ok := v.(A); ok && expand {
			out := make([]cand, 0, len(arr)+1)
			for _, x := range arr {
				out = append(out, cand{v: x})
			}
			return append(out, cand{v: arr})
		}
		return []cand{{v: v}}
	}
	switch x := v.(type) {
	case D:
		for _, f := range x {
			if f.Key == parts[0] {
				return naiveValuesMode(f.Value, parts[1:], expand)
			}
		}
		return []cand{{missing: true}}
	case A:
		// A non-leaf array: only its documents continue the path.
		var out []cand
		for _, el := range x {
			if d, ok := el.(D); ok {
				out = append(out, naiveValuesMode(d, parts, expand)...)
			}
		}
		return out
	}
	return []cand{{missing: true}}
}

func isNullish(c cand) bool {
	if c.missing {
		return true
	}
	switch c.v.(type) {
	case nil, bson.Undefined:
		return true
	}
	return false
}

func naiveEq(c cand, x any) bool {
	if x == nil {
		return isNullish(c)
	}
	if c.missing {
		return false
	}
	return bsonval.Class(c.v) == bsonval.Class(x) && bsonval.Compare(c.v, x) == 0
}

func naiveCmp(c cand, op string, x any) bool {
	if c.missing || bsonval.Class(c.v) != bsonval.Class(x) {
		return false
	}
	r := bsonval.Compare(c.v, x)
	switch op {
	case "$gt":
		return r > 0
	case "$gte":
		return r >= 0
	case "$lt":
		return r < 0
	}
	return r <= 0
}

type naiveExpr func(doc D) bool

func anyCand(path string, f func(cand) bool) naiveExpr {
	parts := splitPath(path)
	return func(doc D) bool {
		for _, c := range naiveValues(doc, parts) {
			if f(c) {
				return true
			}
		}
		return false
	}
}

func randScalar(r *rand.Rand) any {
	switch r.IntN(8) {
	case 0:
		return int32(r.IntN(4))
	case 1:
		return int64(r.IntN(4))
	case 2:
		return float64(r.IntN(4))
	case 3:
		return float64(r.IntN(4)) + 0.5
	case 4:
		return nil
	case 5:
		return []string{"x", "y"}[r.IntN(2)]
	case 6:
		return r.IntN(2) == 0
	}
	return int32(r.IntN(4))
}

func randValue(r *rand.Rand, depth int) any {
	if depth <= 0 {
		return randScalar(r)
	}
	switch r.IntN(6) {
	case 0:
		n := r.IntN(4)
		a := A{}
		for range n {
			a = append(a, randValue(r, depth-1))
		}
		return a
	case 1:
		return randDoc(r, depth-1)
	}
	return randScalar(r)
}

func randDoc(r *rand.Rand, depth int) D {
	d := D{}
	for _, k := range []string{"a", "b", "c"} {
		if r.IntN(3) > 0 {
			d = append(d, bson.E{Key: k, Value: randValue(r, depth)})
		}
	}
	return d
}

var randPaths = []string{"a", "b", "a.b", "a.c", "b.a", "a.b.c"}

// randFilter returns a filter and its naive evaluator.
func randFilter(r *rand.Rand, depth int) (D, naiveExpr) {
	if depth > 0 && r.IntN(4) == 0 {
		n := 1 + r.IntN(3)
		var clauses A
		var exprs []naiveExpr
		for range n {
			f, x := randFilter(r, depth-1)
			clauses = append(clauses, f)
			exprs = append(exprs, x)
		}
		switch r.IntN(3) {
		case 0:
			return D{e("$and", clauses)}, func(d D) bool {
				for _, x := range exprs {
					if !x(d) {
						return false
					}
				}
				return true
			}
		case 1:
			return D{e("$or", clauses)}, func(d D) bool {
				for _, x := range exprs {
					if x(d) {
						return true
					}
				}
				return false
			}
		}
		return D{e("$nor", clauses)}, func(d D) bool {
			for _, x := range exprs {
				if x(d) {
					return false
				}
			}
			return true
		}
	}
	path := randPaths[r.IntN(len(randPaths))]
	val := randScalar(r)
	switch r.IntN(10) {
	case 8:
		alias := []string{"int", "long", "double", "string", "null", "bool", "array", "object", "number"}[r.IntN(9)]
		x := anyCand(path, func(c cand) bool { return !c.missing && naiveTypeIs(c.v, alias) })
		return D{e(path, D{e("$type", alias)})}, x
	case 0:
		return D{e(path, val)}, anyCand(path, func(c cand) bool { return naiveEq(c, val) })
	case 1:
		x := anyCand(path, func(c cand) bool { return naiveEq(c, val) })
		return D{e(path, D{e("$ne", val)})}, func(d D) bool { return !x(d) }
	case 2, 3:
		if val == nil {
			val = int32(1)
		}
		op := []string{"$gt", "$gte", "$lt", "$lte"}[r.IntN(4)]
		x := anyCand(path, func(c cand) bool { return naiveCmp(c, op, val) })
		if r.IntN(3) == 0 {
			return D{e(path, D{e("$not", D{e(op, val)})})}, func(d D) bool { return !x(d) }
		}
		return D{e(path, D{e(op, val)})}, x
	case 4, 5:
		vals := A{val, randScalar(r)}
		x := anyCand(path, func(c cand) bool { return naiveEq(c, vals[0]) || naiveEq(c, vals[1]) })
		if r.IntN(2) == 0 {
			return D{e(path, D{e("$nin", vals)})}, func(d D) bool { return !x(d) }
		}
		return D{e(path, D{e("$in", vals)})}, x
	case 6:
		x := anyCand(path, func(c cand) bool { return !c.missing })
		if r.IntN(2) == 0 {
			return D{e(path, D{e("$exists", false)})}, func(d D) bool { return !x(d) }
		}
		return D{e(path, D{e("$exists", true)})}, x
	case 7:
		lo, hi := int32(r.IntN(3)), int32(1+r.IntN(3))
		x1 := anyCand(path, func(c cand) bool { return naiveCmp(c, "$gte", lo) })
		x2 := anyCand(path, func(c cand) bool { return naiveCmp(c, "$lt", hi) })
		return D{e(path, D{e("$gte", lo), e("$lt", hi)})}, func(d D) bool { return x1(d) && x2(d) }
	}
	arr := A{randScalar(r)}
	if r.IntN(3) == 0 {
		n := r.IntN(3)
		parts := splitPath(path)
		return D{e(path, D{e("$size", n)})}, func(d D) bool {
			for _, c := range naiveValuesMode(d, parts, false) {
				if a, ok := c.v.(A); ok && !c.missing && len(a) == n {
					return true
				}
			}
			return false
		}
	}
	if r.IntN(3) == 0 {
		v1, v2 := randScalar(r), randScalar(r)
		x1 := anyCand(path, func(c cand) bool { return naiveEq(c, v1) })
		x2 := anyCand(path, func(c cand) bool { return naiveEq(c, v2) })
		return D{e(path, D{e("$all", A{v1, v2})})}, func(d D) bool { return x1(d) && x2(d) }
	}
	if r.IntN(2) == 0 {
		return D{e(path, D{e("$type", "array")})}, anyCand(path, func(c cand) bool {
			_, ok := c.v.(A)
			return !c.missing && ok
		})
	}
	return D{e(path, arr)}, anyCand(path, func(c cand) bool {
		return !c.missing && bsonval.Class(c.v) == bsonval.ClassArray && bsonval.Compare(c.v, arr) == 0
	})
}

// naiveTypeIs restates $type's aliases with Go type switches.
func naiveTypeIs(v any, alias string) bool {
	switch v.(type) {
	case int32:
		return alias == "int" || alias == "number"
	case int64:
		return alias == "long" || alias == "number"
	case float64:
		return alias == "double" || alias == "number"
	case string:
		return alias == "string"
	case nil:
		return alias == "null"
	case bool:
		return alias == "bool"
	case A:
		return alias == "array"
	case D:
		return alias == "object"
	}
	return false
}

func TestMatchRandomAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	docs := make([]D, 300)
	for i := range docs {
		docs[i] = randDoc(r, 3)
	}
	checks := 0
	for range 1500 {
		f, naive := randFilter(r, 2)
		cf, err := CompileFilter(f)
		if err != nil {
			t.Fatalf("CompileFilter(%v): %v", f, err)
		}
		for _, d := range docs {
			if got, want := mustMatch(t, cf, d), naive(d); got != want {
				t.Fatalf("filter %v on doc %v: Match = %v, naive = %v", f, d, got, want)
			}
			checks++
		}
	}
	t.Logf("%d filter/document pairs agreed", checks)
}

// TestTopFieldsRandom: a random filter matches a random document exactly when it matches the
// document's top-level fields named by TopFields (what the server decodes of a candidate).
func TestTopFieldsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	docs := make([]D, 300)
	for i := range docs {
		docs[i] = randDoc(r, 3)
	}
	for range 1500 {
		f, _ := randFilter(r, 2)
		cf, err := CompileFilter(f)
		if err != nil {
			t.Fatalf("CompileFilter(%v): %v", f, err)
		}
		fields, ok := cf.TopFields()
		if !ok {
			t.Fatalf("TopFields(%v) not ok", f)
		}
		for _, d := range docs {
			var part D
			for _, el := range d {
				if slices.Contains(fields, el.Key) {
					part = append(part, el)
				}
			}
			if got, want := mustMatch(t, cf, part), mustMatch(t, cf, d); got != want {
				t.Fatalf("filter %v (fields %q) on doc %v: %v on the fields, %v on the whole", f, fields, d, got, want)
			}
		}
	}
	tests := []struct {
		filter D
		want   []string
	}{
		{D{}, nil},
		{D{e("a", 1), e("b.c", D{e("$gt", 1)}), e("a", 2)}, []string{"a", "b"}},
		{D{e("$or", A{D{e("x", 1)}, D{e("y", D{e("$not", D{e("$gt", 1)})})}}), e("$nor", A{D{e("z.0", 1)}})}, []string{"x", "y", "z"}},
		{D{e("k", D{e("$elemMatch", D{e("q", 1)})})}, []string{"k"}},
	}
	for _, tt := range tests {
		cf, err := CompileFilter(tt.filter)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := cf.TopFields()
		if !ok || !slices.Equal(got, tt.want) {
			t.Errorf("TopFields(%v) = %q, %v; want %q", tt.filter, got, ok, tt.want)
		}
	}
	withExpr, err := CompileFilterEnv(D{e("$expr", true)}, &Env{Expr: func(any) (Predicate, error) {
		return func(bson.D) (bool, error) { return true, nil }, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := withExpr.TopFields(); ok {
		t.Error("TopFields of a $expr filter: ok, want the whole document")
	}
}

// TestArrayFiltersRandomAgainstNaive checks $[x] updates of arrays of numbers (and of
// documents, through x.v) against a direct loop over the elements.
func TestArrayFiltersRandomAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ops := []string{"$gt", "$gte", "$lt", "$lte", "$eq", "$ne"}
	for range 2000 {
		n := r.IntN(6)
		nums := make(A, n)
		for i := range nums {
			nums[i] = int32(r.IntN(5))
		}
		op, k := ops[r.IntN(len(ops))], int32(r.IntN(5))
		inDocs := r.IntN(2) == 0
		arr, path, filter := nums, "a.$[x]", D{e("x", D{e(op, k)})}
		if inDocs {
			arr = make(A, n)
			for i, v := range nums {
				arr[i] = D{e("v", v)}
			}
			path, filter = "a.$[x].v", D{e("x.v", D{e(op, k)})}
		}
		u, err := CompileUpdateEnv(D{e("$inc", D{e(path, int32(10))})}, A{filter}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, _, _, err := u.Apply(D{e("_id", 1), e("a", arr)}, false)
		if err != nil {
			t.Fatalf("apply %v to %v: %v", filter, arr, err)
		}
		got := get(out, "a").(A)
		for i, v := range nums {
			x := v.(int32)
			sel := map[string]bool{"$gt": x > k, "$gte": x >= k, "$lt": x < k, "$lte": x <= k, "$eq": x == k, "$ne": x != k}[op]
			want := x
			if sel {
				want = x + 10
			}
			g := got[i]
			if inDocs {
				g = get(got[i].(D), "v")
			}
			if g != want {
				t.Fatalf("%s %v on %v: element %d = %v, want %v", path, filter, arr, i, g, want)
			}
		}
	}
}

// TestPartialReadsRandom: reading only what a projection or a sort needs gives what reading
// the whole document gives. Projection.ApplyRaw (raw elements copied, or the named top-level
// fields decoded) returns the bytes of Apply on the whole decode, and a sort's key over the
// sort's TopFields is its key over the whole document, for random documents (with repeated
// keys) and random projections and sorts.
func TestPartialReadsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 11))
	paths := []string{"_id", "a", "b", "c", "a.b", "a.c", "b.a", "a.b.c"}
	docs := make([][]byte, 300)
	for i := range docs {
		d := randDoc(r, 3)
		if r.IntN(2) == 0 {
			d = append(D{e("_id", r.IntN(5))}, d...)
		}
		if r.IntN(5) == 0 && len(d) > 0 {
			d = append(d, d[r.IntN(len(d))]) // a repeated key
		}
		raw, err := bsonval.Encode(d)
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = raw
	}
	var kinds [4]int // flat inclusion, flat exclusion, nested inclusion, nested exclusion
	for range 2000 {
		var spec D
		for _, i := range r.Perm(len(paths))[:1+r.IntN(3)] {
			spec = append(spec, e(paths[i], r.IntN(2)))
		}
		if r.IntN(2) == 0 {
			for i := range spec {
				spec[i].Value = int(2*r.IntN(2)) - 1 // a sort spec: 1 or -1
			}
			srt, err := CompileSort(spec)
			if err != nil {
				t.Fatalf("CompileSort(%v): %v", spec, err)
			}
			fields := srt.TopFields()
			for _, raw := range docs {
				whole, _ := bsonval.Decode(raw)
				part, _ := bsonval.DecodeFields(raw, fields)
				if got, want := srt.Key(part), srt.Key(whole); srt.CompareKeys(got, want) != 0 || !slices.EqualFunc(got, want, func(a, b any) bool { return bsonval.Compare(a, b) == 0 }) {
					t.Fatalf("sort %v (fields %q) on %v: key %v from the fields, %v from the whole", spec, fields, whole, got, want)
				}
			}
			continue
		}
		p, err := CompileProjection(spec)
		if err != nil {
			continue // path collisions, mixed inclusion and exclusion
		}
		kind := 0
		if !p.inclusion {
			kind++
		}
		if !p.flat() {
			kind += 2
		}
		kinds[kind]++
		for _, raw := range docs {
			whole, _ := bsonval.Decode(raw)
			want, err := bsonval.Encode(p.Apply(whole))
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.ApplyRaw(raw)
			if err != nil || !bytes.Equal(got, want) {
				d, _ := bsonval.Decode(got)
				t.Fatalf("projection %v of %v: ApplyRaw %v (%v), Apply %v", spec, whole, d, err, p.Apply(whole))
			}
		}
	}
	for i, n := range kinds {
		if n < 50 {
			t.Errorf("only %d projections of kind %d (flat/nested × inclusion/exclusion) ran", n, i)
		}
	}
	if got, err := (*Projection)(nil).ApplyRaw(docs[0]); err != nil || !bytes.Equal(got, docs[0]) {
		t.Errorf("nil projection: %x, %v; want the document itself", got, err)
	}
}
