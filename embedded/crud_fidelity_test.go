package embedded_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestInsertDollarPrefixedID checks MongoDB 5.0+'s rule for $-prefixed field names on insert:
// allowed at the top level and in embedded documents, refused inside _id (DBRef fields
// excepted).
func TestInsertDollarPrefixedID(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("c")
	tests := []struct {
		name string
		doc  bson.D
		code int32 // 0: accepted
	}{
		{"top-level $ field", bson.D{{Key: "_id", Value: 1}, {Key: "$a", Value: 1}}, 0},
		{"$ field in embedded doc", bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: bson.D{{Key: "$b", Value: 1}}}}, 0},
		{"dotted key in _id", bson.D{{Key: "_id", Value: bson.D{{Key: "a.b", Value: 1}}}}, 0},
		{"$ field in _id", bson.D{{Key: "_id", Value: bson.D{{Key: "$a", Value: 1}}}}, 52},
		{"nested $ field in _id", bson.D{{Key: "_id", Value: bson.D{{Key: "a", Value: bson.D{{Key: "$b", Value: 1}}}}}}, 52},
		{"DBRef in _id", bson.D{{Key: "_id", Value: bson.D{{Key: "$ref", Value: "c"}, {Key: "$id", Value: 1}}}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := coll.InsertOne(e.ctx, tc.doc)
			if got := errCode(err); got != tc.code {
				t.Fatalf("insert %v: err %v (code %d), want code %d", tc.doc, err, got, tc.code)
			}
			if tc.code != 0 {
				n, err := coll.CountDocuments(e.ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$eq", Value: get(tc.doc, "_id")}}}})
				if err != nil || n != 0 {
					t.Fatalf("refused document stored: n=%d err=%v", n, err)
				}
			}
		})
	}
}

// TestUnknownStatementField checks that a statement field MongoDB 7.0 does not know (sort on
// update statements is 8.0) fails the whole command with 40415 before any statement runs, as
// mongod's command parser does, rather than as a write error.
func TestUnknownStatementField(t *testing.T) {
	e := newEnv(t)
	e.store.SkipIfReal(t) // a real 8.0 server accepts sort
	coll := e.db.Collection("c")
	if _, err := coll.InsertMany(e.ctx, []any{bson.D{{Key: "_id", Value: 1}, {Key: "x", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []bson.D{
		{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{
			bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 1}}}}}},
			bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "x", Value: 1}}}}}, {Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}}},
		}}},
		{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{
			bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 1}, {Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}}},
		}}},
	} {
		err := e.db.RunCommand(e.ctx, cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != 40415 {
			t.Fatalf("%s: err = %v, want command error 40415", cmd[0].Key, err)
		}
	}
	var doc bson.D
	if err := coll.FindOne(e.ctx, bson.D{}).Decode(&doc); err != nil || get(doc, "x") != int32(1) {
		t.Fatalf("document after refused commands = %v, %v; want x: 1", doc, err)
	}
}

// TestCurrentDate checks $currentDate through the driver: a date (true or {$type: "date"})
// and a timestamp, both from the server's clock at the time of the update.
func TestCurrentDate(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("c")
	if _, err := coll.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-2 * time.Second)
	_, err := coll.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$currentDate", Value: bson.D{
		{Key: "d", Value: true},
		{Key: "e.f", Value: bson.D{{Key: "$type", Value: "date"}}},
		{Key: "ts", Value: bson.D{{Key: "$type", Value: "timestamp"}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(2 * time.Second)
	var got bson.D
	if err := coll.FindOne(e.ctx, bson.D{}).Decode(&got); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"d", "e.f"} {
		d, ok := get(got, path).(bson.DateTime)
		if !ok || d.Time().Before(before) || d.Time().After(after) {
			t.Errorf("%s = %v, want a date between %v and %v", path, get(got, path), before, after)
		}
	}
	ts, ok := get(got, "ts").(bson.Timestamp)
	if !ok || int64(ts.T) < before.Unix() || int64(ts.T) > after.Unix() {
		t.Errorf("ts = %v, want a timestamp of now", get(got, "ts"))
	}
	// A bad $type is refused.
	_, err = coll.UpdateOne(e.ctx, bson.D{}, bson.D{{Key: "$currentDate", Value: bson.D{{Key: "d", Value: bson.D{{Key: "$type", Value: "int"}}}}}})
	if errCode(err) != 2 {
		t.Errorf("$currentDate {$type: int}: %v, want BadValue", err)
	}
}

// TestComputedUpdatesInChangeStreams checks that pipeline-style and arrayFilters updates are
// ordinary update events, with the changed paths in updateDescription.
func TestComputedUpdatesInChangeStreams(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("c")
	if _, err := coll.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}, {Key: "y", Value: bson.A{bson.D{{Key: "b", Value: 3}}, bson.D{{Key: "b", Value: 1}}}}}); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(e.ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close(e.ctx) }()
	if _, err := coll.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, mongo.Pipeline{
		{{Key: "$set", Value: bson.D{{Key: "c", Value: bson.D{{Key: "$add", Value: bson.A{"$a", 1}}}}}}},
		{{Key: "$unset", Value: "a"}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := coll.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$set", Value: bson.D{{Key: "y.$[i].b", Value: 0}}}},
		options.UpdateOne().SetArrayFilters([]any{bson.D{{Key: "i.b", Value: 3}}})); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(e.ctx, t, cs)
	if ev.OperationType != "update" || ev.UpdateDescription == nil ||
		fmt.Sprint(map[string]any(ev.UpdateDescription.UpdatedFields)) != "map[c:2]" || fmt.Sprint(ev.UpdateDescription.RemovedFields) != "[a]" {
		t.Fatalf("pipeline update event = %+v %+v", ev, *ev.UpdateDescription)
	}
	ev = nextEvent(e.ctx, t, cs)
	if ev.OperationType != "update" || ev.UpdateDescription == nil ||
		fmt.Sprint(map[string]any(ev.UpdateDescription.UpdatedFields)) != "map[y.0.b:0]" || len(ev.UpdateDescription.RemovedFields) != 0 {
		t.Fatalf("arrayFilters update event = %+v", ev)
	}
}
