package store

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func rawValue(t testing.TB, v any) bson.RawValue {
	t.Helper()
	raw, err := bson.Marshal(bson.D{{Key: "v", Value: v}})
	if err != nil {
		t.Fatal(err)
	}
	return bson.Raw(raw).Lookup("v")
}

// TestCount is the one decision on stored numbers: int32, int64 and doubles without a
// fraction within int64's range are counts, nothing else is.
func TestCount(t *testing.T) {
	tests := []struct {
		v    any
		want int64
		ok   bool
	}{
		{int64(7), 7, true},
		{int32(7), 7, true},
		{int64(-3), -3, true},
		{int64(math.MaxInt64), math.MaxInt64, true},
		{7.0, 7, true},
		{math.Copysign(0, -1), 0, true},
		{1.7e18, 1_700_000_000_000_000_000, true},
		{-9223372036854775808.0, math.MinInt64, true},
		{9223372036854775808.0, 0, false}, // 2^63: beyond int64
		{-9.3e18, 0, false},
		{7.5, 0, false},
		{math.NaN(), 0, false},
		{math.Inf(1), 0, false},
		{math.Inf(-1), 0, false},
		{"7", 0, false},
		{true, 0, false},
		{nil, 0, false},
		{bson.NewDecimal128(0x3040000000000000, 7), 0, false},
		{time.Unix(7, 0), 0, false},
	}
	for _, tc := range tests {
		got, ok := Count(rawValue(t, tc.v))
		if got != tc.want || ok != tc.ok {
			t.Errorf("Count(%T %v) = %d, %v; want %d, %v", tc.v, tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzCount cross-checks Count on doubles with a naive reading: a double is a count exactly
// when converting it to int64 and back gives it again, and it lies within int64's range.
func FuzzCount(f *testing.F) {
	for _, x := range []float64{0, 7, 7.5, -1, 1e18, 9.2e18, 9.3e18, math.NaN(), math.Inf(1)} {
		f.Add(x)
	}
	f.Fuzz(func(t *testing.T, x float64) {
		got, ok := Count(rawValue(t, x))
		inRange := x >= -9223372036854775808.0 && x < 9223372036854775808.0
		want := inRange && float64(int64(x)) == x
		if ok != want || ok && got != int64(x) {
			t.Fatalf("Count(%v) = %d, %v; want ok %v", x, got, ok, want)
		}
	})
}

func rawDoc(t testing.TB, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func leafDoc(drop string, override ...bson.E) bson.D {
	at := time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)
	d := bson.D{
		{Key: "_id", Value: bson.NewObjectID()},
		{Key: "id", Value: "p1"}, {Key: "type", Value: "process"}, {Key: "timestamp", Value: at},
		{Key: "project", Value: "proj"}, {Key: "online", Value: int64(3)}, {Key: "version", Value: int64(7)},
		{Key: "submission_id", Value: "s1"}, {Key: "written_at", Value: at},
	}
	out := d[:0:0]
	for _, e := range d {
		if e.Key == drop {
			continue
		}
		for _, o := range override {
			if o.Key == e.Key {
				e = o
			}
		}
		out = append(out, e)
	}
	return out
}

func TestDecodeLeaf(t *testing.T) {
	want := Leaf{Project: "proj", ID: "p1", Type: "process", Tick: time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC), Online: 3, Version: 7}
	tests := []struct {
		name    string
		doc     bson.D
		wantErr string
	}{
		{"valid", leafDoc(""), ""},
		{"int32 online", leafDoc("", bson.E{Key: "online", Value: int32(3)}), ""},
		{"double online without a fraction", leafDoc("", bson.E{Key: "online", Value: 3.0}), ""},
		{"double version without a fraction", leafDoc("", bson.E{Key: "version", Value: 7.0}), ""},
		{"missing id", leafDoc("id"), "invalid leaf document: id: missing"},
		{"missing project", leafDoc("project"), "project: missing"},
		{"missing timestamp", leafDoc("timestamp"), "timestamp: missing"},
		{"missing version", leafDoc("version"), "version: missing"},
		{"empty type", leafDoc("", bson.E{Key: "type", Value: ""}), "type: empty"},
		{"double online with a fraction", leafDoc("", bson.E{Key: "online", Value: 3.5}), "online: has type double (3.5), want a whole number"},
		{"string version", leafDoc("", bson.E{Key: "version", Value: "7"}), "version: has type string, want a whole number"},
		{"string timestamp", leafDoc("", bson.E{Key: "timestamp", Value: "2026"}), "timestamp: has type string, want date"},
		{"number id", leafDoc("", bson.E{Key: "id", Value: int64(1)}), "id: has type long, want a non-empty string"},
		{"a parent", append(leafDoc(""), bson.E{Key: "rollup", Value: true}), "rollup: a parent document"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeLeaf(rawDoc(t, tc.doc))
			if tc.wantErr == "" {
				if err != nil || got != want {
					t.Fatalf("DecodeLeaf = %+v, %v; want %+v", got, err, want)
				}
				return
			}
			var ie *InvalidDocError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("DecodeLeaf error = %v, want an *InvalidDocError containing %q", err, tc.wantErr)
			}
		})
	}
}

// FuzzDecodeLeaf: any bytes never panic, and an accepted leaf has every field set.
func FuzzDecodeLeaf(f *testing.F) {
	f.Add([]byte(rawDoc(f, leafDoc(""))))
	f.Add([]byte(rawDoc(f, leafDoc("online"))))
	f.Add([]byte{5, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := DecodeLeaf(bson.Raw(b))
		if err != nil {
			return
		}
		if l.Project == "" || l.ID == "" || l.Type == "" {
			t.Fatalf("accepted leaf with an empty name: %+v", l)
		}
	})
}

// TestLeafUpsertEncoding: the hand-encoded upsert equals the readable bson.D form, and the
// returned documents do not share bytes a later append could overwrite.
func TestLeafUpsertEncoding(t *testing.T) {
	w := LeafWrite{ID: "g1-s1-p1", Type: "process", Tick: time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC), Project: "demo",
		Online: 42, Version: 1767323112512000000, SubmissionID: "agent-7"}
	written := time.Date(2026, 1, 2, 3, 6, 1, 0, time.UTC)
	filter, update, buf := AppendLeafUpsert(make([]byte, 0, 8), w, written)
	if got, want := filter.String(), rawDoc(t, LeafFilter(w)).String(); got != want {
		t.Errorf("filter:\n got %s\nwant %s", got, want)
	}
	if got, want := update.String(), rawDoc(t, LeafUpdate(w, written)).String(); got != want {
		t.Errorf("update:\n got %s\nwant %s", got, want)
	}
	before := update.String()
	_, _, _ = AppendLeafUpsert(buf, w, written)
	if update.String() != before {
		t.Error("a later append changed the update")
	}
	// What the update stores decodes back as the same leaf.
	set := rawDoc(t, append(KeyFilter(Key{w.ID, w.Type, w.Tick}), LeafUpdate(w, written)[0].Value.(bson.D)...))
	l, err := DecodeLeaf(set)
	if err != nil || l != (Leaf{Project: w.Project, ID: w.ID, Type: w.Type, Tick: w.Tick, Online: w.Online, Version: w.Version}) {
		t.Fatalf("stored leaf decodes to %+v, %v", l, err)
	}
}

func TestDecodeNode(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)
	leaf := rawDoc(t, leafDoc("", bson.E{Key: "online", Value: 4.0}))
	n, err := DecodeNode(leaf)
	if err != nil || n != (Node{ID: "p1", Type: "process", Project: "proj", Tick: at, Online: 4, Reported: 1, Expected: 1}) {
		t.Fatalf("leaf = %+v, %v", n, err)
	}
	parent := rawDoc(t, ParentFields(sampleParent(), at))
	n, err = DecodeNode(parent)
	if err != nil || n != (Node{ID: "g03-s0012", Type: "server", Project: "demo", Tick: testTick(), Online: 7, Reported: 2, Expected: 3, Parent: true}) {
		t.Fatalf("parent = %+v, %v", n, err)
	}
	bad := rawDoc(t, append(ParentFields(sampleParent(), at)[:4:4], bson.E{Key: "online", Value: 7.25}, bson.E{Key: "rollup", Value: true}))
	if _, err := DecodeNode(bad); err == nil || err.Error() != "invalid parent document: online: has type double (7.25), want a whole number (int, long, or a double without a fraction)" {
		t.Fatalf("bad parent: %v", err)
	}
	if _, err := DecodeNode(rawDoc(t, leafDoc("", bson.E{Key: "online", Value: "4"}))); err == nil || !strings.HasPrefix(err.Error(), "invalid leaf document: online") {
		t.Fatalf("bad leaf: %v", err)
	}
}

// FuzzDecodeNode: never panics; whatever DecodeParent accepts, DecodeNode reads with the same
// totals.
func FuzzDecodeNode(f *testing.F) {
	f.Add([]byte(rawDoc(f, leafDoc(""))))
	f.Add([]byte(rawDoc(f, ParentFields(sampleParent(), testTick()))))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := DecodeNode(bson.Raw(b))
		p, perr := DecodeParent(bson.Raw(b))
		if perr != nil {
			return
		}
		if err != nil || !n.Parent || n.Online != p.Online || n.Reported != p.Reported || n.Expected != p.Expected {
			t.Fatalf("DecodeParent = %+v but DecodeNode = %+v, %v", p, n, err)
		}
	})
}
