package storage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestPreparedKeysFollowIndexChanges prepares documents (with their index keys) from an
// IndexSet, changes the indexes, then inserts them: keys computed for other indexes must
// never be used, even when the number of indexes is the same.
func TestPreparedKeysFollowIndexChanges(t *testing.T) {
	e := openMem(t)
	create := func(name, field string, unique bool) {
		mustWrite(t, e, func(w *Writer) error {
			_, err := w.CreateIndex("db", "c", IndexSpec{Name: name, Key: d(field, 1), Unique: unique})
			return err
		})
	}
	drop := func(name string) { mustWrite(t, e, func(w *Writer) error { return w.DropIndex("db", "c", name) }) }
	set := func() (s *IndexSet) {
		e.Read(func(r *Reader) { s = r.IndexSet("db", "c") })
		return s
	}
	insert := func(s *IndexSet, doc bson.D) error {
		p, err := s.Prepare(doc)
		if err != nil {
			return err
		}
		_, err = e.Write(t.Context(), func(w *Writer) error { _, err := w.InsertPrepared("db", "c", p); return err })
		return err
	}
	isDup := func(err error, index string) bool {
		var dup *DupKeyError
		return errors.As(err, &dup) && dup.Index == index
	}
	create("k_1", "k", true)
	create("x_1", "x", true)
	if err := insert(set(), d("_id", 1, "k", 1, "x", 1, "y", 1)); err != nil {
		t.Fatalf("insert with current keys: %v", err)
	}
	if err := insert(set(), d("_id", 2, "k", 1)); !isDup(err, "k_1") {
		t.Fatalf("current keys, duplicate k: %v, want E11000 on k_1", err)
	}

	// Same number of indexes, another one: x_1 replaced by y_1 (unique) after the prepare.
	s := set()
	p, err := s.Prepare(d("_id", 3, "k", 3, "x", 3, "y", 1))
	if err != nil {
		t.Fatal(err)
	}
	drop("x_1")
	create("y_1", "y", true)
	_, err = e.Write(t.Context(), func(w *Writer) error { _, err := w.InsertPrepared("db", "c", p); return err })
	if !isDup(err, "y_1") {
		t.Fatalf("keys prepared for x_1 inserted under y_1: %v, want E11000 on y_1", err)
	}

	// A unique index created after the prepare.
	s = set()
	p, err = s.Prepare(d("_id", 4, "k", 4, "y", 4, "z", 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := insert(set(), d("_id", 5, "k", 5, "y", 5, "z", 1)); err != nil {
		t.Fatal(err)
	}
	create("z_1", "z", false)
	drop("z_1")
	create("z_1", "z", true) // fails if two documents had z: 1; only _id 5 has
	_, err = e.Write(t.Context(), func(w *Writer) error { _, err := w.InsertPrepared("db", "c", p); return err })
	if !isDup(err, "z_1") {
		t.Fatalf("insert prepared before z_1 existed: %v, want E11000 on z_1", err)
	}

	// The collection dropped and re-created with other indexes.
	s = set()
	p, err = s.Prepare(d("_id", 6, "k", 1))
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, e, func(w *Writer) error { _, err := w.DropCollection("db", "c"); return err })
	create("q_1", "q", true)
	if _, err := e.Write(t.Context(), func(w *Writer) error { _, err := w.InsertPrepared("db", "c", p); return err }); err != nil {
		t.Fatalf("insert into the re-created collection: %v", err)
	}
	var n int
	e.Read(func(r *Reader) {
		r.Find("db", "c", d("q", nil), func(*Doc) bool { n++; return true })
	})
	if n != 1 {
		t.Fatalf("the re-created collection's q_1 finds %d documents, want 1", n)
	}
}

// TestLookupPointMatchesFind plans random filters from an IndexSet, makes random changes
// (documents, indexes, drops, renames), then compares LookupPoint with Find under the same
// Write: when LookupPoint answers, Find must visit exactly its document (or none).
func TestLookupPointMatchesFind(t *testing.T) {
	e := openMem(t)
	r := rand.New(rand.NewPCG(25, 4))
	mustWrite(t, e, func(w *Writer) error {
		if _, err := w.CreateIndex("db", "c", IndexSpec{Name: "a_1_b_1", Key: d("a", 1, "b", 1), Unique: true}); err != nil {
			return err
		}
		_, err := w.CreateIndex("db", "c", IndexSpec{Name: "b_1", Key: d("b", 1)})
		return err
	})
	val := func() any {
		switch r.IntN(8) {
		case 0:
			return bson.A{int32(r.IntN(4)), int32(r.IntN(4))}
		case 1:
			return nil
		case 2:
			return float64(r.IntN(4))
		}
		return int32(r.IntN(4))
	}
	filter := func() bson.D {
		switch r.IntN(6) {
		case 0:
			return d("a", val())
		case 1:
			return d("_id", int32(r.IntN(30)))
		case 2:
			return d("a", val(), "b", d("$gt", int32(1)))
		case 3:
			return d("b", val(), "a", d("$in", bson.A{int32(1), int32(2)}))
		case 4:
			return d("c", val(), "a", val(), "b", val())
		}
		return d("a", val(), "b", val())
	}
	change := func(w *Writer) {
		switch r.IntN(20) {
		case 0:
			_, _ = w.CreateIndex("db", "c", IndexSpec{Name: "c_1", Key: d("c", 1), Unique: true})
		case 1:
			_ = w.DropIndex("db", "c", "c_1")
		case 2:
			_ = w.DropIndex("db", "c", "a_1_b_1")
		case 3:
			_, _ = w.CreateIndex("db", "c", IndexSpec{Name: "a_1_b_1", Key: d("a", 1, "b", 1), Unique: true})
		case 4:
			_ = w.RenameCollection("db", "c", Namespace{DB: "db", Coll: "c2"}, true)
			_ = w.RenameCollection("db", "c2", Namespace{DB: "db", Coll: "c"}, true)
		case 5:
			if r.IntN(5) == 0 {
				_, _ = w.DropCollection("db", "c")
			}
		default:
			doc := d("_id", int32(r.IntN(30)), "a", val(), "b", val(), "c", val())
			if old, ok := w.Get("db", "c", doc[0].Value); ok && r.IntN(2) == 0 {
				if r.IntN(3) == 0 {
					_ = w.Delete("db", "c", old)
				} else {
					_, _ = w.Replace("db", "c", old, doc, nil)
				}
				return
			}
			_, _ = w.Insert("db", "c", doc)
		}
	}
	answered := 0
	var mismatch error // found inside a Write: reported after it (t.Fatal there would keep the lock)
	for i := 0; i < 3000 && mismatch == nil; i++ {
		var s *IndexSet
		e.Read(func(rd *Reader) { s = rd.IndexSet("db", "c") })
		f := filter()
		pl, planned := s.Point(f)
		mustWrite(t, e, func(w *Writer) error {
			for range r.IntN(3) {
				change(w)
			}
			if !planned {
				return nil
			}
			doc, ok := w.LookupPoint("db", "c", pl)
			if !ok {
				return nil
			}
			answered++
			var found []*Doc
			w.Find("db", "c", f, func(d *Doc) bool { found = append(found, d); return true })
			want := fmt.Sprint(found)
			got := "[]"
			if doc != nil {
				got = fmt.Sprint([]*Doc{doc})
			}
			if got != want {
				mismatch = fmt.Errorf("step %d filter %v: LookupPoint %s, Find %s", i, f, got, want)
			}
			return nil
		})
		mustWrite(t, e, func(w *Writer) error { change(w); return nil })
	}
	if mismatch != nil {
		t.Fatal(mismatch)
	}
	if answered < 300 {
		t.Fatalf("LookupPoint answered %d times of 3000: the test does not exercise it", answered)
	}
}
