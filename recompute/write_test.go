package recompute

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/store"
)

// TestTermRefusesWrites checks the fence itself: a parent write whose rev guard matches is
// still refused (as a conflict) when the stored document has a newer term — refused by the
// term, not by time.
func TestTermRefusesWrites(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx
	at := baseTick()
	key := store.Key{ID: "g1", Type: "group", Tick: at}
	upd := func(online int64) bson.D {
		return bson.D{{Key: "$set", Value: bson.D{{Key: store.FieldOnline, Value: online}, {Key: store.FieldVersion, Value: int64(1)}}}}
	}
	write := func(exists bool, rev, term, online int64) []int {
		t.Helper()
		c, err := writeGuarded(ctx, e.counts, []guardedWrite{{key: key, exists: exists, rev: rev, update: upd(online), term: term}})
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		return c
	}
	if c := write(false, 0, 5, 10); len(c) != 0 {
		t.Fatalf("first write conflicted: %v", c)
	}
	var doc struct {
		Online int64 `bson:"online"`
		Term   int64 `bson:"term"`
	}
	read := func() {
		t.Helper()
		if err := e.counts.FindOne(ctx, bson.D{{Key: store.FieldID, Value: key.ID}}).Decode(&doc); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if doc.Online != 10 || doc.Term != 5 {
		t.Fatalf("doc = %+v, want online 10 term 5", doc)
	}
	if c := write(true, 1, 4, 99); len(c) != 1 {
		t.Fatalf("older term's write not refused: conflicts %v", c)
	}
	if c := write(true, 1, 6, 11); len(c) != 0 {
		t.Fatalf("newer term's write refused: %v", c)
	}
	read()
	if doc.Online != 11 || doc.Term != 6 {
		t.Fatalf("doc = %+v, want online 11 term 6", doc)
	}
}
