package embedded_test

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestNotImplementedCatalogAndStreams: the catalog, change-stream and fail-point features
// outside the embedded subset answer NotImplemented (238) naming them.
func TestNotImplementedCatalogAndStreams(t *testing.T) {
	e := newEnv(t)
	e.store.SkipIfReal(t)
	coll := e.db.Collection("c")
	if _, err := coll.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	admin := e.c.Database("admin")
	watchErr := func(pipeline mongo.Pipeline, opts ...options.Lister[options.ChangeStreamOptions]) error {
		cs, err := coll.Watch(e.ctx, pipeline, opts...)
		if err == nil {
			_ = cs.Close(e.ctx)
		}
		return err
	}
	tests := []struct {
		name string
		run  func() error
		want string
	}{
		{"views", func() error {
			return e.db.CreateView(e.ctx, "v", "c", mongo.Pipeline{})
		}, "views"},
		{"capped collections", func() error {
			return e.db.CreateCollection(e.ctx, "capped", options.CreateCollection().SetCapped(true).SetSizeInBytes(4096))
		}, "capped"},
		{"collMod validator", func() error {
			return e.db.RunCommand(e.ctx, bson.D{{Key: "collMod", Value: "c"}, {Key: "validator", Value: bson.D{}}}).Err()
		}, "validator"},
		{"showRawUpdateDescription", func() error {
			return watchErr(mongo.Pipeline{}, options.ChangeStream().SetCustomPipeline(bson.M{"showRawUpdateDescription": true}))
		}, "showRawUpdateDescription"},
		{"$changeStreamSplitLargeEvent", func() error {
			return watchErr(mongo.Pipeline{{{Key: "$changeStreamSplitLargeEvent", Value: bson.D{}}}})
		}, "$changeStreamSplitLargeEvent"},
		{"other fail points", func() error {
			return admin.RunCommand(e.ctx, bson.D{{Key: "configureFailPoint", Value: "hangBeforeWrite"}, {Key: "mode", Value: "alwaysOn"}}).Err()
		}, "hangBeforeWrite"},
		{"fail point activationProbability", func() error {
			return admin.RunCommand(e.ctx, bson.D{{Key: "configureFailPoint", Value: "failGetMoreAfterCursorCheckout"},
				{Key: "mode", Value: bson.D{{Key: "activationProbability", Value: 0.5}}}}).Err()
		}, "activationProbability"},
		{"onPrimaryTransactionalWrite data", func() error {
			return admin.RunCommand(e.ctx, bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"},
				{Key: "mode", Value: "alwaysOn"}, {Key: "data", Value: bson.D{{Key: "blockTimeMS", Value: 10}}}}).Err()
		}, "blockTimeMS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if errCode(err) != 238 {
				t.Fatalf("err = %v (code %d), want NotImplemented 238", err, errCode(err))
			}
			if msg := errMessage(err); !strings.Contains(msg, tc.want) {
				t.Errorf("message %q does not name %q", msg, tc.want)
			}
		})
	}
}
