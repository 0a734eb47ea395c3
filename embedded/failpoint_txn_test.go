package embedded_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/embeddedtest"
)

// txnWriteFailPoint is onPrimaryTransactionalWrite: it fires on statements of retryable
// writes, after the statement is applied (closeConnection, the default: the reply is lost)
// or before (failBeforeCommitExceptionCode: the statement is not applied).
func txnWriteFailPoint(mode any, data bson.D) bson.D {
	cmd := csDoc("configureFailPoint", "onPrimaryTransactionalWrite", "mode", mode)
	if data != nil {
		cmd = append(cmd, bson.E{Key: "data", Value: data})
	}
	return cmd
}

// oneRetryCtx is a context without a deadline, cancelled after testTimeout by a timer: the
// Go driver retries a write exactly once only when its context has no deadline (with one, it
// retries until the deadline).
func oneRetryCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	timer := time.AfterFunc(testTimeout, cancel)
	t.Cleanup(func() {
		timer.Stop()
		cancel()
	})
	return ctx
}

// counters reads {_id: n} of every document of coll.
func counters(t *testing.T, e env, coll *mongo.Collection) map[any]int32 {
	t.Helper()
	cur, err := coll.Find(e.ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		ID any   `bson:"_id"`
		N  int32 `bson:"n"`
	}
	if err := cur.All(e.ctx, &docs); err != nil {
		t.Fatal(err)
	}
	out := map[any]int32{}
	for _, d := range docs {
		out[d.ID] = d.N
	}
	return out
}

// incAll is an unordered bulk of $inc updates, one statement per document: a statement
// applied twice would show as n = 2.
func incAll(ids ...int32) []mongo.WriteModel {
	var models []mongo.WriteModel
	for _, id := range ids {
		models = append(models, mongo.NewUpdateOneModel().SetFilter(csDoc("_id", id)).SetUpdate(csDoc("$inc", csDoc("n", int32(1)))))
	}
	return models
}

func TestTxnWriteFailPointReplyLost(t *testing.T) {
	store := embeddedtest.Start(t)
	var log commandLog
	c := store.Client(t, quickMonitor(), options.Client().SetMonitor(log.monitor()).SetRetryWrites(true))
	e := env{store: store, c: c, db: store.Database(t, c), ctx: oneRetryCtx(t)}

	t.Run("insertMany: applied, reply lost, the retry replays", func(t *testing.T) {
		coll := e.db.Collection("ins")
		store.FailPoint(t, c, txnWriteFailPoint(csDoc("times", int32(1)), nil))
		before := log.count("insert")
		res, err := coll.InsertMany(e.ctx, []any{csDoc("_id", int32(1)), csDoc("_id", int32(2)), csDoc("_id", int32(3))})
		if err != nil {
			t.Fatalf("insertMany (retried): %v", err)
		}
		if len(res.InsertedIDs) != 3 {
			t.Errorf("inserted ids = %v", res.InsertedIDs)
		}
		if n := log.count("insert") - before; n != 2 {
			t.Errorf("insert sent %d times, want 2 (the attempt whose reply was lost, one retry)", n)
		}
		if n, err := coll.CountDocuments(e.ctx, bson.D{}); err != nil || n != 3 {
			t.Errorf("count = %d, %v; want 3", n, err)
		}
	})

	t.Run("update statements: each applied exactly once, counts exact", func(t *testing.T) {
		coll := e.db.Collection("upd")
		if _, err := coll.InsertMany(e.ctx, []any{csDoc("_id", int32(1), "n", int32(0)), csDoc("_id", int32(2), "n", int32(0)), csDoc("_id", int32(3), "n", int32(0))}); err != nil {
			t.Fatal(err)
		}
		store.FailPoint(t, c, txnWriteFailPoint(csDoc("times", int32(1)), nil))
		res, err := coll.BulkWrite(e.ctx, incAll(1, 2, 3), options.BulkWrite().SetOrdered(false))
		if err != nil {
			t.Fatalf("bulk (retried): %v", err)
		}
		if res.MatchedCount != 3 || res.ModifiedCount != 3 {
			t.Errorf("result = %+v, want matched 3 modified 3", res)
		}
		if got := counters(t, e, coll); got[int32(1)] != 1 || got[int32(2)] != 1 || got[int32(3)] != 1 {
			t.Errorf("counters = %v, want each 1", got)
		}
	})

	t.Run("upsert: the retry answers the upserted _id", func(t *testing.T) {
		coll := e.db.Collection("ups")
		store.FailPoint(t, c, txnWriteFailPoint(csDoc("times", int32(1)), nil))
		res, err := coll.UpdateOne(e.ctx, csDoc("k", "a"), csDoc("$inc", csDoc("n", int32(1))), options.UpdateOne().SetUpsert(true))
		if err != nil {
			t.Fatalf("upsert (retried): %v", err)
		}
		var doc struct {
			ID any   `bson:"_id"`
			N  int32 `bson:"n"`
		}
		if err := coll.FindOne(e.ctx, csDoc("k", "a")).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		if res.UpsertedCount != 1 || res.UpsertedID != doc.ID || doc.N != 1 {
			t.Errorf("result = %+v, stored %+v; want the stored _id upserted once", res, doc)
		}
		if n, _ := coll.CountDocuments(e.ctx, bson.D{}); n != 1 {
			t.Errorf("count = %d, want 1", n)
		}
	})

	t.Run("a statement that writes nothing does not enter it", func(t *testing.T) {
		coll := e.db.Collection("noop")
		store.FailPoint(t, c, txnWriteFailPoint(csDoc("times", int32(1)), nil))
		before := log.count("update")
		res, err := coll.UpdateOne(e.ctx, csDoc("_id", "missing"), csDoc("$set", csDoc("n", int32(1))))
		if err != nil || res.MatchedCount != 0 {
			t.Fatalf("update of nothing = %+v, %v", res, err)
		}
		if n := log.count("update") - before; n != 1 {
			t.Errorf("update sent %d times, want 1: nothing was written, so nothing was lost", n)
		}
		// The activation is still there for the next write.
		before = log.count("insert")
		if _, err := coll.InsertOne(e.ctx, csDoc("_id", "x")); err != nil {
			t.Fatalf("insert (retried): %v", err)
		}
		if n := log.count("insert") - before; n != 2 {
			t.Errorf("insert sent %d times, want the attempt whose reply was lost and a retry", n)
		}
	})

	t.Run("findAndModify: the retry answers the first result", func(t *testing.T) {
		coll := e.db.Collection("fam")
		if _, err := coll.InsertOne(e.ctx, csDoc("_id", int32(1), "n", int32(0))); err != nil {
			t.Fatal(err)
		}
		store.FailPoint(t, c, txnWriteFailPoint(csDoc("times", int32(1)), nil))
		var got struct{ N int32 }
		err := coll.FindOneAndUpdate(e.ctx, csDoc("_id", int32(1)), csDoc("$inc", csDoc("n", int32(1))),
			options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&got)
		if err != nil || got.N != 1 {
			t.Fatalf("findAndModify = %+v, %v; want n 1", got, err)
		}
		if n := counters(t, e, coll)[int32(1)]; n != 1 {
			t.Errorf("stored n = %d, want 1", n)
		}
	})

	t.Run("the retry loses its reply too: applied once, the client is not told", func(t *testing.T) {
		// The embedded server stops the command at the statement whose reply is lost; mongod
		// may run more of the batch before the closed connection interrupts it.
		store.SkipIfReal(t)
		coll := e.db.Collection("twice")
		if _, err := coll.InsertMany(e.ctx, []any{csDoc("_id", int32(1), "n", int32(0)), csDoc("_id", int32(2), "n", int32(0)), csDoc("_id", int32(3), "n", int32(0))}); err != nil {
			t.Fatal(err)
		}
		// Statement 0 passes, then every statement that runs loses the reply: the first attempt
		// stops after statement 1, the retry replays 0 and 1 and stops after 2.
		store.FailPoint(t, c, txnWriteFailPoint(csDoc("skip", int32(1)), nil))
		_, err := coll.BulkWrite(e.ctx, incAll(1, 2, 3), options.BulkWrite().SetOrdered(true))
		if !mongo.IsNetworkError(err) {
			t.Fatalf("bulk = %v, want a network error (both attempts lost their reply)", err)
		}
		if got := counters(t, e, coll); got[int32(1)] != 1 || got[int32(2)] != 1 || got[int32(3)] != 1 {
			t.Errorf("counters = %v, want each 1: the write happened although the client saw an error", got)
		}
	})
}

func TestTxnWriteFailPointFailBeforeCommit(t *testing.T) {
	e := newEnv(t)
	e.ctx = oneRetryCtx(t)
	coll := e.db.Collection("c")

	t.Run("times 1: nothing applied, the retry applies", func(t *testing.T) {
		e.store.FailPoint(t, e.c, txnWriteFailPoint(csDoc("times", int32(1)), csDoc("failBeforeCommitExceptionCode", int32(1))))
		if _, err := coll.InsertOne(e.ctx, csDoc("_id", "once")); err != nil {
			t.Fatalf("insert (retried): %v", err)
		}
		if n, _ := coll.CountDocuments(e.ctx, csDoc("_id", "once")); n != 1 {
			t.Errorf("count = %d, want 1", n)
		}
	})

	t.Run("times 2: never committed", func(t *testing.T) {
		e.store.FailPoint(t, e.c, txnWriteFailPoint(csDoc("times", int32(2)), csDoc("failBeforeCommitExceptionCode", int32(1))))
		if _, err := coll.InsertOne(e.ctx, csDoc("_id", "never")); err == nil {
			t.Fatal("insert failing before commit on both attempts succeeded")
		}
		if n, _ := coll.CountDocuments(e.ctx, csDoc("_id", "never")); n != 0 {
			t.Errorf("count = %d, want 0", n)
		}
	})

	t.Run("closeConnection false: a write error, nothing applied", func(t *testing.T) {
		e.store.FailPoint(t, e.c, txnWriteFailPoint(csDoc("times", int32(1)), csDoc("failBeforeCommitExceptionCode", int32(2), "closeConnection", false)))
		_, err := coll.InsertOne(e.ctx, csDoc("_id", "refused"))
		var we mongo.WriteException
		if !errors.As(err, &we) || len(we.WriteErrors) != 1 || we.WriteErrors[0].Code != 2 {
			t.Fatalf("insert = %v, want a write error with code 2", err)
		}
		if n, _ := coll.CountDocuments(e.ctx, csDoc("_id", "refused")); n != 0 {
			t.Errorf("count = %d, want 0", n)
		}
	})
}

// TestTxnWriteFailPointOnlyRetryableWrites: a write without a transaction number (retryable
// writes off, multi-document updates) never enters the fail point.
func TestTxnWriteFailPointOnlyRetryableWrites(t *testing.T) {
	store := embeddedtest.Start(t)
	c := store.Client(t, quickMonitor(), options.Client().SetRetryWrites(false))
	db := store.Database(t, c)
	ctx := ctxFor(t)
	admin := c.Database("admin")
	if err := admin.RunCommand(ctx, txnWriteFailPoint("alwaysOn", csDoc("failBeforeCommitExceptionCode", int32(1)))).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("c").InsertOne(ctx, csDoc("_id", 1)); err != nil {
		t.Errorf("insert without txnNumber: %v", err)
	}
	var off struct{ Count int64 }
	if err := admin.RunCommand(ctx, txnWriteFailPoint("off", nil)).Decode(&off); err != nil {
		t.Fatal(err)
	}
	if off.Count != 0 {
		t.Errorf("fail point entered %d times, want 0", off.Count)
	}
}
