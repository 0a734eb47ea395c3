package storage

import (
	"errors"
	"reflect"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestReplaceContents(t *testing.T) {
	e := openMem(t)
	mustWrite(t, e, func(w *Writer) error {
		if _, err := w.CreateIndex("db", "out", IndexSpec{Name: "k_1", Key: d("k", 1), Unique: true}); err != nil {
			return err
		}
		for i := 0; i < 3; i++ {
			if _, err := w.Insert("db", "out", d("_id", i, "k", i)); err != nil {
				return err
			}
		}
		return nil
	})
	// A unique violation among the new documents changes nothing.
	before := dump(e)
	_, err := e.Write(t.Context(), func(w *Writer) error {
		return w.ReplaceContents("db", "out", []bson.D{d("_id", 10, "k", 1), d("_id", 11, "k", 1)})
	})
	var dk *DupKeyError
	if !errors.As(err, &dk) || dk.Index != "k_1" {
		t.Fatalf("err = %v, want a duplicate key on k_1", err)
	}
	_, err = e.Write(t.Context(), func(w *Writer) error {
		return w.ReplaceContents("db", "out", []bson.D{d("_id", 10), d("_id", 10)})
	})
	if !errors.As(err, &dk) || dk.Index != "_id_" {
		t.Fatalf("err = %v, want a duplicate _id", err)
	}
	if after := dump(e); after != before {
		t.Fatalf("a failed ReplaceContents changed the state:\n%s\n---\n%s", before, after)
	}
	// Old documents go, new ones come, the index stays (and the old keys are free again).
	mustWrite(t, e, func(w *Writer) error {
		return w.ReplaceContents("db", "out", []bson.D{d("_id", 20, "k", 1), d("_id", 21, "k", 7)})
	})
	if got := ids(e, "db", "out", nil); !reflect.DeepEqual(got, []any{int32(20), int32(21)}) {
		t.Fatalf("ids = %v", got)
	}
	if got := ids(e, "db", "out", d("k", 7)); !reflect.DeepEqual(got, []any{int32(21)}) {
		t.Fatalf("k index lookup = %v", got)
	}
	// A missing target is created.
	mustWrite(t, e, func(w *Writer) error { return w.ReplaceContents("db", "fresh", []bson.D{d("_id", 1)}) })
	if got := ids(e, "db", "fresh", nil); len(got) != 1 {
		t.Fatalf("fresh = %v", got)
	}
}
