package aggregate

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

func mustCompile(t testing.TB, pipeline ...bson.D) *Pipeline {
	t.Helper()
	p, err := Compile(pipeline)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return p
}

func TestLeadingMatch(t *testing.T) {
	f := bson.D{{Key: "type", Value: "p"}}
	tests := []struct {
		name     string
		pipeline []bson.D
		want     bson.D
	}{
		{"leading match", []bson.D{{{Key: "$match", Value: f}}, {{Key: "$limit", Value: 1}}}, f},
		{"match not first", []bson.D{{{Key: "$limit", Value: 1}}, {{Key: "$match", Value: f}}}, nil},
		{"no stages", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustCompile(t, tt.pipeline...).LeadingMatch()
			if fmt.Sprint(got) != fmt.Sprint(tt.want) || (got == nil) != (tt.want == nil) {
				t.Fatalf("LeadingMatch = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestGoLiterals checks pipelines written with Go types (int, []any) behave like decoded ones.
func TestGoLiterals(t *testing.T) {
	p := mustCompile(t,
		bson.D{{Key: "$group", Value: bson.D{
			{Key: "_id", Value: nil},
			{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}},
			{Key: "big", Value: bson.D{{Key: "$sum", Value: 1 << 40}}},
			{Key: "lst", Value: bson.D{{Key: "$push", Value: bson.D{{Key: "x", Value: []any{1, "$a"}}}}}},
		}}},
		bson.D{{Key: "$limit", Value: 5}},
	)
	got, err := p.Run(sliceSource([]bson.D{{{Key: "a", Value: int32(7)}}, {}}))
	if err != nil {
		t.Fatal(err)
	}
	want := []bson.D{{{Key: "_id", Value: nil}, {Key: "n", Value: int32(2)}, {Key: "big", Value: int64(2 << 40)},
		{Key: "lst", Value: bson.A{bson.D{{Key: "x", Value: bson.A{int32(1), int32(7)}}}, bson.D{{Key: "x", Value: bson.A{int32(1), nil}}}}}}}
	if canon(t, got) != canon(t, want) {
		t.Fatalf("got %s, want %s", canon(t, got), canon(t, want))
	}
}

func TestRunStopsReadingAfterLimit(t *testing.T) {
	tests := []struct {
		name     string
		pipeline []bson.D
		wantRead int
		wantOut  int
	}{
		{"limit", []bson.D{{{Key: "$limit", Value: 3}}}, 3, 3},
		{"skip then limit", []bson.D{{{Key: "$skip", Value: 2}}, {{Key: "$limit", Value: 3}}}, 5, 3},
		{"limit then group", []bson.D{{{Key: "$limit", Value: 4}}, {{Key: "$count", Value: "n"}}}, 4, 1},
		{"sort then limit reads everything", []bson.D{{{Key: "$sort", Value: bson.D{{Key: "i", Value: -1}}}}, {{Key: "$limit", Value: 2}}}, 100, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := 0
			src := func(yield func(bson.D) bool) {
				for i := range 100 {
					read++
					if !yield(bson.D{{Key: "i", Value: int32(i)}}) {
						return
					}
				}
			}
			out, err := mustCompile(t, tt.pipeline...).Run(src)
			if err != nil {
				t.Fatal(err)
			}
			if read != tt.wantRead || len(out) != tt.wantOut {
				t.Fatalf("read %d docs and output %d, want %d and %d", read, len(out), tt.wantRead, tt.wantOut)
			}
		})
	}
}

func TestRunEmptyOutputIsNonNil(t *testing.T) {
	out, err := mustCompile(t, bson.D{{Key: "$match", Value: bson.D{{Key: "a", Value: 1}}}}).Run(sliceSource(nil))
	if err != nil || out == nil || len(out) != 0 {
		t.Fatalf("got %v, %v; want an empty non-nil slice", out, err)
	}
}

func TestMemoryLimit(t *testing.T) {
	big := make([]byte, 1000)
	docs := make([]bson.D, 200)
	for i := range docs {
		docs[i] = bson.D{{Key: "i", Value: int32(i)}, {Key: "s", Value: fmt.Sprint(i, string(big))}}
	}
	group := bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "all", Value: bson.D{{Key: "$push", Value: "$s"}}}}}}
	groupMany := bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$s"}, {Key: "i", Value: bson.D{{Key: "$first", Value: "$i"}}}}}}
	groupSmall := bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "n", Value: bson.D{{Key: "$sum", Value: "$i"}}}}}}
	sortAll := bson.D{{Key: "$sort", Value: bson.D{{Key: "i", Value: -1}}}}
	limit := bson.D{{Key: "$limit", Value: 3}}
	tests := []struct {
		name      string
		pipeline  []bson.D
		allowDisk bool
		wantCode  int32
		wantMsg   string
	}{
		{"group push over the limit", []bson.D{group}, false, 292, "Exceeded memory limit for $group, but didn't allow external sort. Pass allowDiskUse:true to opt in."},
		{"group push with allowDiskUse", []bson.D{group}, true, 0, ""},
		{"group with large keys", []bson.D{groupMany}, false, 292, "$group"},
		{"group sum stays small", []bson.D{groupSmall}, false, 0, ""},
		{"sort over the limit", []bson.D{sortAll}, false, 292, "Sort exceeded memory limit of 50000 bytes, but did not opt in to external sorting."},
		{"sort with allowDiskUse", []bson.D{sortAll}, true, 0, ""},
		{"top-k sort stays small", []bson.D{sortAll, limit}, false, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, tt.pipeline...)
			p.maxMemory = 50000
			p.SetAllowDiskUse(tt.allowDisk)
			out, err := p.Run(sliceSource(docs))
			if tt.wantCode == 0 {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if len(out) == 0 {
					t.Fatal("no output")
				}
				return
			}
			if err == nil {
				t.Fatalf("want code %d, got %d documents", tt.wantCode, len(out))
			}
			if me := mongoerr.As(err); me.Code != tt.wantCode || !strings.Contains(me.Msg, tt.wantMsg) {
				t.Fatalf("got %v, want code %d %q", err, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

func TestTopKSortMatchesFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for iter := range 50 {
		n := rng.IntN(400)
		k := 1 + rng.IntN(20)
		docs := make([]bson.D, n)
		for i := range docs {
			docs[i] = bson.D{{Key: "_id", Value: int32(i)}, {Key: "k", Value: int32(rng.IntN(10))}}
		}
		s := bson.D{{Key: "$sort", Value: bson.D{{Key: "k", Value: 1}}}}
		full, err := mustCompile(t, s).Run(sliceSource(docs))
		if err != nil {
			t.Fatal(err)
		}
		top, err := mustCompile(t, s, bson.D{{Key: "$limit", Value: k}}).Run(sliceSource(docs))
		if err != nil {
			t.Fatal(err)
		}
		if len(full) > k {
			full = full[:k]
		}
		if canon(t, full) != canon(t, top) {
			t.Fatalf("iteration %d (n=%d k=%d): top-k %s != prefix of full sort %s", iter, n, k, canon(t, top), canon(t, full))
		}
	}
}

func TestConcurrentRuns(t *testing.T) {
	p := mustCompile(t,
		bson.D{{Key: "$unwind", Value: "$a"}},
		bson.D{{Key: "$addFields", Value: bson.D{{Key: "b.c", Value: "$a"}}}},
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$g"}, {Key: "s", Value: bson.D{{Key: "$sum", Value: "$b.c"}}}}}},
		bson.D{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
	)
	docs := []bson.D{
		{{Key: "g", Value: int32(1)}, {Key: "a", Value: bson.A{int32(1), int32(2)}}, {Key: "b", Value: bson.D{{Key: "x", Value: int32(0)}}}},
		{{Key: "g", Value: int32(2)}, {Key: "a", Value: bson.A{int32(3)}}},
	}
	want := `[{"_id":{"$numberInt":"1"},"s":{"$numberInt":"3"}}, {"_id":{"$numberInt":"2"},"s":{"$numberInt":"3"}}]`
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				out, err := p.Run(sliceSource(docs))
				if err != nil {
					errs <- err.Error()
					return
				}
				if got := canon(t, out); got != want {
					errs <- got
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("concurrent run: %s", e)
	}
}

// ---- randomized cross-check of $group against a naive implementation ----

func randomValue(rng *rand.Rand) (any, bool) {
	switch rng.IntN(14) {
	case 0:
		return nil, false // missing
	case 1:
		return nil, true
	case 2:
		return "s" + fmt.Sprint(rng.IntN(3)), true
	case 3:
		return rng.IntN(2) == 0, true
	case 4:
		return int32(math.MaxInt32 - rng.IntN(3)), true
	case 5:
		return int32(math.MinInt32 + rng.IntN(3)), true
	case 6:
		return int64(math.MaxInt64 - rng.Int64N(1000)), true
	case 7:
		return rng.Int64N(1<<62) - 1<<61, true
	case 8:
		return float64(rng.IntN(2000)-1000) / 8, true
	case 9:
		return (rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(30)-10)), true
	case 10:
		return 0.1, true
	case 11:
		return bson.D{{Key: "x", Value: int32(rng.IntN(2))}}, true
	}
	return int32(rng.IntN(200) - 100), true
}

func randomGroupKey(rng *rand.Rand) (any, bool) {
	keys := []any{int32(1), int64(1), 1.0, int32(2), "a", nil, bson.D{{Key: "k", Value: "a"}}, bson.A{int32(1)}}
	i := rng.IntN(len(keys) + 1)
	if i == len(keys) {
		return nil, false
	}
	return keys[i], true
}

type naiveGroup struct {
	id   any
	vals []any // numeric and other present values, in input order (nil for null)
}

func naiveSum(vals []any, avg bool) any {
	exact := new(big.Rat)
	kind, count := kindInt, 0
	for _, v := range vals {
		switch x := v.(type) {
		case int32:
			exact.Add(exact, new(big.Rat).SetInt64(int64(x)))
		case int64:
			exact.Add(exact, new(big.Rat).SetInt64(x))
			kind = max(kind, kindLong)
		case float64:
			exact.Add(exact, new(big.Rat).SetFloat64(x))
			kind = kindDouble
		default:
			continue
		}
		count++
	}
	nearest, _ := exact.Float64()
	if avg {
		if count == 0 {
			return nil
		}
		return nearest / float64(count)
	}
	if kind != kindDouble && exact.IsInt() {
		n := exact.Num()
		if kind == kindInt && n.IsInt64() && n.Int64() >= math.MinInt32 && n.Int64() <= math.MaxInt32 {
			return int32(n.Int64())
		}
		if n.IsInt64() {
			return n.Int64()
		}
	}
	return nearest
}

func magnitude(vals []any) float64 {
	m := 0.0
	for _, v := range vals {
		if f, ok := bsonval.ToFloat(v); ok && isNumericValue(v) {
			m += math.Abs(f)
		}
	}
	return m
}

func numericCount(vals []any) int {
	n := 0
	for _, v := range vals {
		if isNumericValue(v) {
			n++
		}
	}
	return n
}

func isNumericValue(v any) bool {
	switch v.(type) {
	case int32, int64, float64:
		return true
	}
	return false
}

// naiveExtreme returns the first value among the smallest (dir 1) or largest (dir -1)
// non-null values by stable sorting, or nil when there are none.
func naiveExtreme(vals []any, dir int) any {
	var kept []any
	for _, v := range vals {
		if v != nil {
			kept = append(kept, v)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	sort.SliceStable(kept, func(i, j int) bool { return dir*bsonval.Compare(kept[i], kept[j]) < 0 })
	return kept[0]
}

func TestGroupCrossCheckNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := mustCompile(t, bson.D{{Key: "$group", Value: bson.D{
		{Key: "_id", Value: "$g"},
		{Key: "s", Value: bson.D{{Key: "$sum", Value: "$v"}}},
		{Key: "mn", Value: bson.D{{Key: "$min", Value: "$v"}}},
		{Key: "mx", Value: bson.D{{Key: "$max", Value: "$v"}}},
		{Key: "a", Value: bson.D{{Key: "$avg", Value: "$v"}}},
		{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}},
	}}})
	inexact := 0
	defer func() { t.Logf("%d sums differed from the correctly rounded value within the bound", inexact) }()
	for iter := range 400 {
		docs := make([]bson.D, rng.IntN(40))
		var groups []*naiveGroup
		for i := range docs {
			var d bson.D
			g, hasG := randomGroupKey(rng)
			if hasG {
				d = append(d, bson.E{Key: "g", Value: g})
			}
			v, hasV := randomValue(rng)
			if hasV {
				d = append(d, bson.E{Key: "v", Value: v})
			}
			docs[i] = d
			var ng *naiveGroup
			for _, cand := range groups {
				if bsonval.Compare(cand.id, g) == 0 {
					ng = cand
				}
			}
			if ng == nil {
				ng = &naiveGroup{id: g}
				groups = append(groups, ng)
			}
			ng.vals = append(ng.vals, v)
			if !hasV {
				ng.vals[len(ng.vals)-1] = missingValue{}
			}
		}
		var want []bson.D
		for _, ng := range groups {
			var present []any
			count := int32(len(ng.vals))
			for _, v := range ng.vals {
				if !isMissing(v) {
					present = append(present, v)
				}
			}
			want = append(want, bson.D{
				{Key: "_id", Value: ng.id},
				{Key: "s", Value: naiveSum(present, false)},
				{Key: "mn", Value: naiveExtreme(present, 1)},
				{Key: "mx", Value: naiveExtreme(present, -1)},
				{Key: "a", Value: naiveSum(present, true)},
				{Key: "n", Value: count},
			})
		}
		got, err := p.Run(sliceSource(docs))
		if err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		// MongoDB's compensated sum reports only the leading double of its (sum, addend) pair,
		// which is not always the correctly rounded sum (after cancellation it can be off by
		// the addend). Accept a double within the error bound of the pair: 2^-51 times the
		// sum of the magnitudes of the inputs.
		if len(got) == len(want) {
			for i, ng := range groups {
				for _, f := range []int{1, 4} {
					g, okG := got[i][f].Value.(float64)
					w, okW := want[i][f].Value.(float64)
					if !okG || !okW || g == w || math.IsNaN(g) {
						continue
					}
					tol := magnitude(ng.vals) * 0x1p-51
					if f == 4 {
						tol /= float64(numericCount(ng.vals))
					}
					if math.Abs(g-w) <= tol {
						want[i][f].Value = g
						inexact++
					}
				}
			}
		}
		if g, w := canon(t, got), canon(t, want); g != w {
			t.Fatalf("iteration %d: input %s\n got  %s\n want %s", iter, canon(t, docs), g, w)
		}
	}
}

// TestDDSumExactForIntegers checks the compensated sum against exact big-integer sums.
func TestDDSumExactForIntegers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range 2000 {
		var s ddSum
		exact := new(big.Int)
		for range rng.IntN(50) {
			x := int64(rng.Uint64())
			if rng.IntN(3) == 0 {
				x = int64(int32(x))
			}
			s.addLong(x)
			exact.Add(exact, big.NewInt(x))
		}
		if !exact.IsInt64() {
			if s.fitsLong() {
				t.Fatalf("iteration %d: sum %v out of range but fitsLong", iter, exact)
			}
			continue
		}
		if !s.fitsLong() || s.long() != exact.Int64() {
			t.Fatalf("iteration %d: got %d (fits %v), want %v", iter, s.long(), s.fitsLong(), exact)
		}
	}
}

func TestArithmeticEdges(t *testing.T) {
	tests := []struct {
		name string
		got  func() (any, error)
		want any
	}{
		{"mul int64 overflow to double", func() (any, error) { return evalMultiply([]any{int64(math.MaxInt64), int32(2)}) }, float64(math.MaxInt64) * 2},
		{"mul int32 overflow to int64", func() (any, error) { return evalMultiply([]any{int32(math.MaxInt32), int32(2)}) }, int64(math.MaxInt32) * 2},
		{"mul MinInt64 by -1 overflows", func() (any, error) { return evalMultiply([]any{int64(math.MinInt64), int32(-1)}) }, -float64(math.MinInt64)},
		{"sub int64 overflow to double", func() (any, error) { return evalSubtract(int64(math.MinInt64), int32(1)) }, float64(math.MinInt64) - 1},
		{"sub int32 overflow to int64", func() (any, error) { return evalSubtract(int32(math.MinInt32), int32(1)) }, int64(math.MinInt32) - 1},
		{"mod MinInt64 by -1", func() (any, error) { return evalMod(int64(math.MinInt64), int64(-1)) }, int64(0)},
		{"mod by non-int32 double uses fmod", func() (any, error) { return evalMod(int32(7), 1e10) }, 7.0},
		{"mod negative double", func() (any, error) { return evalMod(-7.5, int32(2)) }, -1.5},
		{"add many int32 stays int32", func() (any, error) { return evalAdd([]any{int32(1), int32(2), int32(3)}) }, int32(6)},
		{"add double then date", func() (any, error) { return evalAdd([]any{0.6, bson.DateTime(10)}) }, bson.DateTime(11)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.got()
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%T %v", got, got) != fmt.Sprintf("%T %v", tt.want, tt.want) {
				t.Fatalf("got %T %v, want %T %v", got, got, tt.want, tt.want)
			}
		})
	}
}

// ---- fuzzing ----

// FuzzCompile decodes arbitrary bytes as a BSON document {p: [stages], d: [docs]}, compiles
// the pipeline and runs it over d plus a few fixed documents: nothing may panic, and every
// error must be a *mongoerr.Error.
func FuzzCompile(f *testing.F) {
	seeds := [][]bson.D{
		{{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$a.b"}, {Key: "s", Value: bson.D{{Key: "$sum", Value: "$v"}}}}}}},
		{{{Key: "$project", Value: bson.D{{Key: "a.b", Value: int32(1)}, {Key: "c", Value: bson.D{{Key: "$add", Value: bson.A{"$x", int32(1)}}}}}}}},
		{{{Key: "$unwind", Value: bson.D{{Key: "path", Value: "$a"}, {Key: "includeArrayIndex", Value: "i.j"}, {Key: "preserveNullAndEmptyArrays", Value: true}}}}},
		{{{Key: "$addFields", Value: bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: "$$ROOT"}}}}}}, {{Key: "$unset", Value: "a.b._id"}}},
		{{{Key: "$sort", Value: bson.D{{Key: "a", Value: int32(-1)}}}}, {{Key: "$limit", Value: int32(2)}}, {{Key: "$count", Value: "n"}}},
	}
	for _, s := range seeds {
		p := make(bson.A, len(s))
		for i, st := range s {
			p[i] = st
		}
		raw, err := bsonval.Encode(bson.D{{Key: "p", Value: p}, {Key: "d", Value: bson.A{bson.D{{Key: "a", Value: bson.A{int32(1), bson.D{{Key: "b", Value: int32(2)}}}}}}}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, sc := range loadScenarios(f) {
		p, d := make(bson.A, len(sc.pipeline)), make(bson.A, len(sc.docs))
		for i, st := range sc.pipeline {
			p[i] = st
		}
		for i, doc := range sc.docs {
			d[i] = doc
		}
		raw, err := bsonval.Encode(bson.D{{Key: "p", Value: p}, {Key: "d", Value: d}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	fixed := []bson.D{
		{},
		{{Key: "_id", Value: int32(1)}, {Key: "a", Value: bson.A{}}, {Key: "v", Value: 1.5}},
		{{Key: "a", Value: bson.D{{Key: "b", Value: bson.A{int32(1), nil, "x"}}}}, {Key: "x", Value: int64(math.MaxInt64)}},
		{{Key: "a", Value: int32(5)}, {Key: "x", Value: bson.DateTime(5)}, {Key: "v", Value: bson.Decimal128{}}},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := bsonval.Decode(data)
		if err != nil {
			return
		}
		var pipeline []bson.D
		docs := append([]bson.D(nil), fixed...)
		for _, e := range d {
			arr, ok := e.Value.(bson.A)
			if !ok {
				continue
			}
			for _, x := range arr {
				if xd, ok := x.(bson.D); ok {
					if e.Key == "d" {
						docs = append(docs, xd)
					} else {
						pipeline = append(pipeline, xd)
					}
				}
			}
		}
		p, err := Compile(pipeline)
		if err != nil {
			if mongoerr.As(err).Code == mongoerr.InternalError {
				t.Fatalf("non-mongoerr compile error: %v", err)
			}
			return
		}
		p.maxMemory = 1 << 20
		if _, err := p.Run(sliceSource(docs)); err != nil && mongoerr.As(err).Code == mongoerr.InternalError {
			t.Fatalf("non-mongoerr run error: %v", err)
		}
	})
}

// ---- benchmark ----

// BenchmarkMatchGroupSum runs $match + $group $sum over 100,000 documents in 20 groups.
func BenchmarkMatchGroupSum(b *testing.B) {
	const n = 100000
	docs := make([]bson.D, n)
	for i := range docs {
		typ := "player"
		if i%7 == 0 {
			typ = "guild"
		}
		docs[i] = bson.D{
			{Key: "_id", Value: bson.NewObjectID()},
			{Key: "id", Value: fmt.Sprintf("server-%02d", i%20)},
			{Key: "type", Value: typ},
			{Key: "timestamp", Value: int64(1700000000 + i/20)},
			{Key: "online", Value: int32(i % 100)},
		}
	}
	p := mustCompile(b,
		bson.D{{Key: "$match", Value: bson.D{{Key: "type", Value: "player"}}}},
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$id"}, {Key: "online", Value: bson.D{{Key: "$sum", Value: "$online"}}}}}},
	)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		out, err := p.Run(sliceSource(docs))
		if err != nil || len(out) != 20 {
			b.Fatalf("got %d groups, err %v", len(out), err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
}

func TestRenderAndTypeName(t *testing.T) {
	tests := []struct {
		v          any
		name, text string
	}{
		{missingValue{}, "missing", "MISSING"},
		{nil, "null", "null"},
		{true, "bool", "true"},
		{int32(-1), "int", "-1"},
		{int64(5), "long", "5"},
		{1.5, "double", "1.5"},
		{-2.0, "double", "-2.0"},
		{1e20, "double", "1e+20"},
		{math.NaN(), "double", "nan.0"},
		{math.Inf(-1), "double", "-inf.0"},
		{"x", "string", `"x"`},
		{bson.A{}, "array", "[]"},
		{bson.A{int32(1), "a"}, "array", `[ 1, "a" ]`},
		{bson.D{}, "object", "{}"},
		{bson.D{{Key: "a", Value: int32(1)}}, "object", "{ a: 1 }"},
		{bson.DateTime(0), "date", "date"},
		{bson.ObjectID{}, "objectId", "objectId"},
		{bson.Decimal128{}, "decimal", "decimal"},
		{bson.Timestamp{}, "timestamp", "timestamp"},
		{bson.Binary{}, "binData", "binData"},
		{bson.Regex{}, "regex", "regex"},
		{bson.MinKey{}, "minKey", "minKey"},
		{bson.MaxKey{}, "maxKey", "maxKey"},
		{bson.Undefined{}, "undefined", "undefined"},
		{bson.Symbol("s"), "symbol", "symbol"},
		{bson.JavaScript("f"), "javascript", "javascript"},
	}
	for _, tt := range tests {
		if got := typeName(tt.v); got != tt.name {
			t.Errorf("typeName(%#v) = %q, want %q", tt.v, got, tt.name)
		}
		if got := renderValue(tt.v); got != tt.text {
			t.Errorf("renderValue(%#v) = %q, want %q", tt.v, got, tt.text)
		}
	}
}
