package bulk

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/store"
)

// TestClassify classifies real driver errors: produced by the driver against the embedded
// server (write errors, fail points, network failures, timeouts, server selection) and driver
// error values built directly.
func TestClassify(t *testing.T) {
	e := newEnv(t)
	// No driver retry, so the fail point's error is what BulkWrite returns.
	noRetry := e.store.Client(t, options.Client().SetRetryWrites(false))
	coll := noRetry.Database(e.check.Database().Name()).Collection(e.check.Name())
	bg := context.Background()
	e.seed(t, item("x", 1, 1))
	upsert := func(id string, version int64) mongo.WriteModel {
		m, _ := model(nil, item(id, 1, version), time.Now())
		return m
	}
	bulk := func(c *mongo.Collection, models ...mongo.WriteModel) error {
		_, err := c.BulkWrite(bg, models, options.BulkWrite().SetOrdered(false))
		return err
	}
	failNext := func(t *testing.T, cmd string, data bson.D) {
		e.store.FailPoint(t, e.direct, bson.D{
			{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: append(bson.D{{Key: "failCommands", Value: bson.A{cmd}}}, data...)},
		})
	}
	wce := bson.D{{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}, {Key: "errmsg", Value: "waiting for replication timed out"}}}}

	cases := []struct {
		name string
		err  func(t *testing.T) error
		want store.Class
	}{
		{"nil", func(*testing.T) error { return nil }, store.ClassNone},
		{"bulk: guarded upsert over a newer version (E11000)", func(*testing.T) error {
			return bulk(coll, upsert("x", 0), upsert("y", 5))
		}, store.ClassDuplicateKey},
		{"bulk: E11000 and a type mismatch", func(*testing.T) error {
			bad := mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "id", Value: "x"}}).
				SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "project", Value: 1}}}})
			return bulk(coll, upsert("x", 0), bad)
		}, store.ClassPermanent},
		{"insert: duplicate key WriteException", func(*testing.T) error {
			_, err := coll.InsertOne(bg, bson.D{{Key: "id", Value: "x"}, {Key: "type", Value: "server"}, {Key: "timestamp", Value: tick0}})
			return err
		}, store.ClassDuplicateKey},
		{"bulk: writeConcernError", func(t *testing.T) error {
			failNext(t, "update", wce)
			return bulk(coll, upsert("z", 1))
		}, store.ClassWriteConcern},
		{"insert: writeConcernError WriteException", func(t *testing.T) error {
			failNext(t, "insert", wce)
			_, err := coll.InsertOne(bg, bson.D{{Key: "id", Value: "w"}})
			return err
		}, store.ClassWriteConcern},
		{"command error NotWritablePrimary", func(t *testing.T) error {
			failNext(t, "update", bson.D{{Key: "errorCode", Value: 10107}})
			return bulk(coll, upsert("z", 2))
		}, store.ClassUnknownOutcome},
		{"command error InterruptedDueToReplStateChange", func(t *testing.T) error {
			failNext(t, "update", bson.D{{Key: "errorCode", Value: 11602}})
			return bulk(coll, upsert("z", 2))
		}, store.ClassUnknownOutcome},
		{"command error with RetryableWriteError label after the driver's retry", func(t *testing.T) error {
			e.store.FailPoint(t, e.direct, bson.D{
				{Key: "configureFailPoint", Value: "failCommand"},
				{Key: "mode", Value: bson.D{{Key: "times", Value: 2}}},
				{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"update"}}, {Key: "errorCode", Value: 189}}},
			})
			return bulk(e.coll, upsert("z", 2))
		}, store.ClassUnknownOutcome},
		{"command error Unauthorized", func(t *testing.T) error {
			failNext(t, "update", bson.D{{Key: "errorCode", Value: 13}})
			return bulk(coll, upsert("z", 2))
		}, store.ClassPermanent},
		{"command error BadValue", func(t *testing.T) error {
			failNext(t, "update", bson.D{{Key: "errorCode", Value: 2}})
			return bulk(coll, upsert("z", 2))
		}, store.ClassPermanent},
		{"network error (connection closed)", func(t *testing.T) error {
			failNext(t, "update", bson.D{{Key: "closeConnection", Value: true}})
			return bulk(coll, upsert("z", 3))
		}, store.ClassUnknownOutcome},
		{"network error (reply lost in the proxy)", func(t *testing.T) error {
			// The server applies the update; the driver's retry loses its reply too.
			e.proxy.ResetNextReply("update")
			e.proxy.ResetNextReply("update")
			return bulk(e.coll, upsert("z", 4))
		}, store.ClassUnknownOutcome},
		{"client timeout while the server blocks", func(t *testing.T) error {
			failNext(t, "update", bson.D{{Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 500}})
			ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
			defer cancel()
			_, err := coll.BulkWrite(ctx, []mongo.WriteModel{upsert("z", 5)}, options.BulkWrite().SetOrdered(false))
			return err
		}, store.ClassUnknownOutcome},
		{"caller's context canceled", func(*testing.T) error {
			ctx, cancel := context.WithCancel(bg)
			cancel()
			_, err := coll.BulkWrite(ctx, []mongo.WriteModel{upsert("z", 6)})
			return err
		}, store.ClassContext},
		{"server selection timeout", func(t *testing.T) error {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			_ = ln.Close()
			c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?directConnection=true").
				SetServerSelectionTimeout(100 * time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Disconnect(bg) }()
			return bulk(c.Database("d").Collection("c"), upsert("z", 7))
		}, store.ClassUnknownOutcome},
		{"disconnected client", func(t *testing.T) error {
			c, err := mongo.Connect(options.Client().ApplyURI(e.store.URI))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Disconnect(bg); err != nil {
				t.Fatal(err)
			}
			return bulk(c.Database("d").Collection("c"), upsert("z", 8))
		}, store.ClassUnknownOutcome},
		{"unmarshalable model", func(*testing.T) error {
			return bulk(coll, mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "id", Value: make(chan int)}}).
				SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "a", Value: 1}}}}))
		}, store.ClassPermanent},
		{"wrapped E11000 write error", func(*testing.T) error {
			return fmt.Errorf("write: %w", mongo.WriteError{Code: 11000, Message: "E11000 duplicate key error"})
		}, store.ClassDuplicateKey},
		{"document validation write error", func(*testing.T) error {
			return mongo.WriteError{Code: 121, Message: "Document failed validation"}
		}, store.ClassPermanent},
		{"bulk exception without details", func(*testing.T) error {
			return mongo.BulkWriteException{Labels: []string{"RetryableWriteError"}}
		}, store.ClassUnknownOutcome},
		{"wrapped context canceled", func(*testing.T) error {
			return fmt.Errorf("flush: %w", context.Canceled)
		}, store.ClassContext},
		{"unknown error", func(*testing.T) error { return errors.New("something") }, store.ClassUnknownOutcome},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err(t)
			if tc.want != store.ClassNone && err == nil {
				t.Fatal("the scenario produced no error")
			}
			if got := classify(err); got != tc.want {
				t.Fatalf("classify(%T %v) = %v, want %v", err, err, got, tc.want)
			}
		})
	}
}

func TestClassifyWriteError(t *testing.T) {
	cases := []struct {
		we   mongo.WriteError
		want store.Class
	}{
		{mongo.WriteError{Code: 11000}, store.ClassDuplicateKey},
		{mongo.WriteError{Code: 11001}, store.ClassDuplicateKey},
		{mongo.WriteError{Code: 16460, Message: "x E11000 y"}, store.ClassDuplicateKey},
		{mongo.WriteError{Code: 16460, Message: "other"}, store.ClassPermanent},
		{mongo.WriteError{Code: 14}, store.ClassPermanent},
		{mongo.WriteError{Code: 10107}, store.ClassPermanent},
	}
	for _, tc := range cases {
		if got := store.ClassifyWriteError(tc.we); got != tc.want {
			t.Errorf("ClassifyWriteError(%d %q) = %v, want %v", tc.we.Code, tc.we.Message, got, tc.want)
		}
	}
	for c := store.ClassNone; c <= store.ClassContext+1; c++ {
		if c.String() == "" {
			t.Errorf("class %d has no name", c)
		}
	}
}
