package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

func date(sec int64) bson.DateTime { return bson.DateTime(sec * 1000) }

// TestDeleteExpired checks which documents a TTL pass deletes: a date before now minus
// expireAfterSeconds, or an array holding one; never other types, missing fields, or dates at
// or after the cutoff.
func TestDeleteExpired(t *testing.T) {
	for _, unique := range []bool{false, true} {
		t.Run(fmt.Sprintf("unique=%v", unique), func(t *testing.T) {
			e := openMem(t)
			mustWrite(t, e, func(w *Writer) error {
				_, err := w.CreateIndex("db", "c", IndexSpec{Name: "at_1", Key: d("at", 1), Unique: unique, TTL: true, ExpireAfterSeconds: 100})
				if err != nil {
					return err
				}
				docs := []bson.D{
					d("_id", "old", "at", date(10)),
					d("_id", "cutoff", "at", date(900)), // exactly now-100: not yet
					d("_id", "fresh", "at", date(950)),  // not expired
					d("_id", "arr-one-old", "at", bson.A{date(2000), date(20)}),
					d("_id", "arr-fresh", "at", bson.A{date(990), date(995)}),
					d("_id", "negative", "at", bson.DateTime(-5000)), // before 1970
					d("_id", "number", "at", int64(5)),
					d("_id", "string", "at", "1970-01-01"),
					d("_id", "timestamp", "at", bson.Timestamp{T: 5}),
					d("_id", "missing"),
					d("_id", "null", "at", nil),
				}
				if unique {
					// A unique index holds one missing/null key only.
					docs = docs[:len(docs)-1]
				}
				for _, doc := range docs {
					if _, err := w.Insert("db", "c", doc); err != nil {
						return err
					}
				}
				return nil
			})
			from := e.LastOpTime()
			var n int
			mustWrite(t, e, func(w *Writer) error {
				var err error
				n, err = w.DeleteExpired("db", "c", "at_1", time.Unix(1000, 0), 100)
				return err
			})
			if n != 3 {
				t.Errorf("deleted %d, want 3", n)
			}
			var left []string
			for _, id := range ids(e, "db", "c", nil) {
				left = append(left, id.(string))
			}
			sort.Strings(left)
			want := []string{"arr-fresh", "cutoff", "fresh", "missing", "null", "number", "string", "timestamp"}
			if unique {
				want = []string{"arr-fresh", "cutoff", "fresh", "missing", "number", "string", "timestamp"}
			}
			if !reflect.DeepEqual(left, want) {
				t.Errorf("left %v, want %v", left, want)
			}
			// Each deletion is an ordinary delete in the oplog.
			var deleted []string
			for _, ent := range e.OplogAfter(from, 0) {
				if ent.Op != OpDelete {
					t.Errorf("oplog entry %s, want only deletes", ent.Op)
					continue
				}
				deleted = append(deleted, ent.DocKey[0].Value.(string))
			}
			sort.Strings(deleted)
			if !reflect.DeepEqual(deleted, []string{"arr-one-old", "negative", "old"}) {
				t.Errorf("oplog deletes %v", deleted)
			}
		})
	}
}

func TestDeleteExpiredBatches(t *testing.T) {
	e := openMem(t)
	mustWrite(t, e, func(w *Writer) error {
		if _, err := w.CreateIndex("db", "c", IndexSpec{Name: "at_1", Key: d("at", 1), TTL: true}); err != nil {
			return err
		}
		for i := 0; i < 25; i++ {
			// Arrays make the index multikey: a document is still deleted once.
			if _, err := w.Insert("db", "c", d("_id", i, "at", bson.A{date(int64(i)), date(int64(i) + 1)})); err != nil {
				return err
			}
		}
		return nil
	})
	var batches []int
	for {
		var n int
		mustWrite(t, e, func(w *Writer) error {
			var err error
			n, err = w.DeleteExpired("db", "c", "at_1", time.Unix(1000, 0), 10)
			return err
		})
		batches = append(batches, n)
		if n < 10 {
			break
		}
	}
	if !reflect.DeepEqual(batches, []int{10, 10, 5}) {
		t.Errorf("batches %v, want [10 10 5]", batches)
	}
	if left := ids(e, "db", "c", nil); len(left) != 0 {
		t.Errorf("left %v", left)
	}
}

func TestTTLIndexSpecs(t *testing.T) {
	e := openMem(t)
	tests := []struct {
		name string
		spec IndexSpec
		code int32
	}{
		{"compound", IndexSpec{Name: "a_1_b_1", Key: d("a", 1, "b", 1), TTL: true, ExpireAfterSeconds: 1}, mongoerr.CannotCreateIndex},
		{"_id", IndexSpec{Name: "_id_", Key: d("_id", 1), TTL: true, ExpireAfterSeconds: 1}, 197},
		{"negative", IndexSpec{Name: "a_1", Key: d("a", 1), TTL: true, ExpireAfterSeconds: -1}, mongoerr.InvalidOptions},
		{"too large", IndexSpec{Name: "a_1", Key: d("a", 1), TTL: true, ExpireAfterSeconds: 1 << 40}, mongoerr.InvalidOptions},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Write(t.Context(), func(w *Writer) error {
				_, err := w.CreateIndex("db", "c", tc.spec)
				return err
			})
			if !mongoerr.Is(err, tc.code) {
				t.Fatalf("err = %v, want code %d", err, tc.code)
			}
		})
	}
	mustWrite(t, e, func(w *Writer) error {
		_, err := w.CreateIndex("db", "c", IndexSpec{Name: "a_1", Key: d("a", 1), TTL: true, ExpireAfterSeconds: 5})
		return err
	})
	// The same index again is a no-op; another expireAfterSeconds is an options conflict.
	mustWrite(t, e, func(w *Writer) error {
		created, err := w.CreateIndex("db", "c", IndexSpec{Name: "a_1", Key: d("a", 1), TTL: true, ExpireAfterSeconds: 5})
		if created {
			t.Error("identical TTL index created twice")
		}
		return err
	})
	for _, spec := range []IndexSpec{
		{Name: "a_1", Key: d("a", 1), TTL: true, ExpireAfterSeconds: 6},
		{Name: "a_1", Key: d("a", 1)},
	} {
		_, err := e.Write(t.Context(), func(w *Writer) error { _, err := w.CreateIndex("db", "c", spec); return err })
		if !mongoerr.Is(err, mongoerr.IndexOptionsConflict) {
			t.Errorf("CreateIndex(%+v) = %v, want IndexOptionsConflict", spec, err)
		}
	}
	var got []TTLIndex
	e.Read(func(r *Reader) { got = r.TTLIndexes() })
	if len(got) != 1 || got[0].Coll != "c" || got[0].Spec.ExpireAfterSeconds != 5 {
		t.Fatalf("TTLIndexes = %+v", got)
	}
	// collMod: a new value, the same value (nothing logged), a non-TTL index, a missing one.
	before := e.LastOpTime()
	mustWrite(t, e, func(w *Writer) error {
		old, err := w.SetExpireAfterSeconds("db", "c", "a_1", 50)
		if old != 5 {
			t.Errorf("old = %d, want 5", old)
		}
		return err
	})
	mustWrite(t, e, func(w *Writer) error { _, err := w.SetExpireAfterSeconds("db", "c", "a_1", 50); return err })
	if ents := e.OplogAfter(before, 0); len(ents) != 1 || ents[0].Op != OpCollMod || ents[0].Index.ExpireAfterSeconds != 50 {
		t.Errorf("collMod oplog = %+v", ents)
	}
	for _, tc := range []struct {
		name string
		code int32
	}{{"_id_", mongoerr.InvalidOptions}, {"nope", mongoerr.IndexNotFound}} {
		_, err := e.Write(t.Context(), func(w *Writer) error { _, err := w.SetExpireAfterSeconds("db", "c", tc.name, 1); return err })
		if !mongoerr.Is(err, tc.code) {
			t.Errorf("SetExpireAfterSeconds(%s) = %v, want %d", tc.name, err, tc.code)
		}
	}
}

// TestTTLDeletesAreCompactedAway checks that expired documents are gone for good: deleted in
// the log, absent after restart, and not in the snapshot that compaction writes.
func TestTTLDeletesAreCompactedAway(t *testing.T) {
	dir := t.TempDir()
	e := openDir(t, dir, Options{NoSync: true, OplogMaxBytes: 1})
	mustWrite(t, e, func(w *Writer) error {
		if _, err := w.CreateIndex("db", "c", IndexSpec{Name: "at_1", Key: d("at", 1), TTL: true, ExpireAfterSeconds: 0}); err != nil {
			return err
		}
		for i := 0; i < 200; i++ {
			at := date(10)
			if i%4 == 0 {
				at = date(5000)
			}
			if _, err := w.Insert("db", "c", d("_id", i, "at", at, "pad", fmt.Sprintf("%0500d", i))); err != nil {
				return err
			}
		}
		return nil
	})
	mustWrite(t, e, func(w *Writer) error {
		_, err := w.DeleteExpired("db", "c", "at_1", time.Unix(1000, 0), 1000)
		return err
	})
	if err := e.Compact(); err != nil {
		t.Fatal(err)
	}
	before := docsOnly(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	_, snaps := files(t, dir)
	if len(snaps) != 1 {
		t.Fatalf("snapshots %v", snaps)
	}
	st, err := os.Stat(filepath.Join(dir, snaps[0]))
	if err != nil {
		t.Fatal(err)
	}
	// 50 documents of ~540 bytes are left; 200 would be over 100 KB.
	if st.Size() > 40<<10 {
		t.Errorf("snapshot is %d bytes: expired documents were not dropped", st.Size())
	}
	e2 := openDir(t, dir, Options{NoSync: true})
	if got := docsOnly(e2); got != before || len(ids(e2, "db", "c", nil)) != 50 {
		t.Fatalf("after reopen: %d documents", len(ids(e2, "db", "c", nil)))
	}
}
