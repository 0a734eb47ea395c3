package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestInsertPreparedMatchesInsert inserts the same random documents (duplicate _ids and
// unique keys, _id not first, no _id, bad _ids, too large) into two engines, one with
// Insert, one with PrepareDoc outside the Write and InsertPrepared inside it: the errors,
// the contents and the oplog must be the same.
func TestInsertPreparedMatchesInsert(t *testing.T) {
	a, b := openMem(t), openMem(t)
	ix := IndexSpec{Name: "k_1", Key: d("k", 1), Unique: true}
	for _, e := range []*Engine{a, b} {
		mustWrite(t, e, func(w *Writer) error { _, err := w.CreateIndex("db", "c", ix); return err })
	}
	r := rand.New(rand.NewPCG(25, 1))
	// A too large document: one is enough, and each costs tens of MiB of copies under -race.
	big, bigLeft := string(make([]byte, MaxDocumentSize)), 1
	docOf := func() bson.D {
		id, k := int32(r.IntN(40)), int32(r.IntN(40))
		switch r.IntN(12) {
		case 0:
			return d("k", k, "_id", id) // _id not first
		case 1:
			return d("k", k) // no _id
		case 2:
			return d("_id", bson.A{1}, "k", k) // an array _id
		case 3:
			if bigLeft > 0 {
				bigLeft--
				return d("_id", id, "k", k, "big", big)
			}
		}
		return d("_id", id, "k", k, "v", r.Int64())
	}
	for i := range 300 {
		doc := docOf()
		_, errA := a.Write(context.Background(), func(w *Writer) error {
			_, err := w.Insert("db", "c", bsonClone(doc))
			return err
		})
		p, errB := PrepareDoc(bsonClone(doc))
		if errB == nil {
			_, errB = b.Write(context.Background(), func(w *Writer) error {
				_, err := w.InsertPrepared("db", "c", p)
				return err
			})
		}
		if fmt.Sprint(errA) != fmt.Sprint(errB) {
			t.Fatalf("doc %d %v: Insert %v, PrepareDoc+InsertPrepared %v", i, doc, errA, errB)
		}
	}
	if bigLeft > 0 {
		t.Fatalf("no too large document drawn")
	}
	// Documents without _id get a fresh ObjectId (different in each engine): compare the rest.
	contents := func(e *Engine) []string {
		var out []string
		e.Read(func(r *Reader) {
			r.Find("db", "c", nil, func(doc *Doc) bool {
				dd := doc.D()
				if _, ok := dd[0].Value.(bson.ObjectID); ok {
					dd = dd[1:]
				}
				out = append(out, fmt.Sprint(dd))
				return true
			})
		})
		return out
	}
	if ca, cb := contents(a), contents(b); fmt.Sprint(ca) != fmt.Sprint(cb) || len(ca) == 0 {
		t.Fatalf("contents differ:\n%v\n%v", ca, cb)
	}
	oa, ob := a.OplogAfter(OpTime{}, 0), b.OplogAfter(OpTime{}, 0)
	if len(oa) != len(ob) {
		t.Fatalf("oplog: %d entries with Insert, %d prepared", len(oa), len(ob))
	}
	for i := range oa {
		if oa[i].Op != ob[i].Op || oa[i].Coll != ob[i].Coll || len(oa[i].Doc) != len(ob[i].Doc) {
			t.Fatalf("oplog entry %d: %+v against %+v", i, oa[i], ob[i])
		}
	}
}

func bsonClone(doc bson.D) bson.D { return append(bson.D(nil), doc...) }

func TestInsertPreparedOnce(t *testing.T) {
	e := openMem(t)
	p, err := PrepareDoc(d("_id", 1))
	if err != nil {
		t.Fatal(err)
	}
	if p.ID() != int32(1) {
		t.Fatalf("ID() = %v", p.ID())
	}
	mustWrite(t, e, func(w *Writer) error { _, err := w.InsertPrepared("db", "c", p); return err })
	_, err = e.Write(context.Background(), func(w *Writer) error { _, err := w.InsertPrepared("db", "c", p); return err })
	if err == nil {
		t.Fatal("a prepared document inserted twice")
	}
}

// TestConcurrentPreparedInserts has writers prepare documents on overlapping unique keys
// outside the lock and insert them concurrently: every key is stored once, the oplog holds
// exactly the successful inserts in strictly increasing OpTime order, and every other
// attempt is a duplicate key error.
func TestConcurrentPreparedInserts(t *testing.T) {
	e := openMem(t)
	mustWrite(t, e, func(w *Writer) error {
		_, err := w.CreateIndex("db", "c", IndexSpec{Name: "k_1", Key: d("k", 1), Unique: true})
		return err
	})
	start := e.LastOpTime()
	const writers, per, keys = 8, 200, 300
	var mu sync.Mutex
	inserted, dups := map[int32]int{}, 0
	var wg sync.WaitGroup
	for wr := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(wr), 2))
			for i := range per {
				k := int32(r.IntN(keys))
				p, err := PrepareDoc(d("_id", fmt.Sprintf("%d-%d", wr, i), "k", k))
				if err != nil {
					t.Error(err)
					return
				}
				_, err = e.Write(context.Background(), func(w *Writer) error { _, err := w.InsertPrepared("db", "c", p); return err })
				var dup *DupKeyError
				mu.Lock()
				switch {
				case err == nil:
					inserted[k]++
				case errors.As(err, &dup):
					dups++
				default:
					t.Errorf("insert: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for k, n := range inserted {
		if n != 1 {
			t.Errorf("key %d inserted %d times", k, n)
		}
	}
	if len(inserted)+dups != writers*per {
		t.Errorf("%d inserted + %d duplicates, want %d attempts", len(inserted), dups, writers*per)
	}
	ents := e.OplogAfter(start, 0)
	if len(ents) != len(inserted) {
		t.Fatalf("oplog: %d entries, %d inserts", len(ents), len(inserted))
	}
	for i := 1; i < len(ents); i++ {
		if tsU64(ents[i-1].TS) >= tsU64(ents[i].TS) {
			t.Fatalf("oplog entry %d at %v after %v", i, ents[i].TS, ents[i-1].TS)
		}
	}
	var n int
	e.Read(func(r *Reader) { n = r.Count("db", "c") })
	if n != len(inserted) {
		t.Fatalf("%d documents, %d inserts", n, len(inserted))
	}
}

// TestPreparedEntryMatchesInsert inserts the same documents into two engines on one clock,
// one with Insert, one with IndexSet.Prepare outside the Write (the oplog entry encoded there
// but for its times) and InsertPrepared inside it, while the collection is dropped, renamed
// away and back and its indexes change between the sets and the inserts: the prepared
// engine's oplog must hold, entry for entry, what the other's holds (same times, same
// documents, each entry the bytes appendEntry gives for it, the UUID of the collection at
// that moment), also read back from its log after a restart.
func TestPreparedEntryMatchesInsert(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	now := func() time.Time { return clock }
	a, err := Open(Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	dir := t.TempDir()
	b, err := Open(Options{Now: now, Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(30, 1))
	for i := range 400 {
		clock = clock.Add(time.Duration(r.IntN(3)) * 700 * time.Millisecond)
		doc := d("_id", int32(i), "k", int32(r.IntN(50)), "v", r.Int64())
		var set *IndexSet
		b.Read(func(rd *Reader) { set = rd.IndexSet("db", "c") })
		p, errP := set.Prepare(bsonClone(doc))
		if errP != nil {
			t.Fatal(errP)
		}
		change := preparedEntryChange(r.IntN(20))
		for _, e := range []*Engine{a, b} {
			mustWrite(t, e, change)
		}
		_, errA := a.Write(context.Background(), func(w *Writer) error { _, err := w.Insert("db", "c", bsonClone(doc)); return err })
		_, errB := b.Write(context.Background(), func(w *Writer) error { _, err := w.InsertPrepared("db", "c", p); return err })
		if fmt.Sprint(errA) != fmt.Sprint(errB) {
			t.Fatalf("doc %d: Insert %v, prepared %v", i, errA, errB)
		}
	}
	want := a.OplogAfterRaw(OpTime{}, 0)
	checkEntries := func(when string, got []RawEntry) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d entries prepared, %d with Insert", when, len(got), len(want))
		}
		for i := range want {
			ea, _ := want[i].Decode()
			eb, err := got[i].Decode()
			if err != nil {
				t.Fatalf("%s: entry %d: %v", when, i, err)
			}
			if ea.TS != eb.TS || !ea.Wall.Equal(eb.Wall) || ea.Op != eb.Op || ea.Coll != eb.Coll || !bytes.Equal(ea.raw, eb.raw) {
				t.Fatalf("%s: entry %d: %+v prepared, %+v with Insert", when, i, eb, ea)
			}
			if re := appendEntry(nil, &eb); !bytes.Equal(re, got[i].Bytes()) {
				t.Fatalf("%s: entry %d is not appendEntry's encoding of itself", when, i)
			}
		}
	}
	checkEntries("before the restart", b.OplogAfterRaw(OpTime{}, 0))
	checkUUIDs(t, b.OplogAfter(OpTime{}, 0))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = Open(Options{Now: now, Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	checkEntries("after the restart", b.OplogAfterRaw(OpTime{}, 0))
}

// preparedEntryChange is a change between an IndexSet and the insert that uses it: mostly
// none; else a new or dropped secondary index, a dropped collection, or a rename away and
// back (the same collection under its name again).
func preparedEntryChange(n int) func(w *Writer) error {
	switch n {
	case 0:
		return func(w *Writer) error { _, err := w.DropCollection("db", "c"); return err }
	case 1:
		return func(w *Writer) error {
			_, err := w.CreateIndex("db", "c", IndexSpec{Name: "k_1", Key: d("k", 1)})
			return err
		}
	case 2:
		return func(w *Writer) error { return w.DropIndexes("db", "c") }
	case 3:
		return func(w *Writer) error {
			if _, err := w.CreateCollection("db", "c"); err != nil {
				return err
			}
			if err := w.RenameCollection("db", "c", Namespace{DB: "db", Coll: "away"}, false); err != nil {
				return err
			}
			return w.RenameCollection("db", "away", Namespace{DB: "db", Coll: "c"}, false)
		}
	}
	return func(*Writer) error { return nil }
}

// checkUUIDs checks that every document entry of db.c carries the UUID of the collection
// its last create (or rename into db.c) gave it.
func checkUUIDs(t *testing.T, ents []Entry) {
	t.Helper()
	var cur bson.Binary
	for i, e := range ents {
		switch {
		case e.Op == OpCreate && e.Coll == "c":
			cur = e.UUID
		case e.Op == OpInsert && !bytes.Equal(e.UUID.Data, cur.Data):
			t.Fatalf("entry %d: insert with UUID %x, collection's %x", i, e.UUID.Data, cur.Data)
		}
	}
}

// TestOplogShowsEveryDurableEntry has writers commit prepared inserts (whose entries reach
// the oplog after the exclusive lock, oplog.appendLater), ordinary inserts and large Writes
// that yield, while readers tail the oplog: every read must hold every entry up to the
// durable OpTime taken before it (none queued out of sight once published), in strictly
// increasing OpTime order, and the tails must end equal to the whole oplog.
func TestOplogShowsEveryDurableEntry(t *testing.T) {
	e := openMem(t)
	mustWrite(t, e, func(w *Writer) error { _, err := w.CreateCollection("db", "c"); return err })
	const writers, writes = 4, 150
	var wg sync.WaitGroup
	for wr := range writers {
		wg.Go(func() {
			for i := range writes {
				var set *IndexSet
				e.Read(func(r *Reader) { set = r.IndexSet("db", "c") })
				var ps []*PreparedDoc
				for j := range 1 + i%3*40 {
					p, err := set.Prepare(d("_id", fmt.Sprintf("%d-%d-%d", wr, i, j)))
					if err != nil {
						t.Error(err)
						return
					}
					ps = append(ps, p)
				}
				_, err := e.Write(context.Background(), func(w *Writer) error {
					for j, p := range ps {
						if j == 20 {
							if err := w.Yield(nil); err != nil {
								return err
							}
						}
						if _, err := w.InsertPrepared("db", "c", p); err != nil {
							return err
						}
					}
					_, err := w.Insert("db", "c", d("_id", fmt.Sprintf("%d-%d-plain", wr, i)))
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	tails := make([][]OpTime, 2)
	var readers sync.WaitGroup
	for rd := range tails {
		readers.Go(func() {
			var last OpTime
			for {
				notify := e.OplogNotify()
				durable := e.durableTS()
				ents := e.OplogAfterRaw(last, 0)
				for _, ent := range ents {
					if !tsLess(last, ent.TS) {
						t.Errorf("reader %d: entry %v after %v", rd, ent.TS, last)
						return
					}
					last = ent.TS
					tails[rd] = append(tails[rd], ent.TS)
				}
				if tsLess(last, durable) {
					t.Errorf("reader %d: read up to %v, durable was %v before the read", rd, last, durable)
					return
				}
				select {
				case <-notify:
				case <-done:
					if len(ents) == 0 && !tsLess(last, e.durableTS()) {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(done)
	readers.Wait()
	all := e.OplogAfterRaw(OpTime{}, 0)
	for rd, tail := range tails {
		if len(tail) != len(all) {
			t.Fatalf("reader %d saw %d entries, the oplog holds %d", rd, len(tail), len(all))
		}
		for i := range all {
			if tail[i] != all[i].TS {
				t.Fatalf("reader %d: entry %d at %v, the oplog's at %v", rd, i, tail[i], all[i].TS)
			}
		}
	}
}
