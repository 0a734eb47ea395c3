package embedded_test

import (
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/embeddedtest"
)

// getMoreFailPoint is failGetMoreAfterCursorCheckout: a getMore fails with errorCode once
// its cursor is checked out, and the cursor is gone.
func getMoreFailPoint(mode any, data bson.D) bson.D {
	return csDoc("configureFailPoint", "failGetMoreAfterCursorCheckout", "mode", mode, "data", data)
}

// TestGetMoreFailPointRaw checks the error a failing getMore answers, with and without the
// ResumableChangeStreamError label, and that its cursor is killed.
func TestGetMoreFailPointRaw(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("c")
	for i := range 4 {
		if _, err := coll.InsertOne(e.ctx, csDoc("_id", int32(i))); err != nil {
			t.Fatal(err)
		}
	}
	openStream := func(t *testing.T) int64 {
		t.Helper()
		raw, err := runRaw(e.ctx, e.db, csDoc("aggregate", "c", "pipeline", bson.A{csDoc("$changeStream", bson.D{})}, "cursor", bson.D{}))
		if err != nil {
			t.Fatal(err)
		}
		return get(mustD(t, raw), "cursor.id").(int64)
	}
	openFind := func(t *testing.T) int64 {
		t.Helper()
		raw, err := runRaw(e.ctx, e.db, csDoc("find", "c", "batchSize", int32(1)))
		if err != nil {
			t.Fatal(err)
		}
		return get(mustD(t, raw), "cursor.id").(int64)
	}
	getMore := func(id int64) error {
		return e.db.RunCommand(e.ctx, csDoc("getMore", id, "collection", "c", "maxTimeMS", int64(50))).Err()
	}
	tests := []struct {
		name      string
		open      func(t *testing.T) int64
		code      int32
		resumable bool
	}{
		{"change stream, resumable code", openStream, 6, true},
		{"change stream, not primary", openStream, 10107, true},
		{"change stream, other code", openStream, 2, false},
		{"find cursor", openFind, 6, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := tt.open(t)
			e.store.FailPoint(t, e.c, getMoreFailPoint(csDoc("times", int32(1)), csDoc("errorCode", tt.code)))
			var se mongo.ServerError
			if err := getMore(id); !errors.As(err, &se) || !se.HasErrorCode(int(tt.code)) {
				t.Fatalf("getMore = %v, want code %d", err, tt.code)
			}
			if got := se.HasErrorLabel("ResumableChangeStreamError"); got != tt.resumable {
				t.Errorf("ResumableChangeStreamError label = %v, want %v (%v)", got, tt.resumable, se)
			}
			if err := getMore(id); !errors.As(err, &se) || !se.HasErrorCode(43) {
				t.Errorf("getMore after the failure = %v, want CursorNotFound (43): the cursor is killed", err)
			}
		})
	}
	t.Run("without errorCode: InternalError", func(t *testing.T) {
		id := openFind(t)
		e.store.FailPoint(t, e.c, getMoreFailPoint(csDoc("times", int32(1)), bson.D{}))
		var se mongo.ServerError
		if err := getMore(id); !errors.As(err, &se) || !se.HasErrorCode(1) {
			t.Fatalf("getMore = %v, want InternalError (1)", err)
		}
	})
}

// TestGetMoreFailPointStreamResumes: a getMore of a change stream fails mid-stream; the
// driver resumes from the last token it has, and every event arrives exactly once, in order.
// appName confines the fault to the watching client.
func TestGetMoreFailPointStreamResumes(t *testing.T) {
	store := embeddedtest.Start(t)
	var log commandLog
	c := store.Client(t, quickMonitor(), options.Client().SetAppName("gm-resume").SetMonitor(log.monitor()))
	writer := store.Client(t, quickMonitor())
	ctx := ctxFor(t)
	db := store.Database(t, c)
	coll := db.Collection("counts")
	wcoll := writer.Database(db.Name()).Collection("counts")
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	const n = 30
	var got []int32
	for i := range n {
		if _, err := wcoll.InsertOne(ctx, csDoc("_id", int32(i))); err != nil {
			t.Fatal(err)
		}
		if i%10 == 5 {
			// Reading the events so far, then the next getMore fails.
			for len(got) <= i {
				got = append(got, nextEvent(ctx, t, cs).DocumentKey["_id"].(int32))
			}
			store.FailPoint(t, writer, getMoreFailPoint(csDoc("times", int32(1)), csDoc("errorCode", int32(91), "appName", "gm-resume")))
		}
	}
	for len(got) < n {
		got = append(got, nextEvent(ctx, t, cs).DocumentKey["_id"].(int32))
	}
	for i, id := range got {
		if id != int32(i) {
			t.Fatalf("events = %v, want 0..%d in order, each once", got, n-1)
		}
	}
	if cs.TryNext(ctx) {
		t.Fatalf("extra event %v", cs.Current)
	}
	if k := log.count("aggregate"); k != 4 {
		t.Errorf("aggregate sent %d times, want 4 (the open and one resume per failed getMore)", k)
	}
	// appName confines the fault: another client's getMores pass.
	store.FailPoint(t, writer, getMoreFailPoint("alwaysOn", csDoc("errorCode", int32(91), "appName", "gm-resume")))
	cur, err := wcoll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.D
	if err := cur.All(ctx, &docs); err != nil || len(docs) != n {
		t.Errorf("find of another app in batches of 2: %d docs, %v; want %d", len(docs), err, n)
	}
}
