package storage

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestCRUD(t *testing.T) {
	e := openMem(t)
	var first *Doc
	mustWrite(t, e, func(w *Writer) error {
		var err error
		if first, err = w.Insert("db", "c", d("_id", 1, "a", "x")); err != nil {
			return err
		}
		_, err = w.Insert("db", "c", d("_id", 2, "a", "y"))
		return err
	})
	e.Read(func(r *Reader) {
		if n := r.Count("db", "c"); n != 2 {
			t.Errorf("Count = %d, want 2", n)
		}
		got, ok := r.Get("db", "c", int64(1)) // numeric _id matches across types
		if !ok || got != first {
			t.Errorf("Get(1) = %v, %v", got, ok)
		}
		if _, ok := r.Get("db", "c", 3); ok {
			t.Error("Get(3) found a document")
		}
		ci, ok := r.Collection("db", "c")
		if !ok || ci.Count != 2 || len(ci.Indexes) != 1 || ci.Indexes[0].Name != "_id_" || ci.UUID.Subtype != 4 || len(ci.UUID.Data) != 16 {
			t.Errorf("Collection = %+v, %v", ci, ok)
		}
		if ci.Size != int64(len(first.Raw))*2 {
			t.Errorf("Size = %d", ci.Size)
		}
	})
	mustWrite(t, e, func(w *Writer) error {
		nd, err := w.Replace("db", "c", first, d("_id", 1, "a", "z", "b", 2), &UpdateDesc{UpdatedFields: d("a", "z", "b", 2)})
		if err != nil {
			return err
		}
		if nd.D()[1].Value != "z" {
			t.Errorf("Replace returned %v", nd.D())
		}
		return w.Delete("db", "c", &Doc{idKey: keyOfID(int32(2))})
	})
	if got := ids(e, "db", "c", nil); !reflect.DeepEqual(got, []any{int32(1)}) {
		t.Errorf("ids = %v", got)
	}
	e.Read(func(r *Reader) {
		doc, _ := r.Get("db", "c", 1)
		if !reflect.DeepEqual(doc.D(), d("_id", 1, "a", "z", "b", 2)) {
			t.Errorf("after replace: %v", doc.D())
		}
	})
	// _id is moved first; missing _id is an error; array _id is an error.
	mustWrite(t, e, func(w *Writer) error {
		doc, err := w.Insert("db", "c", d("x", 1, "_id", 9))
		if err != nil {
			return err
		}
		if doc.D()[0].Key != "_id" || doc.D()[1].Key != "x" {
			t.Errorf("not reordered: %v", doc.D())
		}
		if _, err := w.Insert("db", "c", d("x", 1)); err == nil {
			t.Error("insert without _id succeeded")
		}
		_, err = w.Insert("db", "c", bson.D{{Key: "_id", Value: bson.A{1}}})
		var me *mongoerr.Error
		if !errors.As(err, &me) || me.Code != mongoerr.InvalidIDField {
			t.Errorf("array _id: %v", err)
		}
		return nil
	})
}

func TestDupKeyError(t *testing.T) {
	e := openMem(t)
	mustWrite(t, e, func(w *Writer) error {
		if _, err := w.CreateIndex("db", "c", IndexSpec{Name: "id_1_type_1_timestamp_1",
			Key: d("id", 1, "type", 1, "timestamp", 1), Unique: true}); err != nil {
			return err
		}
		_, err := w.Insert("db", "c", d("_id", "a", "id", "a", "type", "p", "timestamp", int64(100)))
		return err
	})
	tests := []struct {
		name     string
		doc      bson.D
		wantMsg  string
		wantIdx  string
		wantPatt bson.D
		wantVal  bson.D
	}{
		{
			name:     "duplicate _id",
			doc:      d("_id", "a", "id", "b"),
			wantMsg:  `E11000 duplicate key error collection: db.c index: _id_ dup key: { _id: "a" }`,
			wantIdx:  "_id_",
			wantPatt: d("_id", 1),
			wantVal:  d("_id", "a"),
		},
		{
			name:     "compound unique",
			doc:      d("_id", "b", "timestamp", 100.0, "type", "p", "id", "a"),
			wantMsg:  `E11000 duplicate key error collection: db.c index: id_1_type_1_timestamp_1 dup key: { id: "a", type: "p", timestamp: 100.0 }`,
			wantIdx:  "id_1_type_1_timestamp_1",
			wantPatt: d("id", 1, "type", 1, "timestamp", 1),
			wantVal:  d("id", "a", "type", "p", "timestamp", 100.0),
		},
		{
			name:     "multikey element collides",
			doc:      d("_id", "c", "id", bson.A{"z", "a"}, "type", "p", "timestamp", int64(100)),
			wantMsg:  `E11000 duplicate key error collection: db.c index: id_1_type_1_timestamp_1 dup key: { id: "a", type: "p", timestamp: 100 }`,
			wantIdx:  "id_1_type_1_timestamp_1",
			wantPatt: d("id", 1, "type", 1, "timestamp", 1),
			wantVal:  d("id", "a", "type", "p", "timestamp", int64(100)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Write(context.Background(), func(w *Writer) error {
				_, err := w.Insert("db", "c", tt.doc)
				return err
			})
			var dk *DupKeyError
			if !errors.As(err, &dk) {
				t.Fatalf("err = %v, want DupKeyError", err)
			}
			if dk.Error() != tt.wantMsg {
				t.Errorf("msg = %s\nwant  %s", dk.Error(), tt.wantMsg)
			}
			if dk.Index != tt.wantIdx || dk.DB != "db" || dk.Coll != "c" {
				t.Errorf("fields = %+v", dk)
			}
			if !reflect.DeepEqual(dk.KeyPattern, tt.wantPatt) || !reflect.DeepEqual(dk.KeyValue, tt.wantVal) {
				t.Errorf("pattern/value = %v %v", dk.KeyPattern, dk.KeyValue)
			}
			me := dk.MongoError()
			if me.Code != 11000 || me.Msg != tt.wantMsg || len(me.Extra) != 2 || me.Extra[0].Key != "keyPattern" || me.Extra[1].Key != "keyValue" {
				t.Errorf("MongoError = %+v", me)
			}
			if n := count(e, "db", "c"); n != 1 {
				t.Errorf("count after failed insert = %d", n)
			}
		})
	}
}

func count(e *Engine, db, c string) int {
	var n int
	e.Read(func(r *Reader) { n = r.Count(db, c) })
	return n
}

func TestUniqueIndexMaintenance(t *testing.T) {
	e := openMem(t)
	var a, b *Doc
	mustWrite(t, e, func(w *Writer) error {
		if _, err := w.CreateIndex("db", "c", IndexSpec{Name: "k_1", Key: d("k", 1), Unique: true}); err != nil {
			return err
		}
		a, _ = w.Insert("db", "c", d("_id", 1, "k", 1))
		b, _ = w.Insert("db", "c", d("_id", 2, "k", 2))
		return nil
	})
	_, err := e.Write(context.Background(), func(w *Writer) error {
		_, err := w.Replace("db", "c", b, d("_id", 2, "k", int64(1)), nil)
		return err
	})
	var dk *DupKeyError
	if !errors.As(err, &dk) || dk.Index != "k_1" {
		t.Fatalf("replace onto existing key: %v", err)
	}
	// Moving a's key frees 1; then b can take it.
	mustWrite(t, e, func(w *Writer) error {
		if _, err := w.Replace("db", "c", a, d("_id", 1, "k", 3), nil); err != nil {
			return err
		}
		if _, err := w.Replace("db", "c", b, d("_id", 2, "k", 1), nil); err != nil {
			return err
		}
		return nil
	})
	if got := ids(e, "db", "c", d("k", 1)); !reflect.DeepEqual(got, []any{int32(2)}) {
		t.Errorf("k=1 -> %v", got)
	}
	if got := ids(e, "db", "c", d("k", 2)); len(got) != 0 {
		t.Errorf("k=2 -> %v", got)
	}
	// Deleting frees the key.
	mustWrite(t, e, func(w *Writer) error {
		cur, _ := w.Get("db", "c", 1)
		if err := w.Delete("db", "c", cur); err != nil {
			return err
		}
		_, err := w.Insert("db", "c", d("_id", 5, "k", 3))
		return err
	})
	// Missing fields are null in a unique index: two documents without k collide.
	_, err = e.Write(context.Background(), func(w *Writer) error {
		if _, err := w.Insert("db", "c", d("_id", 6)); err != nil {
			return err
		}
		_, err := w.Insert("db", "c", d("_id", 7, "k", nil))
		return err
	})
	if !errors.As(err, &dk) || dk.Error() != "E11000 duplicate key error collection: db.c index: k_1 dup key: { k: null }" {
		t.Errorf("null collision: %v", err)
	}
	// A multikey document does not conflict with itself.
	mustWrite(t, e, func(w *Writer) error {
		_, err := w.Insert("db", "c", d("_id", 8, "k", bson.A{10, 10, int64(11)}))
		return err
	})
	if got := ids(e, "db", "c", d("k", 11)); !reflect.DeepEqual(got, []any{int32(8)}) {
		t.Errorf("k=11 -> %v", got)
	}
}

func TestCreateIndexRules(t *testing.T) {
	e := openMem(t)
	code := func(err error) int32 {
		var me *mongoerr.Error
		if errors.As(err, &me) {
			return me.Code
		}
		var dk *DupKeyError
		if errors.As(err, &dk) {
			return 11000
		}
		if err != nil {
			return -1
		}
		return 0
	}
	mustWrite(t, e, func(w *Writer) error {
		_, err := w.Insert("db", "c", d("_id", 1, "a", 1, "b", 1))
		if err != nil {
			return err
		}
		_, err = w.Insert("db", "c", d("_id", 2, "a", 1, "b", 2))
		return err
	})
	tests := []struct {
		name        string
		spec        IndexSpec
		wantCreated bool
		wantCode    int32
	}{
		{"create", IndexSpec{Name: "a_1", Key: d("a", 1)}, true, 0},
		{"identical", IndexSpec{Name: "a_1", Key: d("a", 1.0)}, false, 0},
		{"same name other key", IndexSpec{Name: "a_1", Key: d("b", 1)}, false, mongoerr.IndexKeySpecsConflict},
		{"same key other name", IndexSpec{Name: "other", Key: d("a", 1)}, false, mongoerr.IndexOptionsConflict},
		{"same name other options", IndexSpec{Name: "a_1", Key: d("a", 1), Unique: true}, false, mongoerr.IndexOptionsConflict},
		{"unique over duplicates", IndexSpec{Name: "a_u", Key: d("a", -1), Unique: true}, false, 11000},
		{"text", IndexSpec{Name: "t", Key: d("a", "text")}, false, mongoerr.NotImplemented},
		{"hashed", IndexSpec{Name: "h", Key: d("a", "hashed")}, false, mongoerr.NotImplemented},
		{"zero", IndexSpec{Name: "z", Key: d("a", 0)}, false, mongoerr.CannotCreateIndex},
		{"empty", IndexSpec{Name: "e"}, false, mongoerr.CannotCreateIndex},
		{"id index exists", IndexSpec{Name: "_id_", Key: d("_id", 1), Unique: true}, false, 0},
		{"id index exists without unique", IndexSpec{Name: "_id_", Key: d("_id", 1)}, false, 0},
		{"id key other name", IndexSpec{Name: "myid", Key: d("_id", 1)}, false, mongoerr.IndexOptionsConflict},
		{"id descending is another index", IndexSpec{Name: "_id_-1", Key: d("_id", -1)}, true, 0},
		{"default name", IndexSpec{Key: d("b", -1)}, true, 0},
		{"compound unique ok", IndexSpec{Name: "ab", Key: d("a", 1, "b", 1), Unique: true}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var created bool
			_, err := e.Write(context.Background(), func(w *Writer) error {
				var err error
				created, err = w.CreateIndex("db", "c", tt.spec)
				return err
			})
			if code(err) != tt.wantCode || created != tt.wantCreated {
				t.Errorf("created=%v err=%v, want %v code %d", created, err, tt.wantCreated, tt.wantCode)
			}
		})
	}
	var names []string
	e.Read(func(r *Reader) {
		ci, _ := r.Collection("db", "c")
		for _, ix := range ci.Indexes {
			names = append(names, ix.Name)
		}
	})
	if want := []string{"_id_", "a_1", "_id_-1", "b_-1", "ab"}; !reflect.DeepEqual(names, want) {
		t.Errorf("indexes = %v, want %v", names, want)
	}
	dropTests := []struct {
		name, db, coll, index string
		wantCode              int32
	}{
		{"id", "db", "c", "_id_", mongoerr.InvalidOptions},
		{"unknown", "db", "c", "nope", mongoerr.IndexNotFound},
		{"missing coll", "db", "nope", "a_1", mongoerr.NamespaceNotFound},
		{"ok", "db", "c", "a_1", 0},
	}
	for _, tt := range dropTests {
		t.Run("drop "+tt.name, func(t *testing.T) {
			_, err := e.Write(context.Background(), func(w *Writer) error { return w.DropIndex(tt.db, tt.coll, tt.index) })
			if code(err) != tt.wantCode {
				t.Errorf("err = %v, want code %d", err, tt.wantCode)
			}
		})
	}
	mustWrite(t, e, func(w *Writer) error { return w.DropIndexes("db", "c") })
	e.Read(func(r *Reader) {
		ci, _ := r.Collection("db", "c")
		if len(ci.Indexes) != 1 {
			t.Errorf("after DropIndexes: %v", ci.Indexes)
		}
	})
}

func TestParallelArrays(t *testing.T) {
	e := openMem(t)
	_, err := e.Write(context.Background(), func(w *Writer) error {
		if _, err := w.CreateIndex("db", "c", IndexSpec{Name: "ab", Key: d("a", 1, "b", 1)}); err != nil {
			return err
		}
		if _, err := w.Insert("db", "c", d("_id", 1, "a", bson.A{1, 2}, "b", 1)); err != nil {
			return err
		}
		_, err := w.Insert("db", "c", d("_id", 2, "a", bson.A{1, 2}, "b", bson.A{3}))
		return err
	})
	var me *mongoerr.Error
	if !errors.As(err, &me) || me.Code != CannotIndexParallelArrays {
		t.Fatalf("err = %v", err)
	}
	if n := count(e, "db", "c"); n != 1 {
		t.Errorf("count = %d", n)
	}
}

func TestDatabasesAndDrops(t *testing.T) {
	e := openMem(t)
	mustWrite(t, e, func(w *Writer) error {
		for _, ns := range [][2]string{{"b", "x"}, {"a", "y"}, {"a", "x"}} {
			if _, err := w.Insert(ns[0], ns[1], d("_id", 1)); err != nil {
				return err
			}
		}
		created, err := w.CreateCollection("c", "empty")
		if !created || err != nil {
			return fmt.Errorf("create: %v %w", created, err)
		}
		created, err = w.CreateCollection("c", "empty")
		if created || err != nil {
			return fmt.Errorf("re-create: %v %w", created, err)
		}
		return nil
	})
	e.Read(func(r *Reader) {
		dbs := r.Databases()
		if len(dbs) != 3 || dbs[0].Name != "a" || dbs[2].Name != "c" || !dbs[2].Empty || dbs[0].Empty {
			t.Errorf("Databases = %+v", dbs)
		}
		cs := r.Collections("a")
		if len(cs) != 2 || cs[0].Name != "x" || cs[1].Name != "y" {
			t.Errorf("Collections = %+v", cs)
		}
	})
	mustWrite(t, e, func(w *Writer) error {
		existed, err := w.DropCollection("b", "x")
		if !existed || err != nil {
			return fmt.Errorf("drop: %v %w", existed, err)
		}
		existed, _ = w.DropCollection("b", "x")
		if existed {
			return errors.New("dropped twice")
		}
		return w.DropDatabase("a")
	})
	e.Read(func(r *Reader) {
		if dbs := r.Databases(); len(dbs) != 1 || dbs[0].Name != "c" {
			t.Errorf("Databases = %+v", dbs)
		}
	})
	var ops []string
	for _, ent := range e.OplogAfter(OpTime{}, 0) {
		ops = append(ops, ent.Op+" "+ent.DB+"."+ent.Coll)
	}
	want := []string{"create b.x", "insert b.x", "create a.y", "insert a.y", "create a.x", "insert a.x",
		"create c.empty", "drop b.x", "drop a.x", "drop a.y", "dropDatabase a."}
	if !reflect.DeepEqual(ops, want) {
		t.Errorf("oplog = %q", ops)
	}
}

func TestWriteSemantics(t *testing.T) {
	e := openMem(t)
	boom := errors.New("boom")
	ts, err := e.Write(context.Background(), func(w *Writer) error {
		if _, err := w.Insert("db", "c", d("_id", 1)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) || ts.IsZero() {
		t.Errorf("ts=%v err=%v", ts, err)
	}
	if count(e, "db", "c") != 1 {
		t.Error("mutation before the error was rolled back")
	}
	ts2, err := e.Write(context.Background(), func(*Writer) error { return nil })
	if err != nil || !ts2.IsZero() {
		t.Errorf("empty write: %v %v", ts2, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	if _, err := e.Write(ctx, func(*Writer) error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
		t.Errorf("canceled ctx: %v ran=%v", err, ran)
	}
	// Mutating inside a Find callback is refused.
	mustWrite(t, e, func(w *Writer) error {
		w.Find("db", "c", nil, func(doc *Doc) bool {
			if err := w.Delete("db", "c", doc); err == nil {
				t.Error("Delete inside Find succeeded")
			}
			return true
		})
		return nil
	})
	if e.LastOpTime() != ts {
		t.Errorf("LastOpTime = %v, want %v", e.LastOpTime(), ts)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Write(context.Background(), func(*Writer) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("write after close: %v", err)
	}
}

func TestWritePanicIsAnError(t *testing.T) {
	e := openMem(t)
	_, err := e.Write(context.Background(), func(w *Writer) error {
		if _, err := w.Insert("db", "c", d("_id", 1)); err != nil {
			return err
		}
		panic("boom")
	})
	var me *mongoerr.Error
	if !errors.As(err, &me) || me.Code != mongoerr.InternalError {
		t.Fatalf("err = %v", err)
	}
	// The lock was released and the mutation made before the panic is kept and logged.
	mustWrite(t, e, func(w *Writer) error { _, err := w.Insert("db", "c", d("_id", 2)); return err })
	if n := count(e, "db", "c"); n != 2 {
		t.Errorf("count = %d", n)
	}
	if n := len(e.OplogAfter(OpTime{}, 0)); n != 3 {
		t.Errorf("oplog entries = %d", n)
	}
}
