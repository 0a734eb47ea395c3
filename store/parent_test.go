package store

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/rollup"
)

func testTick() time.Time { return time.Date(2025, 3, 1, 12, 5, 0, 0, time.UTC) }

func sampleParent() rollup.Parent {
	return rollup.Parent{
		ID: "g03-s0012", Type: "server", Project: "demo", Timestamp: testTick(),
		Online: 7, Rev: 12, Reported: 2, Expected: 3, TreeVersion: 4,
		Children: map[string]rollup.ChildState{
			"g03-s0012-p07": {Type: "process", Online: 4, Version: 1740830700123456789, Reported: 1, Expected: 1},
			"g03-s0012-p01": {Type: "process", Online: 3, Version: 1740830700000000001, Reported: 1, Expected: 1},
		},
	}
}

// setDoc returns the $set document of p's update as stored BSON.
func setDoc(t testing.TB, p rollup.Parent, writtenAt time.Time) bson.Raw {
	t.Helper()
	upd := ParentUpdate(p, writtenAt)
	if len(upd) != 1 || upd[0].Key != "$set" {
		t.Fatalf("update is not one $set: %v", upd)
	}
	raw, err := bson.Marshal(upd[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestUpdateRoundTrip(t *testing.T) {
	p := sampleParent()
	written := time.Date(2025, 3, 1, 12, 6, 1, 0, time.UTC)
	raw := setDoc(t, p, written)
	got, err := DecodeParent(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, p)
	}
	// The stored shape: int64 numbers, a DateTime timestamp, rollup: true, children in id order.
	want := `{"id": "g03-s0012","type": "server","timestamp": {"$date":{"$numberLong":"1740830700000"}},` +
		`"project": "demo","online": {"$numberLong":"7"},"version": {"$numberLong":"12"},` +
		`"children": {"g03-s0012-p01": {"type": "process","online": {"$numberLong":"3"},"version": {"$numberLong":"1740830700000000001"},"reported": {"$numberLong":"1"},"expected": {"$numberLong":"1"}},` +
		`"g03-s0012-p07": {"type": "process","online": {"$numberLong":"4"},"version": {"$numberLong":"1740830700123456789"},"reported": {"$numberLong":"1"},"expected": {"$numberLong":"1"}}},` +
		`"reported": {"$numberLong":"2"},"expected": {"$numberLong":"3"},"tree_version": {"$numberLong":"4"},` +
		`"written_at": {"$date":{"$numberLong":"1740830761000"}},"rollup": true}`
	if got := raw.String(); got != want {
		t.Errorf("stored document:\n got %s\nwant %s", got, want)
	}
	// With _id (as read back from the collection) and an empty children document.
	p.Children = map[string]rollup.ChildState{}
	p.Online, p.Reported = 0, 0
	doc := append(bson.D{{Key: "_id", Value: bson.NewObjectID()}}, ParentFields(p, written)...)
	raw, err = bson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeParent(raw); err != nil || !reflect.DeepEqual(got, p) {
		t.Errorf("with _id: %+v, %v", got, err)
	}
}

func TestDecodeParentErrors(t *testing.T) {
	good := func() bson.D { return ParentFields(sampleParent(), testTick()) }
	set := func(d bson.D, key string, v any) bson.D {
		for i := range d {
			if d[i].Key == key {
				d[i].Value = v
				return d
			}
		}
		return append(d, bson.E{Key: key, Value: v})
	}
	without := func(d bson.D, key string) bson.D {
		out := bson.D{}
		for _, e := range d {
			if e.Key != key {
				out = append(out, e)
			}
		}
		return out
	}
	child := func(v any) bson.D {
		return set(good(), FieldChildren, bson.D{{Key: "p1", Value: v}})
	}
	okChild := func() bson.D {
		return bson.D{{Key: "type", Value: "process"}, {Key: "online", Value: int64(1)}, {Key: "version", Value: int64(1)}, {Key: "reported", Value: int64(1)}, {Key: "expected", Value: int64(1)}}
	}
	tests := []struct {
		name  string
		doc   bson.D
		field string
		want  string
	}{
		{"leaf document", bson.D{{Key: "id", Value: "p1"}, {Key: "type", Value: "process"}, {Key: "submission_id", Value: "x"}}, "submission_id", "unknown field"},
		{"missing rollup", without(good(), "rollup"), "rollup", "missing"},
		{"rollup false", set(good(), "rollup", false), "rollup", "must be true"},
		{"missing children", without(good(), "children"), "children", "missing"},
		{"missing id", without(good(), "id"), "id", "missing"},
		{"online fraction", set(good(), "online", 7.5), "online", "has type double (7.5), want a whole number (int, long, or a double without a fraction)"},
		{"online NaN", set(good(), "online", math.NaN()), "online", "has type double (NaN), want a whole number (int, long, or a double without a fraction)"},
		{"online beyond int64", set(good(), "online", 9.3e18), "online", "has type double (9.3e+18), want a whole number (int, long, or a double without a fraction)"},
		{"online decimal", set(good(), "online", bson.NewDecimal128(0x3040000000000000, 7)), "online", "has type decimal (7), want a whole number (int, long, or a double without a fraction)"},
		{"version string", set(good(), "version", "12"), "version", "has type string, want a whole number (int, long, or a double without a fraction)"},
		{"id number", set(good(), "id", int64(3)), "id", "has type long, want string"},
		{"timestamp string", set(good(), "timestamp", "2025-03-01"), "timestamp", "has type string, want date"},
		{"written_at int", set(good(), "written_at", int64(1)), "written_at", "has type long, want date"},
		{"tree_version negative", set(good(), "tree_version", int64(-1)), "tree_version", "out of range: -1"},
		{"children array", set(good(), "children", bson.A{}), "children", "has type array, want object"},
		{"child not a document", child(int64(3)), "children.p1", "has type long, want object"},
		{"child missing field", child(okChild()[:4]), "children.p1.expected", "missing"},
		{"child extra field", child(append(okChild(), bson.E{Key: "x", Value: 1})), "children.p1.x", "unknown field"},
		{"child duplicate field", child(append(okChild(), bson.E{Key: "online", Value: int64(2)})), "children.p1.online", "duplicate field"},
		{"child online double", child(set(okChild(), "online", 1.5)), "children.p1.online", "has type double (1.5), want a whole number (int, long, or a double without a fraction)"},
		{"duplicate child", set(good(), FieldChildren, bson.D{{Key: "p1", Value: okChild()}, {Key: "p1", Value: okChild()}}), "children.p1", "duplicate child"},
		{"duplicate field", append(good(), bson.E{Key: "online", Value: int64(1)}), "online", "duplicate field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := bson.Marshal(tt.doc)
			if err != nil {
				t.Fatal(err)
			}
			_, err = DecodeParent(raw)
			var de *InvalidDocError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want an *InvalidDocError", err)
			}
			if de.Field != tt.field || de.Reason != tt.want {
				t.Errorf("err = %q (field %q, reason %q), want field %q reason %q", err, de.Field, de.Reason, tt.field, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "invalid parent document: "+tt.field) {
				t.Errorf("message %q does not name the field", err)
			}
		})
	}
	// int32 numbers and doubles without a fraction are counts too (Count).
	if p, err := DecodeParent(mustMarshal(t, set(good(), "online", int32(7)))); err != nil || p.Online != 7 {
		t.Errorf("int32 online: %+v, %v", p, err)
	}
	if p, err := DecodeParent(mustMarshal(t, set(good(), "online", 7.0))); err != nil || p.Online != 7 {
		t.Errorf("double online 7.0: %+v, %v", p, err)
	}
	if p, err := DecodeParent(mustMarshal(t, child(set(okChild(), "online", 2.0)))); err != nil || p.Children["p1"].Online != 2 {
		t.Errorf("double child online 2.0: %+v, %v", p, err)
	}
	// Not BSON at all.
	if _, err := DecodeParent(bson.Raw{1, 2, 3}); err == nil {
		t.Error("garbage accepted")
	}
}

func mustMarshal(t testing.TB, v any) bson.Raw {
	t.Helper()
	raw, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// FuzzDecodeParent: never panics; whatever it accepts stores back (Update) to a document
// that decodes to the same Parent.
func FuzzDecodeParent(f *testing.F) {
	f.Add([]byte(setDoc(f, sampleParent(), testTick())))
	f.Add([]byte(mustMarshal(f, bson.D{{Key: "id", Value: "x"}})))
	empty := sampleParent()
	empty.Children = map[string]rollup.ChildState{}
	f.Add([]byte(setDoc(f, empty, testTick())))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodeParent(bson.Raw(data))
		if err != nil {
			return
		}
		again, err := DecodeParent(setDoc(t, p, testTick()))
		if err != nil {
			t.Fatalf("accepted %+v but not its own update: %v", p, err)
		}
		if !reflect.DeepEqual(again, p) {
			t.Fatalf("round trip changed %+v to %+v", p, again)
		}
	})
}
