package storage

import (
	"reflect"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestUpdateDescRoundTrip: every part of an update's description survives the log encoding
// (the retained oplog holds entries encoded, so change streams read them through it too).
func TestUpdateDescRoundTrip(t *testing.T) {
	tests := []*UpdateDesc{
		{UpdatedFields: d("n", 1.5), RemovedFields: []string{"gone"}},
		{UpdatedFields: bson.D{}, RemovedFields: []string{}, TruncatedArrays: []TruncatedArray{{Field: "array", NewSize: 2}, {Field: "a.0.b", NewSize: 0}}},
		{UpdatedFields: d("a.b", int32(1)), RemovedFields: []string{"x.y"}, DottedPaths: d("a.b", bson.A{"a.b"}, "x.y", bson.A{"x.y"})},
	}
	for _, want := range tests {
		enc := appendEntry(nil, &Entry{Op: OpUpdate, DB: "db", Coll: "c", DocKey: d("_id", 1), Update: want})
		ent, err := decodeEntry(enc)
		if err != nil {
			t.Fatal(err)
		}
		got := ent.Update
		if got == nil || !reflect.DeepEqual(got.UpdatedFields, want.UpdatedFields) || !reflect.DeepEqual(got.RemovedFields, want.RemovedFields) ||
			!reflect.DeepEqual(got.TruncatedArrays, want.TruncatedArrays) || !reflect.DeepEqual(got.DottedPaths, want.DottedPaths) {
			t.Errorf("decoded %+v, want %+v", got, want)
		}
	}
}
