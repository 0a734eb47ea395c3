package embedded_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// errMessage returns the server's message carried by err.
func errMessage(err error) string {
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return ce.Message
	}
	var we mongo.WriteException
	if errors.As(err, &we) && len(we.WriteErrors) > 0 {
		return we.WriteErrors[0].Message
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// TestNotImplemented checks that features outside the embedded subset answer code 238
// naming the missing feature, never a silently wrong result. Real MongoDB implements them.
func TestNotImplemented(t *testing.T) {
	e := newEnv(t)
	e.store.SkipIfReal(t)
	coll := e.db.Collection("c")
	if _, err := coll.InsertOne(e.ctx, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: 1}}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	findErr := func(filter bson.D) error {
		cur, err := coll.Find(e.ctx, filter)
		if err == nil {
			_ = cur.Close(e.ctx)
		}
		return err
	}
	tests := []struct {
		name string
		run  func() error
		want string // must appear in the message
	}{
		{name: "unknown command", want: "fooBarCommand", run: func() error {
			return e.db.RunCommand(e.ctx, bson.D{{Key: "fooBarCommand", Value: 1}}).Err()
		}},
		{name: "$where", want: "$where", run: func() error {
			return findErr(bson.D{{Key: "$where", Value: "this.a == 1"}})
		}},
		{name: "$expr operator", want: "$dateToString", run: func() error {
			return findErr(bson.D{{Key: "$expr", Value: bson.D{{Key: "$eq", Value: bson.A{bson.D{{Key: "$dateToString", Value: bson.D{{Key: "date", Value: "$a"}}}}, "x"}}}}})
		}},
		{name: "$expr operator in count", want: "$toUpper", run: func() error {
			_, err := coll.CountDocuments(e.ctx, bson.D{{Key: "$expr", Value: bson.D{{Key: "$toUpper", Value: "$a"}}}})
			return err
		}},
		{name: "$lookup", want: "$lookup", run: func() error {
			_, err := coll.Aggregate(e.ctx, bson.A{bson.D{{Key: "$lookup", Value: bson.D{
				{Key: "from", Value: "d"}, {Key: "localField", Value: "a"}, {Key: "foreignField", Value: "a"}, {Key: "as", Value: "j"},
			}}}})
			return err
		}},
		{name: "$rename", want: "$rename", run: func() error {
			_, err := coll.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$rename", Value: bson.D{{Key: "a", Value: "b"}}}})
			return err
		}},
		{name: "pipeline update operator", want: "$toLower", run: func() error {
			_, err := coll.UpdateOne(e.ctx, bson.D{{Key: "_id", Value: 1}}, mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "b", Value: bson.D{{Key: "$toLower", Value: "$a"}}}}}}})
			return err
		}},
		{name: "pipeline findAndModify operator", want: "$trim", run: func() error {
			return coll.FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 1}}, mongo.Pipeline{{{Key: "$set", Value: bson.D{{Key: "b", Value: bson.D{{Key: "$trim", Value: bson.D{{Key: "input", Value: "$a"}}}}}}}}}).Err()
		}},
		{name: "sparse index", want: "sparse", run: func() error {
			_, err := coll.Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}, Options: options.Index().SetSparse(true)})
			return err
		}},
		{name: "partial index", want: "partialFilterExpression", run: func() error {
			_, err := coll.Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}, Options: options.Index().SetPartialFilterExpression(bson.D{{Key: "a", Value: 1}})})
			return err
		}},
		{name: "unknown find option", want: "returnKey", run: func() error {
			return e.db.RunCommand(e.ctx, bson.D{{Key: "find", Value: "c"}, {Key: "returnKey", Value: true}}).Err()
		}},
		{name: "transactions", want: "transaction", run: func() error {
			sess, err := e.c.StartSession()
			if err != nil {
				return err
			}
			defer sess.EndSession(e.ctx)
			_, err = sess.WithTransaction(e.ctx, func(ctx context.Context) (any, error) {
				return coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 2}})
			})
			return err
		}},
		{name: "non-simple collation", want: "collation", run: func() error {
			return findErrOpts(e, coll, options.Find().SetCollation(&options.Collation{Locale: "en"}))
		}},
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
	// Nothing was changed by the refused writes.
	var got bson.D
	if err := coll.FindOne(e.ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&got); err != nil || len(got) != 2 {
		t.Errorf("document after refused writes = %v, %v", got, err)
	}
}

func findErrOpts(e env, coll *mongo.Collection, opts *options.FindOptionsBuilder) error {
	cur, err := coll.Find(e.ctx, bson.D{}, opts)
	if err == nil {
		_ = cur.Close(e.ctx)
	}
	return err
}
