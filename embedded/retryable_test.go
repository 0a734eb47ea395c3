package embedded_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/embedded/testctx"
)

// commandLog records the command events of one client.
type commandLog struct {
	mu        sync.Mutex
	started   []string
	failures  map[string][]error
	succeeded map[string]int
}

func (l *commandLog) monitor() *event.CommandMonitor {
	l.failures = map[string][]error{}
	l.succeeded = map[string]int{}
	return &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			l.mu.Lock()
			l.started = append(l.started, e.CommandName)
			l.mu.Unlock()
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			l.mu.Lock()
			l.succeeded[e.CommandName]++
			l.mu.Unlock()
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			l.mu.Lock()
			l.failures[e.CommandName] = append(l.failures[e.CommandName], e.Failure)
			l.mu.Unlock()
		},
	}
}

func (l *commandLog) count(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.started {
		if s == name {
			n++
		}
	}
	return n
}

func failPointCmd(mode any, data bson.D) bson.D {
	return bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode}, {Key: "data", Value: data}}
}

// TestRetryableWriteAfterClosedConnection: the fail point closes the connection on the first
// update; the driver retries once and the $inc lands exactly once.
func TestRetryableWriteAfterClosedConnection(t *testing.T) {
	store := embeddedtest.Start(t)
	var log commandLog
	c := store.Client(t, quickMonitor(), options.Client().SetMonitor(log.monitor()).SetRetryWrites(true))
	db := store.Database(t, c)
	ctx := ctxFor(t)
	coll := db.Collection("c")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	store.FailPoint(t, c, failPointCmd(bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"update"}},
		{Key: "closeConnection", Value: true},
	}))
	res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
	if err != nil {
		t.Fatalf("update (retried): %v", err)
	}
	if res.MatchedCount != 1 || res.ModifiedCount != 1 {
		t.Errorf("result = %+v", res)
	}
	if n := log.count("update"); n != 2 {
		t.Errorf("update sent %d times, want 2 (first attempt + one retry)", n)
	}
	var got struct{ N int32 }
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&got); err != nil {
		t.Fatalf("find: %v", err)
	}
	if got.N != 1 {
		t.Errorf("n = %d, want 1 (applied exactly once)", got.N)
	}
}

// TestRetryableWriteErrorLabel: an injected NotWritablePrimary on insert, configured without
// errorLabels, is labelled RetryableWriteError by the server and retried by the driver.
func TestRetryableWriteErrorLabel(t *testing.T) {
	store := embeddedtest.Start(t)
	var log commandLog
	c := store.Client(t, quickMonitor(), options.Client().SetMonitor(log.monitor()).SetRetryWrites(true))
	db := store.Database(t, c)
	ctx := ctxFor(t)
	coll := db.Collection("c")
	if err := db.CreateCollection(ctx, "c"); err != nil {
		t.Fatalf("create: %v", err)
	}
	store.FailPoint(t, c, failPointCmd(bson.D{{Key: "times", Value: 1}}, bson.D{
		{Key: "failCommands", Value: bson.A{"insert"}},
		{Key: "errorCode", Value: 10107},
	}))
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert (retried): %v", err)
	}
	log.mu.Lock()
	fails := log.failures["insert"]
	log.mu.Unlock()
	if len(fails) != 1 {
		t.Fatalf("insert failures = %v, want exactly one", fails)
	}
	type labeled interface{ HasErrorLabel(string) bool }
	var le labeled
	if !errors.As(fails[0], &le) || !le.HasErrorLabel("RetryableWriteError") {
		t.Errorf("failure %v lacks the RetryableWriteError label", fails[0])
	}
	if n := log.count("insert"); n != 2 {
		t.Errorf("insert sent %d times, want 2", n)
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Errorf("count = %d, %v; want 1", n, err)
	}
}

// TestRetryableWriteSameTxnNumber sends the same update twice on the wire with one lsid and
// txnNumber (what a driver retry looks like): it applies once and the second reply repeats
// the first; an older txnNumber is refused with TransactionTooOld (225).
func TestRetryableWriteSameTxnNumber(t *testing.T) {
	store := embeddedtest.Start(t)
	store.SkipIfReal(t)
	rc := dialRaw(t, store.Server.Addr())
	uuid := make([]byte, 16)
	_, _ = rand.Read(uuid)
	lsid := bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: uuid}}}
	db := "retry_raw"
	t.Cleanup(func() {
		rc.command(t, bson.D{{Key: "dropDatabase", Value: 1}, {Key: "$db", Value: db}})
	})
	rc.command(t, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: 0}}}}, {Key: "$db", Value: db}})

	update := func(txn int64) bson.D {
		return rc.command(t, bson.D{
			{Key: "update", Value: "c"},
			{Key: "updates", Value: bson.A{
				bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}},
				bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "new"}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}, {Key: "upsert", Value: true}},
				bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: "gen"}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}, {Key: "upsert", Value: true}},
			}},
			{Key: "lsid", Value: lsid},
			{Key: "txnNumber", Value: txn},
			{Key: "$db", Value: db},
		})
	}
	strip := func(d bson.D) string {
		var out bson.D
		for _, e := range d {
			if e.Key != "$clusterTime" && e.Key != "operationTime" {
				out = append(out, e)
			}
		}
		return fmt.Sprint(out)
	}
	first := update(5)
	if get(first, "ok") != 1.0 || get(first, "n") != int32(3) || get(first, "nModified") != int32(1) {
		t.Fatalf("first reply = %v", first)
	}
	second := update(5)
	if strip(second) != strip(first) {
		t.Errorf("retry reply differs:\n first %v\nsecond %v", first, second)
	}
	find := rc.command(t, bson.D{{Key: "find", Value: "c"}, {Key: "sort", Value: bson.D{{Key: "n", Value: 1}}}, {Key: "$db", Value: db}})
	docs, _ := get(find, "cursor.firstBatch").(bson.A)
	if len(docs) != 3 {
		t.Fatalf("documents = %v, want 3 (the retried upserts must not insert again)", docs)
	}
	for _, d := range docs {
		if n := get(d.(bson.D), "n"); n != int32(1) {
			t.Errorf("doc %v: n = %v, want 1 (applied once)", d, n)
		}
	}
	old := update(4)
	if get(old, "ok") != 0.0 || get(old, "code") != int32(225) {
		t.Errorf("older txnNumber reply = %v, want code 225", old)
	}
	// A new txnNumber runs again.
	if third := update(6); get(third, "nModified") != int32(3) {
		t.Errorf("next txnNumber reply = %v, want nModified 3", third)
	}
}

func TestWriteConcern(t *testing.T) {
	e := newEnv(t)
	j := true
	majority := e.db.Collection("c", options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: "majority", Journal: &j}))
	if _, err := majority.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatalf("insert w:majority j:true: %v", err)
	}

	// One more member than the replica set has can never acknowledge.
	raw, err := runRaw(e.ctx, e.c.Database("admin"), bson.D{{Key: "hello", Value: 1}})
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	hosts, _ := get(mustD(t, raw), "hosts").(bson.A)
	tooMany := e.db.Collection("c", options.Collection().SetWriteConcern(&writeconcern.WriteConcern{W: len(hosts) + 1}))
	_, err = tooMany.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 2}})
	var we mongo.WriteException
	if !errors.As(err, &we) || we.WriteConcernError == nil || we.WriteConcernError.Code != 100 {
		t.Fatalf("insert w:%d: %v, want a WriteException with writeConcernError code 100", len(hosts)+1, err)
	}
	if n, err := majority.CountDocuments(e.ctx, bson.D{}); err != nil || n != 2 {
		t.Errorf("count = %d, %v; want 2 (the write itself applied)", n, err)
	}
}

// TestUnacknowledgedWrites sends w:0 writes (OP_MSG moreToCome: the server must not reply)
// on a single pooled connection, then acknowledged commands on the same connection.
func TestUnacknowledgedWrites(t *testing.T) {
	store := embeddedtest.Start(t)
	c := store.Client(t, quickMonitor(), options.Client().SetMaxPoolSize(1))
	db := store.Database(t, c)
	ctx := ctxFor(t)
	if err := db.CreateCollection(ctx, "c"); err != nil {
		t.Fatalf("create: %v", err)
	}
	unack := db.Collection("c", options.Collection().SetWriteConcern(writeconcern.Unacknowledged()))
	const n = 50
	for i := range n {
		res, err := unack.InsertOne(ctx, bson.D{{Key: "_id", Value: i}})
		if err != nil {
			t.Fatalf("unacknowledged insert %d: %v", i, err)
		}
		if res.Acknowledged {
			t.Fatalf("insert %d reported acknowledged", i)
		}
	}
	if _, err := unack.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: n}}, bson.D{{Key: "_id", Value: 0}}, bson.D{{Key: "_id", Value: n + 1}}},
		options.InsertMany().SetOrdered(false)); err != nil {
		t.Fatalf("unacknowledged InsertMany: %v", err)
	}
	if _, err := unack.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$set", Value: bson.D{{Key: "seen", Value: true}}}}); err != nil {
		t.Fatalf("unacknowledged update: %v", err)
	}
	// Writes on one connection are applied in order, so once the last one is visible all are.
	acked := db.Collection("c")
	deadline := testctx.Deadline(t)
	for {
		got, err := acked.CountDocuments(ctx, bson.D{{Key: "seen", Value: true}})
		if err != nil {
			t.Fatalf("count: %v", err)
		}
		if got == n+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("count of updated docs = %d, want %d", got, n+2)
		}
	}
}
