package watcher

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/store"
)

// TestLeafProjection opens the watcher's stream (with its $project) and the same stream
// without the projection over the same writes (inserts, updates, a parent, another
// partition's project), and checks that every event decodes to the same leaf, with the same
// operation and time, while the projected events are at most 60% of the bytes (the token and times stay).
func TestLeafProjection(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	part := Partition{}
	whole := part.streamFilter()
	whole = whole[:len(whole)-1]
	open := func(pipe []bson.D) *mongo.ChangeStream {
		cs, err := e.counts.Watch(ctx, pipe, options.ChangeStream().SetFullDocument(options.UpdateLookup))
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		t.Cleanup(func() { _ = cs.Close(context.Background()) })
		return cs
	}
	projected, full := open(part.streamFilter()), open(whole)

	at := baseTick()
	e.submit(item("p1", "a", "online", at, 3, 1), item("p2", "b", "online", at, 4, 1))
	e.submit(item("p1", "a", "online", at, 5, 2)) // an update of a's document
	if _, err := e.counts.InsertOne(ctx, bson.D{{Key: store.FieldID, Value: "parent"}, {Key: store.FieldType, Value: "online"},
		{Key: store.FieldTimestamp, Value: at}, {Key: store.FieldRollup, Value: true}, {Key: store.FieldProject, Value: "p1"}}); err != nil {
		t.Fatal(err)
	}
	e.submit(item("p2", "c", "online", at, 6, 1))

	var projBytes, fullBytes int
	for i := range 4 { // a, b, a again, c; the parent is filtered out
		if !projected.Next(ctx) || !full.Next(ctx) {
			t.Fatalf("event %d: %v / %v", i, projected.Err(), full.Err())
		}
		p, f := decodeEvent(projected.Current), decodeEvent(full.Current)
		projBytes += len(projected.Current)
		fullBytes += len(full.Current)
		if p.op != f.op || !p.wall.Equal(f.wall) || p.op == "" || p.wall.IsZero() {
			t.Fatalf("event %d: op %q at %v projected, %q at %v whole", i, p.op, p.wall, f.op, f.wall)
		}
		pl, perr := store.DecodeLeaf(p.doc)
		fl, ferr := store.DecodeLeaf(f.doc)
		if perr != nil || ferr != nil || pl != fl {
			t.Fatalf("event %d: leaf %+v (%v) projected, %+v (%v) whole", i, pl, perr, fl, ferr)
		}
		if _, err := projected.Current.LookupErr("_id"); err != nil {
			t.Fatalf("event %d: the projection dropped the resume token", i)
		}
		for _, dropped := range []string{"ns", "documentKey", "updateDescription"} {
			if _, err := projected.Current.LookupErr(dropped); err == nil {
				t.Errorf("event %d: the projected event still has %s", i, dropped)
			}
		}
	}
	if projBytes*10 > fullBytes*6 {
		t.Errorf("projected events are %d bytes, whole ones %d: want at most 60%%", projBytes, fullBytes)
	}
	t.Logf("4 events: %d bytes projected, %d whole", projBytes, fullBytes)
}
