package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gameops/rollup/embedded/bsonval"
	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestPlanChoice(t *testing.T) {
	e := openMem(t)
	mustWrite(t, e, func(w *Writer) error {
		for _, s := range []IndexSpec{
			{Name: "itt", Key: d("id", 1, "type", 1, "timestamp", 1), Unique: true},
			{Name: "type_1", Key: d("type", 1)},
			{Name: "ts_-1", Key: d("timestamp", -1)},
		} {
			if _, err := w.CreateIndex("db", "c", s); err != nil {
				return err
			}
		}
		for i := range 50 {
			if _, err := w.Insert("db", "c", d("_id", i, "id", fmt.Sprint(i%5), "type", "p", "timestamp", int64(i))); err != nil {
				return err
			}
		}
		return nil
	})
	tests := []struct {
		name      string
		filter    bson.D
		wantIndex string // "" = full scan
		wantExact bool
		wantN     int // candidates
	}{
		{"unique point", d("id", "3", "type", "p", "timestamp", int64(8)), "itt", true, 1},
		{"unique point via $eq and $and", d("$and", bson.A{d("id", d("$eq", "3")), d("type", "p")}, "timestamp", 8.0), "itt", true, 1},
		{"prefix", d("id", "3"), "itt", false, 10},
		{"prefix and range", d("id", "3", "type", "p", "timestamp", d("$gte", 20, "$lt", int64(30))), "itt", false, 2},
		{"$in", d("id", d("$in", bson.A{"1", "2", "1"})), "itt", false, 20},
		{"range only", d("timestamp", d("$gt", 45)), "ts_-1", false, 5},
		{"range wrong type is empty", d("timestamp", d("$gt", "a")), "ts_-1", false, 0},
		{"null is not narrowed", d("id", nil), "", false, 50},
		{"$ne is not narrowed", d("type", d("$ne", "p")), "", false, 50},
		{"doc value is narrowed", d("type", d("x", 1)), "type_1", false, 0},
		{"empty doc value is narrowed", d("type", bson.D{}), "type_1", false, 0},
		{"doc value in $in is narrowed", d("_id", d("$in", bson.A{d("x", 1), int32(3)})), "_id_", true, 1},
		{"array value is not narrowed", d("type", bson.A{"p"}), "", false, 50},
		{"regex is not narrowed", d("type", bson.Regex{Pattern: "p"}), "", false, 50},
		{"$or is not narrowed", d("$or", bson.A{d("id", "1")}), "", false, 50},
		{"$in with null is not narrowed", d("id", d("$in", bson.A{"1", nil})), "", false, 50},
		{"empty $in", d("id", d("$in", bson.A{})), "itt", false, 0},
		{"_id", d("_id", 7), "_id_", true, 1},
		{"$in product of 15,000 points stays on the unique index", d("id", d("$in", manyIDs(5000)), "type", d("$in", bson.A{"p", "q", "r"}), "timestamp", d("$gte", 40)), "itt", false, 10},
		{"empty filter", nil, "", false, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.Read(func(r *Reader) {
				c := r.e.st.coll("db", "c")
				p := c.planFor(tt.filter, new([]cond))
				name := ""
				if p.ix != nil {
					name = p.ix.spec.Name
				}
				if name != tt.wantIndex || p.exact != tt.wantExact {
					t.Errorf("plan = %q exact=%v, want %q exact=%v", name, p.exact, tt.wantIndex, tt.wantExact)
				}
			})
			if got := ids(e, "db", "c", tt.filter); len(got) != tt.wantN {
				t.Errorf("candidates = %d, want %d", len(got), tt.wantN)
			}
		})
	}
}

// manyIDs is "0", "1", … as a $in list of n ids.
func manyIDs(n int) bson.A {
	out := make(bson.A, n)
	for i := range out {
		out[i] = fmt.Sprint(i)
	}
	return out
}

// naiveValues returns the values a dotted path reaches in doc, with MongoDB's fan-out: an
// array is a candidate itself and so are its elements; arrays along the path fan out over
// their document elements. missing reports that some branch lacks the path.
func naiveValues(v any, path []string) (vals []any, missing bool) {
	if len(path) == 0 {
		if a, ok := v.(bson.A); ok {
			return append([]any{v}, a...), false
		}
		return []any{v}, false
	}
	switch x := v.(type) {
	case bson.D:
		fv, ok := bsonval.Get(x, path[0])
		if !ok {
			return nil, true
		}
		return naiveValues(fv, path[1:])
	case bson.A:
		for _, el := range x {
			if ed, ok := el.(bson.D); ok {
				vs, m := naiveValues(ed, path)
				vals = append(vals, vs...)
				missing = missing || m
			}
		}
		return vals, missing
	}
	return nil, true
}

func naiveMatch(doc bson.D, filter bson.D) bool {
	for _, e := range filter {
		if e.Key == "$and" {
			for _, sub := range e.Value.(bson.A) {
				if !naiveMatch(doc, sub.(bson.D)) {
					return false
				}
			}
			continue
		}
		vals, missing := naiveValues(doc, strings.Split(e.Key, "."))
		ops, isOps := e.Value.(bson.D)
		if !isOps || len(ops) == 0 || ops[0].Key[0] != '$' {
			ops = d("$eq", e.Value)
		}
		for _, op := range ops {
			if !naiveOp(op.Key, op.Value, vals, missing) {
				return false
			}
		}
	}
	return true
}

func naiveOp(op string, arg any, vals []any, missing bool) bool {
	switch op {
	case "$eq":
		if arg == nil && (missing || len(vals) == 0) {
			return true
		}
		for _, v := range vals {
			if bsonval.Compare(v, arg) == 0 {
				return true
			}
		}
		return false
	case "$ne":
		return !naiveOp("$eq", arg, vals, missing)
	case "$in":
		for _, a := range arg.(bson.A) {
			if naiveOp("$eq", a, vals, missing) {
				return true
			}
		}
		return false
	case "$exists":
		return (len(vals) > 0) == arg.(bool)
	}
	for _, v := range vals {
		if bsonval.Class(v) != bsonval.Class(arg) {
			continue
		}
		c := bsonval.Compare(v, arg)
		if op == "$gt" && c > 0 || op == "$gte" && c >= 0 || op == "$lt" && c < 0 || op == "$lte" && c <= 0 {
			return true
		}
	}
	return false
}

func randScalar(r *rand.Rand) any {
	n := r.IntN(7) - 3
	switch r.IntN(9) {
	case 0:
		return int32(n)
	case 1:
		return int64(n)
	case 2:
		return float64(n)
	case 3:
		return float64(n) + 0.5
	case 4:
		return []string{"", "a", "ab", "b"}[r.IntN(4)]
	case 5:
		return nil
	case 6:
		return r.IntN(2) == 0
	case 7:
		return bson.DateTime(int64(n))
	}
	return int32(n)
}

func randValue(r *rand.Rand, depth int) any {
	switch r.IntN(8) {
	case 0:
		if depth > 0 {
			return nil
		}
		a := bson.A{}
		for range r.IntN(4) {
			a = append(a, randValue(r, depth+1))
		}
		return a
	case 1:
		if depth > 0 {
			return int32(1)
		}
		return d("x", randScalar(r))
	}
	return randScalar(r)
}

var crossPaths = []string{"a", "b", "c", "n.x", "_id"}

func randDoc(r *rand.Rand, id int) bson.D {
	doc := d("_id", id)
	for _, f := range []string{"a", "b", "c"} {
		if r.IntN(5) > 0 {
			doc = append(doc, bson.E{Key: f, Value: randValue(r, 0)})
		}
	}
	switch r.IntN(4) {
	case 0:
		doc = append(doc, bson.E{Key: "n", Value: d("x", randValue(r, 1))})
	case 1:
		doc = append(doc, bson.E{Key: "n", Value: bson.A{d("x", randScalar(r)), d("y", 1), d("x", randValue(r, 0))}})
	case 2:
		doc = append(doc, bson.E{Key: "n", Value: randScalar(r)})
	}
	return doc
}

func randClause(r *rand.Rand) bson.D {
	p := crossPaths[r.IntN(len(crossPaths))]
	var v any
	switch r.IntN(8) {
	case 0:
		v = d("$eq", randValue(r, 0))
	case 1:
		a := bson.A{}
		for range r.IntN(4) {
			a = append(a, randScalar(r))
		}
		v = d("$in", a)
	case 2, 3:
		ops := []string{"$gt", "$gte", "$lt", "$lte"}
		v = d(ops[r.IntN(4)], randScalar(r))
		if r.IntN(2) == 0 {
			v = append(v.(bson.D), bson.E{Key: ops[r.IntN(4)], Value: randScalar(r)})
		}
	case 4:
		v = d("$ne", randScalar(r))
	case 5:
		v = d("$exists", r.IntN(2) == 0)
	default:
		v = randValue(r, 0)
	}
	return bson.D{{Key: p, Value: v}}
}

func randFilter(r *rand.Rand) bson.D {
	var f bson.D
	for range 1 + r.IntN(3) {
		cl := randClause(r)
		if r.IntN(3) == 0 {
			f = append(f, bson.E{Key: "$and", Value: bson.A{cl, randClause(r)}})
		} else {
			f = append(f, cl...)
		}
	}
	return f
}

// TestFindNeverMisses cross-checks Find's candidates against a naive full scan.
func TestFindNeverMisses(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { findNeverMisses(t, seed) })
	}
}

func findNeverMisses(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 2))
	e := openMem(t)
	mustWrite(t, e, func(w *Writer) error {
		for _, s := range []IndexSpec{
			{Name: "a", Key: d("a", 1)},
			{Name: "ab", Key: d("a", 1, "b", -1)},
			{Name: "cb", Key: d("c", 1, "b", 1)},
			{Name: "nx", Key: d("n.x", 1)},
			{Name: "bc", Key: d("b", 1, "c", 1, "a", 1)},
		} {
			if _, err := w.CreateIndex("db", "c", s); err != nil {
				return err
			}
		}
		for i := 0; i < 400; i++ {
			if _, err := w.Insert("db", "c", randDoc(r, i)); err != nil {
				// Parallel arrays are refused: skip such documents.
				continue
			}
		}
		return nil
	})
	var docs []*Doc
	e.Read(func(rd *Reader) {
		rd.Find("db", "c", nil, func(doc *Doc) bool { docs = append(docs, doc); return true })
	})
	if len(docs) < 200 {
		t.Fatalf("only %d documents", len(docs))
	}
	// Decoded once: the naive check reads every document for each of the 1,500 filters
	// (decoding them each time was most of the test's CPU under -race).
	decoded := make([]bson.D, len(docs))
	for i, doc := range docs {
		decoded[i] = doc.D()
	}
	narrowed := 0
	for i := 0; i < 1500; i++ {
		f := randFilter(r)
		seen := map[*Doc]bool{}
		e.Read(func(rd *Reader) {
			rd.Find("db", "c", f, func(doc *Doc) bool {
				if seen[doc] {
					t.Fatalf("filter %v: document %v returned twice", f, doc.D())
				}
				seen[doc] = true
				return true
			})
		})
		if len(seen) < len(docs) {
			narrowed++
		}
		for i, doc := range docs {
			if naiveMatch(decoded[i], f) && !seen[doc] {
				t.Fatalf("filter %v: Find missed %v", f, decoded[i])
			}
		}
	}
	if narrowed < 150 {
		t.Errorf("only %d of 1500 filters narrowed", narrowed)
	}
	t.Logf("%d of 1500 filters narrowed", narrowed)
}

func TestFindStopsEarly(t *testing.T) {
	e := openMem(t)
	mustWrite(t, e, func(w *Writer) error {
		if _, err := w.CreateIndex("db", "c", IndexSpec{Name: "a", Key: d("a", 1)}); err != nil {
			return err
		}
		for i := range 10 {
			if _, err := w.Insert("db", "c", d("_id", i, "a", bson.A{1, 2, 3})); err != nil {
				return err
			}
		}
		return nil
	})
	for _, f := range []bson.D{nil, d("a", d("$gte", 1))} {
		n := 0
		e.Read(func(r *Reader) { r.Find("db", "c", f, func(*Doc) bool { n++; return n < 3 }) })
		if n != 3 {
			t.Errorf("filter %v: fn called %d times, want 3", f, n)
		}
	}
	if _, err := e.Write(context.Background(), func(*Writer) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestFindInOrder: a range on the field after an index's equality prefix yields the documents
// in order, forwards and backwards, reading only as many as the caller takes; numbers,
// several ranges and multikey indexes are refused (the caller sorts).
func TestFindInOrder(t *testing.T) {
	e := openMem(t)
	mustWrite(t, e, func(w *Writer) error {
		if _, err := w.CreateIndex("db", "c", IndexSpec{Name: "p_t", Key: d("p", 1, "t", 1)}); err != nil {
			return err
		}
		for i := range 100 {
			// Inserted out of order, so that _id order is not t order.
			ts := bson.DateTime(int64((i * 37) % 100))
			if _, err := w.Insert("db", "c", d("_id", i, "p", fmt.Sprint("p", i%2), "t", ts, "n", int64(i))); err != nil {
				return err
			}
		}
		return nil
	})
	dates := func(lo, hi int64) bson.D {
		return d("$gte", bson.DateTime(lo), "$lt", bson.DateTime(hi))
	}
	tests := []struct {
		name   string
		filter bson.D
		desc   bool
		ok     bool
		want   []int64 // the t values of the first 5 read
	}{
		{"ascending", d("p", "p0", "t", dates(10, 90)), false, true, []int64{10, 12, 14, 16, 18}},
		// Candidates are a superset: $lt's bound is read inclusively (the caller filters).
		{"descending", d("p", "p0", "t", dates(10, 90)), true, true, []int64{90, 88, 86, 84, 82}},
		{"descending to the end", d("p", "p1", "t", d("$gte", bson.DateTime(95))), true, true, []int64{99, 97, 95}},
		{"numbers are sorted by the caller", d("p", "p0", "n", d("$gte", int64(3))), false, false, nil},
		{"several ranges are sorted by the caller", d("p", d("$in", bson.A{"p0", "p1"}), "t", dates(0, 10)), false, false, nil},
		{"no range on the field", d("p", "p0"), false, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int64
			reads := 0
			e.Read(func(r *Reader) {
				ok := r.FindInOrder("db", "c", tt.filter, "t", tt.desc, func(doc *Doc) bool {
					reads++
					v, _ := bsonval.Get(doc.D(), "t")
					got = append(got, int64(v.(bson.DateTime)))
					return len(got) < 5
				})
				if ok != tt.ok {
					t.Fatalf("in order = %v, want %v", ok, tt.ok)
				}
			})
			if !tt.ok {
				if reads != 0 {
					t.Fatalf("refused, yet read %d documents", reads)
				}
				return
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) || reads != len(tt.want) {
				t.Fatalf("read %d documents, t = %v; want %v", reads, got, tt.want)
			}
		})
	}
	// An array value makes the index multikey: refused from then on.
	mustWrite(t, e, func(w *Writer) error {
		_, err := w.Insert("db", "c", d("_id", 1000, "p", "p0", "t", bson.A{bson.DateTime(1), bson.DateTime(2)}))
		return err
	})
	e.Read(func(r *Reader) {
		if r.FindInOrder("db", "c", d("p", "p0", "t", dates(10, 90)), "t", false, func(*Doc) bool { return true }) {
			t.Fatal("a multikey index was read in order")
		}
	})
}
