package bsonval

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestCompareTable(t *testing.T) {
	oid1 := bson.ObjectID{1}
	oid2 := bson.ObjectID{2}
	tests := []struct {
		name string
		a, b any
		want int
	}{
		{"int32 vs double equal", int32(1), 1.0, 0},
		{"int64 vs int32 equal", int64(7), int32(7), 0},
		{"int vs double less", int32(1), 1.5, -1},
		{"big int64 vs its rounded double", int64(1<<53 + 1), float64(1 << 53), 1},
		{"max int64 vs 2^63 double", int64(math.MaxInt64), 9223372036854775808.0, -1},
		{"NaN below numbers", math.NaN(), math.Inf(-1), -1},
		{"NaN equals NaN", math.NaN(), math.NaN(), 0},
		{"neg zero equals zero", math.Copysign(0, -1), int32(0), 0},
		{"null below numbers", nil, int32(-5), -1},
		{"undefined equals null", bson.Undefined{}, nil, 0},
		{"minkey below null", bson.MinKey{}, nil, -1},
		{"maxkey above all", bson.MaxKey{}, bson.Regex{Pattern: "a"}, 1},
		{"number below string", int64(1e18), "", -1},
		{"strings bytewise", "B", "a", -1},
		{"symbol equals string", bson.Symbol("x"), "x", 0},
		{"string below object", "z", bson.D{}, -1},
		{"object below array", bson.D{{Key: "a", Value: 1}}, bson.A{}, -1},
		{"doc field type first", bson.D{{Key: "b", Value: int32(1)}}, bson.D{{Key: "a", Value: "x"}}, -1},
		{"doc field name second", bson.D{{Key: "a", Value: int32(1)}}, bson.D{{Key: "b", Value: int32(1)}}, -1},
		{"doc prefix shorter", bson.D{{Key: "a", Value: int32(1)}}, bson.D{{Key: "a", Value: int32(1)}, {Key: "b", Value: nil}}, -1},
		{"array elementwise", bson.A{int32(1), int32(2)}, bson.A{int32(1), int32(3)}, -1},
		{"binary by length", bson.Binary{Data: []byte{9}}, bson.Binary{Data: []byte{1, 1}}, -1},
		{"objectid bytes", oid1, oid2, -1},
		{"false below true", false, true, -1},
		{"bool below date", true, bson.DateTime(0), -1},
		{"date signed", bson.DateTime(-1), bson.DateTime(0), -1},
		{"timestamp unsigned", bson.Timestamp{T: 1, I: 5}, bson.Timestamp{T: 2, I: 0}, -1},
		{"go int literal", 3, int64(3), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Compare(tt.a, tt.b); got != tt.want {
				t.Fatalf("Compare(%v, %v) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
			if got := Compare(tt.b, tt.a); got != -tt.want {
				t.Fatalf("Compare(%v, %v) = %d, want %d (antisymmetry)", tt.b, tt.a, got, -tt.want)
			}
			kc := sign(bytes.Compare(KeyOf(tt.a), KeyOf(tt.b)))
			if kc != tt.want {
				t.Fatalf("key order %d, want %d", kc, tt.want)
			}
		})
	}
}

func sign(c int) int {
	switch {
	case c < 0:
		return -1
	case c > 0:
		return 1
	}
	return 0
}

// randValue draws values that stress the encodings: numbers near type boundaries, strings with
// NUL bytes and shared prefixes, nested documents and arrays.
func randValue(r *rand.Rand, depth int) any {
	k := r.IntN(16)
	if depth > 2 && (k == 9 || k == 10) {
		k = 0
	}
	switch k {
	case 0:
		return int32(r.IntN(7) - 3)
	case 1:
		return int64(r.IntN(7) - 3)
	case 2:
		return float64(r.IntN(13)-6) / 2
	case 3:
		base := int64(1) << 53
		if r.IntN(2) == 0 {
			base = math.MaxInt64 - 600
		}
		return base + int64(r.IntN(5)-2)
	case 4:
		vals := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 9007199254740992, 9223372036854775808.0, math.Copysign(0, -1)}
		return vals[r.IntN(len(vals))]
	case 5:
		alpha := []string{"", "a", "ab", "a\x00", "a\x00b", "b", "\x00", "\xff"}
		return alpha[r.IntN(len(alpha))]
	case 6:
		return nil
	case 7:
		return r.IntN(2) == 0
	case 8:
		return bson.DateTime(r.Int64N(5) - 2)
	case 9:
		n := r.IntN(3)
		d := bson.D{}
		for i := 0; i < n; i++ {
			d = append(d, bson.E{Key: []string{"a", "b", ""}[r.IntN(3)], Value: randValue(r, depth+1)})
		}
		return d
	case 10:
		n := r.IntN(3)
		a := bson.A{}
		for i := 0; i < n; i++ {
			a = append(a, randValue(r, depth+1))
		}
		return a
	case 11:
		return bson.ObjectID{byte(r.IntN(3))}
	case 12:
		return bson.Timestamp{T: uint32(r.IntN(3)), I: uint32(r.IntN(3))}
	case 13:
		return bson.Binary{Subtype: byte(r.IntN(2)), Data: []byte{byte(r.IntN(2))}[:r.IntN(2)]}
	case 14:
		return []any{bson.MinKey{}, bson.MaxKey{}}[r.IntN(2)]
	default:
		return bson.Regex{Pattern: []string{"a", "b"}[r.IntN(2)], Options: []string{"", "i"}[r.IntN(2)]}
	}
}

// TestTruthy checks MongoDB's boolean coercion on each kind of value.
func TestTruthy(t *testing.T) {
	dec0, _ := bson.ParseDecimal128("0")
	dec1, _ := bson.ParseDecimal128("0.5")
	falsy := []any{nil, bson.Null{}, bson.Undefined{}, false, int32(0), int64(0), 0, 0.0, math.Copysign(0, -1), dec0}
	truthy := []any{true, int32(-1), int64(1), 7, 0.5, math.NaN(), dec1, "", bson.D{}, bson.A{}, bson.MinKey{}}
	for _, v := range falsy {
		if Truthy(v) {
			t.Errorf("Truthy(%#v) = true, want false", v)
		}
	}
	for _, v := range truthy {
		if !Truthy(v) {
			t.Errorf("Truthy(%#v) = false, want true", v)
		}
	}
}

// TestKeyOrderMatchesCompare is the randomized cross-check: the byte encoding used by indexes
// must order (and equate) values exactly as Compare does.
func TestKeyOrderMatchesCompare(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		a, b := randValue(r, 0), randValue(r, 0)
		want := Compare(a, b)
		got := sign(bytes.Compare(KeyOf(a), KeyOf(b)))
		if got != want {
			t.Fatalf("values %#v and %#v: Compare=%d key order=%d", a, b, want, got)
		}
		// Compound keys: concatenations must order like tuples.
		c := randValue(r, 0)
		ka := AppendKey(KeyOf(a), c)
		kb := AppendKey(KeyOf(b), c)
		if want != 0 && sign(bytes.Compare(ka, kb)) != want {
			t.Fatalf("compound (%#v,%#v) vs (%#v,%#v): tuple order broken", a, c, b, c)
		}
	}
}

func TestCodecRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		d := bson.D{{Key: "_id", Value: randValue(r, 0)}, {Key: "v", Value: randValue(r, 0)}, {Key: "w", Value: randValue(r, 0)}}
		raw, err := Encode(d)
		if err != nil {
			t.Fatal(err)
		}
		drv, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw, drv) {
			t.Fatalf("Encode(%#v) differs from bson.Marshal", d)
		}
		back, err := Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if Compare(back, d) != 0 {
			t.Fatalf("round trip changed %#v into %#v", d, back)
		}
	}
}

func TestLookup(t *testing.T) {
	d := bson.D{{Key: "a", Value: bson.D{{Key: "b", Value: bson.A{int32(1), bson.D{{Key: "c", Value: "x"}}}}}}}
	tests := []struct {
		path string
		want any
		ok   bool
	}{
		{"a.b.1.c", "x", true},
		{"a.b.0", int32(1), true},
		{"a.b.2", nil, false},
		{"a.x", nil, false},
		{"a.b.0.c", nil, false},
	}
	for _, tt := range tests {
		got, ok := Lookup(d, tt.path)
		if ok != tt.ok || (ok && Compare(got, tt.want) != 0) {
			t.Errorf("Lookup(%q) = %v, %v; want %v, %v", tt.path, got, ok, tt.want, tt.ok)
		}
	}
}

// onlyFields is d's elements whose key is among fields, in order: what DecodeFields returns.
func onlyFields(d bson.D, fields []string) bson.D { return pickFields(d, fields, true) }

// pickFields keeps the elements of d whose keys are among fields (keep) or are not (!keep).
func pickFields(d bson.D, fields []string, keep bool) bson.D {
	out := bson.D{}
	for _, e := range d {
		if slices.Contains(fields, e.Key) == keep {
			out = append(out, e)
		}
	}
	return out
}

// TestDecodeFields: DecodeFields gives the elements of the named keys of the whole decode
// (every occurrence of a repeated key, in order), and SelectFields the encoding of those
// elements or of the others, for random documents and field sets.
func TestDecodeFields(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	keys := []string{"_id", "a", "b", "children", "x.y", ""}
	for range 5000 {
		var d bson.D
		for range r.IntN(6) {
			d = append(d, bson.E{Key: keys[r.IntN(len(keys))], Value: randValue(r, 2)})
		}
		raw, err := Encode(d)
		if err != nil {
			t.Fatal(err)
		}
		var fields []string
		for _, k := range keys {
			if r.IntN(3) == 0 {
				fields = append(fields, k)
			}
		}
		got, err := DecodeFields(raw, fields)
		if err != nil {
			t.Fatal(err)
		}
		if want := onlyFields(d, fields); Compare(got, want) != 0 || len(got) != len(want) {
			t.Fatalf("DecodeFields(%v, %q) = %v, want %v", d, fields, got, want)
		}
		for _, keep := range []bool{true, false} {
			sel, err := SelectFields(raw, fields, keep)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Encode(pickFields(d, fields, keep))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(sel, want) {
				t.Fatalf("SelectFields(%v, %q, %v) = %x, want %x", d, fields, keep, sel, want)
			}
		}
	}
	for _, bad := range [][]byte{nil, {5, 0, 0, 0}, {7, 0, 0, 0, 2, 'a', 0}} {
		if _, err := DecodeFields(bad, []string{"a"}); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeFields(%v): %v, want ErrMalformed", bad, err)
		}
		if _, err := SelectFields(bad, []string{"a"}, true); !errors.Is(err, ErrMalformed) {
			t.Errorf("SelectFields(%v): %v, want ErrMalformed", bad, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	seed, _ := Encode(bson.D{{Key: "a", Value: bson.A{int32(1), "x", bson.D{{Key: "b", Value: nil}}}}})
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		part, perr := DecodeFields(data, []string{"a", "b"}) // never panics
		sel, serr := SelectFields(data, []string{"a"}, false)
		d, err := Decode(data)
		if err != nil {
			return
		}
		if perr != nil || Compare(part, onlyFields(d, []string{"a", "b"})) != 0 {
			t.Fatalf("DecodeFields of a document Decode reads: %v, %v", part, perr)
		}
		if serr != nil {
			t.Fatalf("SelectFields of a document Decode reads: %v", serr)
		}
		if back, err := Decode(sel); err != nil || Compare(back, pickFields(d, []string{"a"}, false)) != 0 {
			t.Fatalf("SelectFields of a document Decode reads: %v, %v", back, err)
		}
		out, err := Encode(d)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := Decode(out)
		if err != nil || Compare(back, d) != 0 {
			t.Fatalf("re-decode mismatch: %v", err)
		}
		_ = KeyOf(d)
	})
}

func BenchmarkDecode(b *testing.B) {
	raw, _ := Encode(bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "id", Value: "server-0001-proc-07"}, {Key: "type", Value: "process"}, {Key: "timestamp", Value: int64(1700000000)}, {Key: "online", Value: int32(42)}, {Key: "version", Value: int64(3)}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// TestValueSize: ValueSize and DocSize agree with the encoder for every value type.
func TestValueSize(t *testing.T) {
	oid := bson.ObjectID{1, 2, 3}
	dec, _ := bson.ParseDecimal128("1.5")
	values := []any{
		1.5, "héllo", "", bson.D{{Key: "a", Value: int32(1)}, {Key: "bb", Value: bson.A{"x", nil}}}, bson.A{}, []any{int64(1), true},
		bson.Binary{Subtype: 0, Data: []byte{1, 2}}, bson.Binary{Subtype: 2, Data: []byte{1, 2, 3}}, bson.Undefined{}, oid, false,
		bson.DateTime(5), nil, bson.Null{}, bson.Regex{Pattern: "a.*", Options: "i"}, bson.DBPointer{DB: "db", Pointer: oid},
		bson.JavaScript("f()"), bson.Symbol("s"), bson.CodeWithScope{Code: "c", Scope: bson.D{{Key: "x", Value: int32(1)}}},
		int32(7), bson.Timestamp{T: 1, I: 2}, int64(8), 9, 1 << 40, dec, bson.MinKey{}, bson.MaxKey{},
		bson.A{bson.A{bson.D{}}, "0123456789", int32(1), int32(2), int32(3), int32(4), int32(5), int32(6), int32(7), int32(8), int32(9)},
	}
	for _, v := range values {
		enc, err := AppendElement(nil, "", v)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if got, want := ValueSize(v), len(enc)-2; got != want {
			t.Errorf("ValueSize(%s) = %d, encoded %d", Format(v), got, want)
		}
	}
	d := bson.D{{Key: "k", Value: values}}
	enc, err := Encode(d)
	if err != nil {
		t.Fatal(err)
	}
	if DocSize(d) != len(enc) {
		t.Errorf("DocSize = %d, encoded %d", DocSize(d), len(enc))
	}
}

// BenchmarkDecodeUpdateCommand decodes an update command of 100 upserts shaped like the bulk
// writer's (what the embedded server decodes per request of a busy ingest).
func BenchmarkDecodeUpdateCommand(b *testing.B) {
	updates := make(bson.A, 100)
	for i := range updates {
		updates[i] = bson.D{
			{Key: "q", Value: bson.D{{Key: "id", Value: fmt.Sprintf("g001-s02-p%03d", i)}, {Key: "type", Value: "process"}, {Key: "timestamp", Value: bson.DateTime(1700000000000)}}},
			{Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{
				{Key: "online", Value: int64(i)}, {Key: "version", Value: int64(1764000000000000000 + i)}, {Key: "project", Value: "bench"},
				{Key: "submission_id", Value: "scale-1764000000-bench-1"}, {Key: "written_at", Value: bson.DateTime(1700000000001)},
			}}}},
			{Key: "upsert", Value: true},
		}
	}
	raw, _ := Encode(bson.D{{Key: "update", Value: "counts"}, {Key: "ordered", Value: false}, {Key: "updates", Value: updates}, {Key: "$db", Value: "rollup"}})
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := Decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}
