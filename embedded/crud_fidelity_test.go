package embedded_test

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
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
