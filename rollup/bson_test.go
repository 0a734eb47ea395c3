package rollup

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func sampleParent() Parent {
	return Parent{
		ID: "g03-s0012", Type: "server", Project: "demo", Timestamp: testTick(),
		Online: 7, Rev: 12, Reported: 2, Expected: 3, TreeVersion: 4,
		Children: map[string]ChildState{
			"g03-s0012-p07": {Type: "process", Online: 4, Version: 1740830700123456789, Reported: 1, Expected: 1},
			"g03-s0012-p01": {Type: "process", Online: 3, Version: 1740830700000000001, Reported: 1, Expected: 1},
		},
	}
}

// setDoc returns the $set document of p's update as stored BSON.
func setDoc(t testing.TB, p Parent, writtenAt time.Time) bson.Raw {
	t.Helper()
	upd := p.Update(writtenAt)
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
	got, err := ParentFromDoc(raw)
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
	p.Children = map[string]ChildState{}
	p.Online, p.Reported = 0, 0
	doc := append(bson.D{{Key: "_id", Value: bson.NewObjectID()}}, p.Update(written)[0].Value.(bson.D)...)
	raw, err = bson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ParentFromDoc(raw); err != nil || !reflect.DeepEqual(got, p) {
		t.Errorf("with _id: %+v, %v", got, err)
	}
}

func TestParentFromDocErrors(t *testing.T) {
	good := func() bson.D { return sampleParent().Update(testTick())[0].Value.(bson.D) }
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
		{"online double", set(good(), "online", 7.0), "online", "has type double, want long"},
		{"version string", set(good(), "version", "12"), "version", "has type string, want long"},
		{"id number", set(good(), "id", int64(3)), "id", "has type long, want string"},
		{"timestamp string", set(good(), "timestamp", "2025-03-01"), "timestamp", "has type string, want date"},
		{"written_at int", set(good(), "written_at", int64(1)), "written_at", "has type long, want date"},
		{"tree_version negative", set(good(), "tree_version", int64(-1)), "tree_version", "out of range: -1"},
		{"children array", set(good(), "children", bson.A{}), "children", "has type array, want object"},
		{"child not a document", child(int64(3)), "children.p1", "has type long, want object"},
		{"child missing field", child(okChild()[:4]), "children.p1.expected", "missing"},
		{"child extra field", child(append(okChild(), bson.E{Key: "x", Value: 1})), "children.p1.x", "unknown field"},
		{"child duplicate field", child(append(okChild(), bson.E{Key: "online", Value: int64(2)})), "children.p1.online", "duplicate field"},
		{"child online double", child(set(okChild(), "online", 1.5)), "children.p1.online", "has type double, want long"},
		{"duplicate child", set(good(), FieldChildren, bson.D{{Key: "p1", Value: okChild()}, {Key: "p1", Value: okChild()}}), "children.p1", "duplicate child"},
		{"duplicate field", append(good(), bson.E{Key: "online", Value: int64(1)}), "online", "duplicate field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := bson.Marshal(tt.doc)
			if err != nil {
				t.Fatal(err)
			}
			_, err = ParentFromDoc(raw)
			var de *DocError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want a *DocError", err)
			}
			if de.Field != tt.field || de.Reason != tt.want {
				t.Errorf("err = %q (field %q, reason %q), want field %q reason %q", err, de.Field, de.Reason, tt.field, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "parent document: "+tt.field) {
				t.Errorf("message %q does not name the field", err)
			}
		})
	}
	// int32 numbers are exact integers too.
	if p, err := ParentFromDoc(mustMarshal(t, set(good(), "online", int32(7)))); err != nil || p.Online != 7 {
		t.Errorf("int32 online: %+v, %v", p, err)
	}
	// Not BSON at all.
	if _, err := ParentFromDoc(bson.Raw{1, 2, 3}); err == nil {
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

// FuzzParentFromDoc: never panics; whatever it accepts stores back (Update) to a document
// that decodes to the same Parent.
func FuzzParentFromDoc(f *testing.F) {
	f.Add([]byte(setDoc(f, sampleParent(), testTick())))
	f.Add([]byte(mustMarshal(f, bson.D{{Key: "id", Value: "x"}})))
	empty := sampleParent()
	empty.Children = map[string]ChildState{}
	f.Add([]byte(setDoc(f, empty, testTick())))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParentFromDoc(bson.Raw(data))
		if err != nil {
			return
		}
		again, err := ParentFromDoc(setDoc(t, p, testTick()))
		if err != nil {
			t.Fatalf("accepted %+v but not its own update: %v", p, err)
		}
		if !reflect.DeepEqual(again, p) {
			t.Fatalf("round trip changed %+v to %+v", p, again)
		}
	})
}
