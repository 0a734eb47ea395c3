package embedded_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/embedded/embeddedtest"
)

func failCommand(mode any, data bson.D) bson.D {
	return csDoc("configureFailPoint", "failCommand", "mode", mode, "data", data)
}

// pingErr runs a command that the fail point may fail and returns its error.
func findErr(ctx context.Context, coll *mongo.Collection) error {
	return coll.FindOne(ctx, csDoc("_id", 1)).Err()
}

func TestFailPointModes(t *testing.T) {
	st := embeddedtest.Start(t)
	app := options.Client().SetAppName("fp-modes").SetRetryReads(false)
	c := st.Client(t, app)
	admin := st.Client(t)
	ctx := csCtx(t)
	coll := st.Database(t, c).Collection("fp")
	if _, err := coll.InsertOne(ctx, csDoc("_id", 1)); err != nil {
		t.Fatal(err)
	}
	data := csDoc("failCommands", bson.A{"find"}, "errorCode", int32(2), "appName", "fp-modes")
	tests := []struct {
		name string
		mode any
		want []bool // per find: fails?
	}{
		{"times 2", csDoc("times", int32(2)), []bool{true, true, false, false}},
		{"skip 2", csDoc("skip", int32(2)), []bool{false, false, true, true}},
		{"alwaysOn", "alwaysOn", []bool{true, true, true, true}},
		{"off", "off", []bool{false, false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st.FailPoint(t, admin, failCommand(tt.mode, data))
			for i, wantFail := range tt.want {
				err := findErr(ctx, coll)
				var se mongo.ServerError
				failed := errors.As(err, &se) && se.HasErrorCode(2)
				if failed != wantFail {
					t.Fatalf("find %d: err = %v, want failure %v", i, err, wantFail)
				}
			}
		})
	}
}

func TestFailPointFields(t *testing.T) {
	st := embeddedtest.Start(t)
	admin := st.Client(t)
	ctx := csCtx(t)

	t.Run("failCommands and appName filter", func(t *testing.T) {
		target := st.Client(t, options.Client().SetAppName("fp-target").SetRetryReads(false))
		bystander := st.Client(t, options.Client().SetAppName("fp-other").SetRetryReads(false))
		db := st.Database(t, target)
		st.FailPoint(t, admin, failCommand("alwaysOn", csDoc("failCommands", bson.A{"find"}, "errorCode", int32(2), "appName", "fp-target")))
		if err := findErr(ctx, db.Collection("c")); err == nil {
			t.Fatal("find of the targeted app succeeded")
		}
		if err := findErr(ctx, bystander.Database(db.Name()).Collection("c")); !errors.Is(err, mongo.ErrNoDocuments) {
			t.Fatalf("find of another app: %v, want no documents", err)
		}
		if _, err := db.Collection("c").InsertOne(ctx, csDoc("x", 1)); err != nil {
			t.Fatalf("insert is not in failCommands: %v", err)
		}
	})

	t.Run("errorCode with errorLabels", func(t *testing.T) {
		c := st.Client(t, options.Client().SetAppName("fp-labels").SetRetryReads(false))
		coll := st.Database(t, c).Collection("c")
		st.FailPoint(t, admin, failCommand(csDoc("times", int32(1)), csDoc("failCommands", bson.A{"find"},
			"errorCode", int32(91), "errorLabels", bson.A{"MyLabel"}, "appName", "fp-labels")))
		err := findErr(ctx, coll)
		var se mongo.ServerError
		if !errors.As(err, &se) || !se.HasErrorCode(91) || !se.HasErrorLabel("MyLabel") {
			t.Fatalf("err = %v, want code 91 with label MyLabel", err)
		}
	})

	t.Run("retryable code gets RetryableWriteError and the driver retries", func(t *testing.T) {
		c := st.Client(t, options.Client().SetAppName("fp-retry"))
		coll := st.Database(t, c).Collection("c")
		st.FailPoint(t, admin, failCommand(csDoc("times", int32(1)), csDoc("failCommands", bson.A{"insert"},
			"errorCode", int32(10107), "appName", "fp-retry")))
		if _, err := coll.InsertOne(ctx, csDoc("_id", "once")); err != nil {
			t.Fatalf("retryable insert failed: %v", err)
		}
		n, err := coll.CountDocuments(ctx, csDoc("_id", "once"))
		if err != nil || n != 1 {
			t.Fatalf("count = %d, %v; want 1", n, err)
		}
	})

	t.Run("writeConcernError", func(t *testing.T) {
		c := st.Client(t, options.Client().SetAppName("fp-wce").SetRetryWrites(false))
		coll := st.Database(t, c).Collection("c")
		st.FailPoint(t, admin, failCommand(csDoc("times", int32(1)), csDoc("failCommands", bson.A{"insert"},
			"writeConcernError", csDoc("code", int32(64), "codeName", "WriteConcernFailed", "errmsg", "waiting for replication timed out"),
			"appName", "fp-wce")))
		_, err := coll.InsertOne(ctx, csDoc("_id", "wce"))
		var we mongo.WriteException
		if !errors.As(err, &we) || we.WriteConcernError == nil || we.WriteConcernError.Code != 64 {
			t.Fatalf("err = %v, want a write concern error 64", err)
		}
		// The write itself was applied, as with a real write concern timeout.
		if n, err := coll.CountDocuments(ctx, csDoc("_id", "wce")); err != nil || n != 1 {
			t.Fatalf("count = %d, %v; want 1", n, err)
		}
	})

	t.Run("closeConnection", func(t *testing.T) {
		c := st.Client(t, options.Client().SetAppName("fp-close").SetRetryReads(false))
		coll := st.Database(t, c).Collection("c")
		st.FailPoint(t, admin, failCommand(csDoc("times", int32(1)), csDoc("failCommands", bson.A{"find"},
			"closeConnection", true, "appName", "fp-close")))
		err := findErr(ctx, coll)
		if !mongo.IsNetworkError(err) {
			t.Fatalf("err = %v, want a network error", err)
		}
		if err := findErr(ctx, coll); !errors.Is(err, mongo.ErrNoDocuments) {
			t.Fatalf("after the fail point: %v", err)
		}
	})

	t.Run("blockConnection", func(t *testing.T) {
		c := st.Client(t, options.Client().SetAppName("fp-block").SetRetryReads(false))
		coll := st.Database(t, c).Collection("c")
		st.FailPoint(t, admin, failCommand(csDoc("times", int32(1)), csDoc("failCommands", bson.A{"find"},
			"blockConnection", true, "blockTimeMS", int32(300), "appName", "fp-block")))
		begin := time.Now()
		if err := findErr(ctx, coll); !errors.Is(err, mongo.ErrNoDocuments) {
			t.Fatalf("blocked find: %v", err)
		}
		if took := time.Since(begin); took < 300*time.Millisecond {
			t.Fatalf("blocked find returned after %v, want >= 300ms", took)
		}
		// A client timeout shorter than the block fails the command.
		st.FailPoint(t, admin, failCommand(csDoc("times", int32(1)), csDoc("failCommands", bson.A{"find"},
			"blockConnection", true, "blockTimeMS", int32(2000), "appName", "fp-block")))
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if err := findErr(short, coll); !mongo.IsTimeout(err) {
			t.Fatalf("find under a 100ms timeout: %v, want a timeout", err)
		}
	})
}

func TestFailPointNeedsTestCommands(t *testing.T) {
	st := embeddedtest.Start(t, embeddedtest.Options{Configure: func(cfg *embedded.Config) { cfg.EnableTestCommands = false }})
	st.SkipIfReal(t)
	c := st.Client(t)
	err := c.Database("admin").RunCommand(csCtx(t), failCommand("alwaysOn", csDoc("failCommands", bson.A{"find"}, "errorCode", int32(2)))).Err()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(59) {
		t.Fatalf("configureFailPoint without test commands: %v, want CommandNotFound (59)", err)
	}
}
