package embedded_test

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestUpdateDescriptions: the change event of each kind of update is described as mongod
// describes it. An update operator reports what it set whole; a pipeline-style update is
// diffed (mongod's $v:2 delta): a shortened array is a truncatedArrays entry, a changed
// element "path.index…", and a delta not smaller than the document makes a replace event;
// $merge with whenMatched "merge" is the update {$set: result}.
func TestUpdateDescriptions(t *testing.T) {
	e := newEnv(t)
	pad := strings.Repeat("p", 200)
	array := bson.A{"foo", csDoc("a", "bar"), 1, 2, 3}
	short := bson.A{"foo", csDoc("a", "bar")}
	tests := []struct {
		name   string
		doc    bson.D
		update any // an update document or a pipeline; nil: the $merge below
		merge  bson.D
		want   string // the event's operationType and updateDescription, relaxed extended JSON
	}{
		{name: "pipeline update shortening an array (spec: Test array truncation)",
			doc: csDoc("_id", 1, "a", 1, "array", array), update: bson.A{csDoc("$set", csDoc("array", short))},
			want: `update {"updatedFields":{},"removedFields":[],"truncatedArrays":[{"field":"array","newSize":2}],"disambiguatedPaths":{}}`},
		{name: "update operator setting a shorter array reports it whole",
			doc: csDoc("_id", 2, "a", 1, "array", array), update: csDoc("$set", csDoc("array", short)),
			want: `update {"updatedFields":{"array":["foo",{"a":"bar"}]},"removedFields":[],"truncatedArrays":[],"disambiguatedPaths":{}}`},
		{name: "pipeline update changing an element and shortening the array",
			doc:    csDoc("_id", 3, "arr", array, "pad", pad),
			update: bson.A{csDoc("$set", csDoc("arr", bson.A{"foo", csDoc("a", "bar", "b", 3)}))},
			want:   `update {"updatedFields":{"arr.1.b":3},"removedFields":[],"truncatedArrays":[{"field":"arr","newSize":2}],"disambiguatedPaths":{}}`},
		{name: "pipeline update of a small document is a replace",
			doc: csDoc("_id", 4, "a", 1), update: bson.A{csDoc("$set", csDoc("a", 2))},
			want: `replace`},
		{name: "pipeline update creating a field name with a dot",
			doc:    csDoc("_id", 5, "pad", pad),
			update: bson.A{csDoc("$replaceWith", csDoc("$setField", csDoc("field", "a.b", "value", 1, "input", "$$ROOT")))},
			want:   `update {"updatedFields":{"a.b":1},"removedFields":[],"truncatedArrays":[],"disambiguatedPaths":{"a.b":["a.b"]}}`},
		{name: "$merge whenMatched merge sets the result's fields whole",
			doc:   csDoc("_id", 6, "t", csDoc("x", 1, "y", 1), "pad", pad),
			merge: csDoc("_id", 6, "t", csDoc("x", 1, "y", 2)),
			want:  `update {"updatedFields":{"t":{"x":1,"y":2}},"removedFields":[],"truncatedArrays":[],"disambiguatedPaths":{}}`},
	}
	coll := e.db.Collection("descs")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := coll.InsertOne(e.ctx, tc.doc); err != nil {
				t.Fatal(err)
			}
			cs := watch(t, e, coll, nil, options.ChangeStream().SetShowExpandedEvents(true))
			if tc.merge != nil {
				src := e.db.Collection("descs_src")
				if _, err := src.InsertOne(e.ctx, tc.merge); err != nil {
					t.Fatal(err)
				}
				cur, err := src.Aggregate(e.ctx, mongo.Pipeline{
					csDoc("$match", csDoc("_id", tc.merge[0].Value)),
					csDoc("$merge", csDoc("into", "descs", "whenMatched", "merge")),
				})
				if err != nil {
					t.Fatal(err)
				}
				_ = cur.Close(e.ctx)
			} else if _, err := coll.UpdateOne(e.ctx, csDoc("_id", tc.doc[0].Value), tc.update); err != nil {
				t.Fatal(err)
			}
			ev := nextRaw(t, e, cs)
			got, _ := get(ev, "operationType").(string)
			if desc, ok := get(ev, "updateDescription").(bson.D); ok {
				js, err := bson.MarshalExtJSON(desc, false, false)
				if err != nil {
					t.Fatal(err)
				}
				got += " " + string(js)
			}
			if got != tc.want {
				t.Fatalf("event %s\nwant  %s", got, tc.want)
			}
		})
	}
}
