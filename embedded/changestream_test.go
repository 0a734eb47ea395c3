package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/embedded/testctx"
)

// csDoc builds a bson.D from alternating keys and values.
func csDoc(kv ...any) bson.D {
	d := make(bson.D, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		d = append(d, bson.E{Key: kv[i].(string), Value: kv[i+1]})
	}
	return d
}

func csCtx(t *testing.T) context.Context {
	t.Helper()
	return testctx.Context(t)
}

// changeEvent is the subset of a change event the tests check.
type changeEvent struct {
	ID                bson.Raw       `bson:"_id"`
	OperationType     string         `bson:"operationType"`
	ClusterTime       bson.Timestamp `bson:"clusterTime"`
	WallTime          bson.DateTime  `bson:"wallTime"`
	FullDocument      bson.M         `bson:"fullDocument"`
	NS                bson.M         `bson:"ns"`
	DocumentKey       bson.M         `bson:"documentKey"`
	UpdateDescription *struct {
		UpdatedFields bson.M   `bson:"updatedFields"`
		RemovedFields []string `bson:"removedFields"`
	} `bson:"updateDescription"`
}

func nextEvent(ctx context.Context, t *testing.T, cs *mongo.ChangeStream) changeEvent {
	t.Helper()
	if !cs.Next(ctx) {
		t.Fatalf("change stream ended: %v", cs.Err())
	}
	var ev changeEvent
	if err := cs.Decode(&ev); err != nil {
		t.Fatalf("decode event: %v", err)
	}
	return ev
}

func TestChangeStreamCollectionEvents(t *testing.T) {
	st := embeddedtest.Start(t)
	c := st.Client(t)
	ctx := csCtx(t)
	coll := st.Database(t, c).Collection("counts")
	if _, err := coll.InsertOne(ctx, csDoc("_id", "seed")); err != nil {
		t.Fatal(err)
	}

	for _, mode := range []string{"default", "updateLookup", "whenAvailable"} {
		t.Run(mode, func(t *testing.T) {
			opts := options.ChangeStream()
			if mode != "default" {
				opts.SetFullDocument(options.FullDocument(mode))
			}
			cs, err := coll.Watch(ctx, mongo.Pipeline{}, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close(ctx)
			id := "doc-" + mode
			if _, err := coll.InsertOne(ctx, csDoc("_id", id, "online", 1, "gone", true)); err != nil {
				t.Fatal(err)
			}
			if _, err := coll.UpdateOne(ctx, csDoc("_id", id), csDoc("$set", csDoc("online", 2), "$unset", csDoc("gone", ""))); err != nil {
				t.Fatal(err)
			}
			if _, err := coll.ReplaceOne(ctx, csDoc("_id", id), csDoc("online", 3)); err != nil {
				t.Fatal(err)
			}
			if _, err := coll.DeleteOne(ctx, csDoc("_id", id)); err != nil {
				t.Fatal(err)
			}

			ins := nextEvent(ctx, t, cs)
			if ins.OperationType != "insert" || ins.FullDocument["online"] != int32(1) || ins.DocumentKey["_id"] != id {
				t.Fatalf("insert event = %+v", ins)
			}
			if ins.NS["db"] != coll.Database().Name() || ins.NS["coll"] != "counts" || ins.ClusterTime.T == 0 || ins.WallTime == 0 {
				t.Fatalf("insert event ns/times = %+v", ins)
			}
			upd := nextEvent(ctx, t, cs)
			if upd.OperationType != "update" || upd.UpdateDescription == nil {
				t.Fatalf("update event = %+v", upd)
			}
			if upd.UpdateDescription.UpdatedFields["online"] != int32(2) || len(upd.UpdateDescription.RemovedFields) != 1 || upd.UpdateDescription.RemovedFields[0] != "gone" {
				t.Fatalf("updateDescription = %+v", upd.UpdateDescription)
			}
			switch mode {
			case "default":
				if upd.FullDocument != nil {
					t.Fatalf("default mode: update carries fullDocument %v", upd.FullDocument)
				}
			case "updateLookup":
				// The lookup happens when the event is read: the document is gone by then.
				if upd.FullDocument != nil {
					t.Fatalf("updateLookup of a deleted document = %v, want null", upd.FullDocument)
				}
			case "whenAvailable":
				// No post-image without changeStreamPreAndPostImages (TestChangeStreamImages).
				if upd.FullDocument != nil {
					t.Fatalf("whenAvailable without pre- and post-images = %v, want null", upd.FullDocument)
				}
			}
			rep := nextEvent(ctx, t, cs)
			if rep.OperationType != "replace" || rep.FullDocument["online"] != int32(3) {
				t.Fatalf("replace event = %+v", rep)
			}
			del := nextEvent(ctx, t, cs)
			if del.OperationType != "delete" || del.DocumentKey["_id"] != id || del.FullDocument != nil {
				t.Fatalf("delete event = %+v", del)
			}
			if !tsBefore(ins.ClusterTime, upd.ClusterTime) || !tsBefore(upd.ClusterTime, rep.ClusterTime) || !tsBefore(rep.ClusterTime, del.ClusterTime) {
				t.Fatalf("cluster times not increasing: %v %v %v %v", ins.ClusterTime, upd.ClusterTime, rep.ClusterTime, del.ClusterTime)
			}
		})
	}
}

func tsBefore(a, b bson.Timestamp) bool { return a.T < b.T || (a.T == b.T && a.I < b.I) }

func TestChangeStreamScopesAndPipeline(t *testing.T) {
	st := embeddedtest.Start(t)
	c := st.Client(t)
	ctx := csCtx(t)
	db := st.Database(t, c)
	a, b := db.Collection("a"), db.Collection("b")
	for _, coll := range []*mongo.Collection{a, b} {
		if _, err := coll.InsertOne(ctx, csDoc("_id", 0)); err != nil {
			t.Fatal(err)
		}
	}
	dbStream, err := db.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer dbStream.Close(ctx)
	clusterStream, err := c.Watch(ctx, mongo.Pipeline{csDoc("$match", csDoc("ns.db", db.Name()))})
	if err != nil {
		t.Fatal(err)
	}
	defer clusterStream.Close(ctx)
	onlyDeletes, err := a.Watch(ctx, mongo.Pipeline{
		csDoc("$match", csDoc("operationType", csDoc("$in", bson.A{"delete"}))),
		csDoc("$project", csDoc("documentKey", 1, "operationType", 1)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer onlyDeletes.Close(ctx)

	if _, err := a.InsertOne(ctx, csDoc("_id", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.InsertOne(ctx, csDoc("_id", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.DeleteOne(ctx, csDoc("_id", 1)); err != nil {
		t.Fatal(err)
	}
	for name, cs := range map[string]*mongo.ChangeStream{"database": dbStream, "cluster": clusterStream} {
		var got []string
		for range 3 {
			ev := nextEvent(ctx, t, cs)
			got = append(got, fmt.Sprintf("%s %v %v", ev.OperationType, ev.NS["coll"], ev.DocumentKey["_id"]))
		}
		want := []string{"insert a 1", "insert b 2", "delete a 1"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s stream = %v, want %v", name, got, want)
		}
	}
	ev := nextEvent(ctx, t, onlyDeletes)
	if ev.OperationType != "delete" || ev.DocumentKey["_id"] != int32(1) || ev.NS != nil || ev.ClusterTime.T != 0 {
		t.Fatalf("filtered/projected event = %+v", ev)
	}
}

// TestChangeStreamResumeAfterCursorKilled: the server kills the cursor (getMore fails with
// CursorNotFound); the driver resumes by itself and no event is lost or repeated.
func TestChangeStreamResumeAfterCursorKilled(t *testing.T) {
	st := embeddedtest.Start(t)
	c := st.Client(t, options.Client().SetAppName("cs-resume"))
	admin := st.Client(t)
	ctx := csCtx(t)
	coll := st.Database(t, c).Collection("counts")
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	const n = 20
	seen := map[int32]int{}
	for i := range n {
		if _, err := coll.InsertOne(ctx, csDoc("_id", int32(i))); err != nil {
			t.Fatal(err)
		}
		if i == n/2 {
			st.FailPoint(t, admin, csDoc("configureFailPoint", "failCommand", "mode", csDoc("times", 1),
				"data", csDoc("failCommands", bson.A{"getMore"}, "errorCode", int32(43), "appName", "cs-resume")))
		}
	}
	for len(seen) < n {
		ev := nextEvent(ctx, t, cs)
		seen[ev.DocumentKey["_id"].(int32)]++
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("event for %d delivered %d times", id, k)
		}
	}
	if cs.TryNext(ctx) {
		t.Fatalf("unexpected extra event %v", cs.Current)
	}
}

func TestChangeStreamResumeAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := csCtx(t)
	start := func() (*embedded.Server, context.CancelFunc, chan error) {
		srv, err := embedded.New(embedded.Config{Listen: "127.0.0.1:0", DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(rctx) }()
		return srv, cancel, done
	}
	connect := func(srv *embedded.Server) *mongo.Client {
		c, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	srv, stop, done := start()
	c := connect(srv)
	coll := c.Database("cs").Collection("counts")
	cs, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := coll.InsertOne(ctx, csDoc("_id", int32(i))); err != nil {
			t.Fatal(err)
		}
	}
	nextEvent(ctx, t, cs)
	nextEvent(ctx, t, cs)
	token := cs.ResumeToken() // after the second event
	_ = c.Disconnect(ctx)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	srv, stop, done = start()
	defer func() {
		stop()
		<-done
	}()
	c = connect(srv)
	defer func() { _ = c.Disconnect(ctx) }()
	coll = c.Database("cs").Collection("counts")
	if _, err := coll.InsertOne(ctx, csDoc("_id", int32(4))); err != nil {
		t.Fatal(err)
	}
	cs, err = coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(token))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	for want := int32(2); want <= 4; want++ {
		ev := nextEvent(ctx, t, cs)
		if ev.DocumentKey["_id"] != want {
			t.Fatalf("after restart got event for %v, want %d", ev.DocumentKey["_id"], want)
		}
	}
}

func TestChangeStreamHistoryLost(t *testing.T) {
	st := embeddedtest.Start(t, embeddedtest.Options{Configure: func(cfg *embedded.Config) {
		cfg.Storage.OplogMaxBytes = 64 << 10
	}})
	st.SkipIfReal(t)
	c := st.Client(t)
	ctx := csCtx(t)
	coll := st.Database(t, c).Collection("counts")
	cs, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coll.InsertOne(ctx, csDoc("_id", "first")); err != nil {
		t.Fatal(err)
	}
	nextEvent(ctx, t, cs)
	token := cs.ResumeToken()
	_ = cs.Close(ctx)
	// Push the token out of the retained oplog.
	big := make([]byte, 4096)
	for i := range 100 {
		if _, err := coll.InsertOne(ctx, csDoc("_id", i, "pad", big)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(token))
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(286) || !se.HasErrorLabel("NonResumableChangeStreamError") {
		t.Fatalf("resume from a lost token: %v, want ChangeStreamHistoryLost (286) labelled NonResumableChangeStreamError", err)
	}
}

func TestChangeStreamInvalidateThenStartAfter(t *testing.T) {
	st := embeddedtest.Start(t)
	c := st.Client(t)
	ctx := csCtx(t)
	coll := st.Database(t, c).Collection("counts")
	if _, err := coll.InsertOne(ctx, csDoc("_id", 0)); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if err := coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(ctx, t, cs); ev.OperationType != "drop" {
		t.Fatalf("first event %q, want drop", ev.OperationType)
	}
	inv := nextEvent(ctx, t, cs)
	if inv.OperationType != "invalidate" {
		t.Fatalf("second event %q, want invalidate", inv.OperationType)
	}
	if cs.Next(ctx) {
		t.Fatalf("stream goes on after invalidate: %v", cs.Current)
	}
	invToken := cs.ResumeToken()

	if _, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(invToken)); err == nil {
		t.Fatal("resumeAfter an invalidate token succeeded; MongoDB refuses it")
	}
	if _, err := coll.InsertOne(ctx, csDoc("_id", "reborn")); err != nil {
		t.Fatal(err)
	}
	cs2, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAfter(invToken))
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close(ctx)
	if ev := nextEvent(ctx, t, cs2); ev.OperationType != "insert" || ev.DocumentKey["_id"] != "reborn" {
		t.Fatalf("startAfter invalidate: got %+v", ev)
	}
}

func TestChangeStreamStartAtOperationTimeAndOptions(t *testing.T) {
	st := embeddedtest.Start(t)
	c := st.Client(t)
	ctx := csCtx(t)
	coll := st.Database(t, c).Collection("counts")
	sess, err := c.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	sctx := mongo.NewSessionContext(ctx, sess)
	if _, err := coll.InsertOne(sctx, csDoc("_id", "at")); err != nil {
		t.Fatal(err)
	}
	at := sess.OperationTime()
	if at == nil {
		t.Fatal("no operationTime on the session")
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetStartAtOperationTime(at))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	if ev := nextEvent(ctx, t, cs); ev.DocumentKey["_id"] != "at" {
		t.Fatalf("startAtOperationTime: first event %+v, want the insert at that time", ev)
	}

	tok := cs.ResumeToken()
	_, err = coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(tok).SetStartAtOperationTime(at))
	if err == nil {
		t.Fatal("resumeAfter together with startAtOperationTime succeeded")
	}
	_, err = coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetResumeAfter(csDoc("_data", "zz-not-hex")))
	if err == nil {
		t.Fatal("a malformed resume token was accepted")
	}
}

// TestChangeStreamAwaitAndIdleToken: getMore blocks up to maxAwaitTimeMS, wakes on a write,
// and the postBatchResumeToken advances while the stream sees no matching events.
func TestChangeStreamAwaitAndIdleToken(t *testing.T) {
	st := embeddedtest.Start(t)
	c := st.Client(t)
	ctx := csCtx(t)
	db := st.Database(t, c)
	coll, other := db.Collection("counts"), db.Collection("other")
	cs, err := coll.Watch(ctx, mongo.Pipeline{}, options.ChangeStream().SetMaxAwaitTime(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	// The first TryNext only consumes the (empty) first batch of the aggregate.
	if cs.TryNext(ctx) {
		t.Fatalf("event on an idle stream: %v", cs.Current)
	}
	begin := time.Now()
	if cs.TryNext(ctx) {
		t.Fatalf("event on an idle stream: %v", cs.Current)
	}
	if waited := time.Since(begin); waited < 250*time.Millisecond {
		t.Fatalf("idle getMore returned after %v, want it to wait maxAwaitTimeMS", waited)
	}
	before := cs.ResumeToken()
	if _, err := other.InsertOne(ctx, csDoc("_id", 1)); err != nil {
		t.Fatal(err)
	}
	deadline := testctx.Deadline(t)
	for bson.Raw(cs.ResumeToken()).String() == bson.Raw(before).String() {
		if time.Now().After(deadline) {
			t.Fatal("postBatchResumeToken did not advance on an idle stream")
		}
		if cs.TryNext(ctx) {
			t.Fatalf("unexpected event %v", cs.Current)
		}
	}

	got := make(chan changeEvent, 1)
	go func() {
		var ev changeEvent
		if cs.Next(ctx) {
			_ = cs.Decode(&ev)
		}
		got <- ev
	}()
	if _, err := coll.InsertOne(ctx, csDoc("_id", "wake")); err != nil {
		t.Fatal(err)
	}
	if ev := <-got; ev.DocumentKey["_id"] != "wake" {
		t.Fatalf("blocked Next got %+v", ev)
	}
}

// TestChangeStreamConcurrentWriters: every acknowledged upsert of several concurrent unordered
// bulk writers is delivered exactly once, in cluster-time order.
func TestChangeStreamConcurrentWriters(t *testing.T) {
	st := embeddedtest.Start(t)
	c := st.Client(t)
	ctx := csCtx(t)
	coll := st.Database(t, c).Collection("counts")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: csDoc("id", 1, "type", 1, "timestamp", 1), Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	cs, err := coll.Watch(ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	const writers, batches, batch = 4, 10, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				models := make([]mongo.WriteModel, 0, batch)
				for i := range batch {
					key := fmt.Sprintf("w%d-%d", w, b*batch+i)
					models = append(models, mongo.NewUpdateOneModel().
						SetFilter(csDoc("id", key, "type", "process", "timestamp", int64(0))).
						SetUpdate(csDoc("$set", csDoc("online", int32(i)))).SetUpsert(true))
				}
				if _, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
					t.Errorf("bulk write: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	var last bson.Timestamp
	for len(seen) < writers*batches*batch {
		ev := nextEvent(ctx, t, cs)
		key := ev.FullDocument["id"].(string)
		if seen[key] {
			t.Fatalf("event for %s delivered twice", key)
		}
		seen[key] = true
		if !tsBefore(last, ev.ClusterTime) {
			t.Fatalf("cluster time %v not after %v", ev.ClusterTime, last)
		}
		last = ev.ClusterTime
	}
	if cs.TryNext(ctx) {
		t.Fatalf("extra event %v", cs.Current)
	}
}
