package embedded_test

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
)

// docsOf returns every document of coll by _id, with typed values for comparison.
func docsOf(t *testing.T, e env, coll *mongo.Collection) string {
	t.Helper()
	docs, err := allDocs(e, coll)
	if err != nil {
		t.Fatal(err)
	}
	return typed(toA(docs))
}

func seed(t *testing.T, e env, coll *mongo.Collection, docs ...bson.D) {
	t.Helper()
	if err := coll.Drop(e.ctx); err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		return
	}
	ins := make([]any, len(docs))
	for i, d := range docs {
		ins[i] = d
	}
	if _, err := coll.InsertMany(e.ctx, ins); err != nil {
		t.Fatal(err)
	}
}

// doc builds a document from key/value pairs, with Go ints as int32 (as the server stores
// them), so it compares with documents read back.
func doc(kv ...any) bson.D {
	d := csDoc(kv...)
	for i, e := range d {
		if n, ok := e.Value.(int); ok {
			d[i].Value = int32(n)
		}
	}
	return d
}

func TestAggregateOut(t *testing.T) {
	e := newEnv(t)
	src, dst := e.db.Collection("src"), e.db.Collection("dst")
	seed(t, e, src, doc("_id", 1, "x", 11), doc("_id", 2, "x", 22), doc("_id", 3, "x", 33))
	seed(t, e, dst, doc("_id", 9, "k", "old"))
	if _, err := dst.Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: doc("k", 1), Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	run := func(pipeline mongo.Pipeline) error {
		cur, err := src.Aggregate(e.ctx, pipeline)
		if err != nil {
			return err
		}
		defer func() { _ = cur.Close(e.ctx) }()
		if cur.Next(e.ctx) {
			t.Errorf("$out returned a document: %v", cur.Current)
		}
		return cur.Err()
	}
	// The results replace the target's documents; the target's indexes stay.
	if err := run(mongo.Pipeline{{{Key: "$match", Value: doc("_id", doc("$gt", 1))}}, {{Key: "$set", Value: doc("k", "$x")}}, {{Key: "$out", Value: "dst"}}}); err != nil {
		t.Fatal(err)
	}
	if got, want := docsOf(t, e, dst), typed(bson.A{doc("_id", 2, "x", 22, "k", 22), doc("_id", 3, "x", 33, "k", 33)}); got != want {
		t.Fatalf("after $out: %s, want %s", got, want)
	}
	// Results that violate a unique index of the target leave it unchanged.
	before := docsOf(t, e, dst)
	err := run(mongo.Pipeline{{{Key: "$set", Value: doc("k", 1)}}, {{Key: "$out", Value: "dst"}}})
	if errCode(err) != 11000 {
		t.Fatalf("$out with duplicate keys: %v, want E11000", err)
	}
	if after := docsOf(t, e, dst); after != before {
		t.Fatalf("failed $out changed the target: %s", after)
	}
	// Results without _id get one; {db, coll} writes to another database.
	other := e.c.Database(e.db.Name() + "_o").Collection("out")
	t.Cleanup(func() { _ = other.Database().Drop(e.ctx) })
	if err := run(mongo.Pipeline{{{Key: "$project", Value: doc("_id", 0, "x", 1)}}, {{Key: "$out", Value: doc("db", other.Database().Name(), "coll", "out")}}}); err != nil {
		t.Fatal(err)
	}
	if n, err := other.CountDocuments(e.ctx, doc("_id", doc("$type", "objectId"))); err != nil || n != 3 {
		t.Fatalf("generated _ids: %d, %v", n, err)
	}
	// $out is refused under a linearizable read concern.
	lin := e.db.Collection("src", options.Collection().SetReadConcern(readconcern.Linearizable()))
	if _, err := lin.Aggregate(e.ctx, mongo.Pipeline{{{Key: "$out", Value: "dst2"}}}); errCode(err) != 72 {
		t.Fatalf("$out with linearizable: %v, want InvalidOptions", err)
	}
}

func TestAggregateMerge(t *testing.T) {
	e := newEnv(t)
	src, dst := e.db.Collection("src"), e.db.Collection("dst")
	seed(t, e, src, doc("_id", 1, "a", 1), doc("_id", 2, "a", 2))
	merge := func(spec bson.D) error {
		cur, err := src.Aggregate(e.ctx, mongo.Pipeline{{{Key: "$merge", Value: spec}}})
		if err == nil {
			err = cur.Close(e.ctx)
		}
		return err
	}
	tests := []struct {
		name   string
		target []bson.D
		spec   bson.D
		code   int32
		want   bson.A
	}{
		{"defaults merge and insert", []bson.D{doc("_id", 1, "b", 5)}, doc("into", "dst"), 0,
			bson.A{doc("_id", 1, "b", 5, "a", 1), doc("_id", 2, "a", 2)}},
		{"replace", []bson.D{doc("_id", 1, "b", 5)}, doc("into", "dst", "whenMatched", "replace"), 0,
			bson.A{doc("_id", 1, "a", 1), doc("_id", 2, "a", 2)}},
		{"keepExisting and discard", []bson.D{doc("_id", 1, "b", 5)}, doc("into", "dst", "whenMatched", "keepExisting", "whenNotMatched", "discard"), 0,
			bson.A{doc("_id", 1, "b", 5)}},
		{"whenMatched fail", []bson.D{doc("_id", 2, "b", 5)}, doc("into", "dst", "whenMatched", "fail"), 11000, nil},
		{"whenNotMatched fail", []bson.D{doc("_id", 1)}, doc("into", "dst", "whenNotMatched", "fail"), 13113, nil},
		{"on without a unique index", nil, doc("into", "dst", "on", "a"), 51183, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seed(t, e, dst, tc.target...)
			err := merge(tc.spec)
			if tc.code != 0 {
				if errCode(err) != tc.code {
					t.Fatalf("$merge %v: %v, want code %d", tc.spec, err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := docsOf(t, e, dst); got != typed(tc.want) {
				t.Fatalf("after $merge: %s, want %s", got, typed(tc.want))
			}
		})
	}
	// on fields with a unique index: results match by a, not by _id.
	seed(t, e, dst, doc("_id", "x", "a", 1, "n", "old"))
	if _, err := dst.Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: doc("a", 1), Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	cur, err := src.Aggregate(e.ctx, mongo.Pipeline{{{Key: "$project", Value: doc("_id", 0, "a", 1, "n", "new")}}, {{Key: "$merge", Value: doc("into", "dst", "on", "a")}}})
	if err != nil {
		t.Fatal(err)
	}
	_ = cur.Close(e.ctx)
	var got []bson.D
	c2, err := dst.Find(e.ctx, bson.D{}, options.Find().SetSort(doc("a", 1)).SetProjection(doc("_id", 0)))
	if err != nil || c2.All(e.ctx, &got) != nil {
		t.Fatal(err)
	}
	if typed(toA(got)) != typed(bson.A{doc("a", 1, "n", "new"), doc("a", 2, "n", "new")}) {
		t.Fatalf("merge on a: %v", got)
	}
}

func TestDatabaseAggregateDocuments(t *testing.T) {
	e := newEnv(t)
	cur, err := e.db.Aggregate(e.ctx, mongo.Pipeline{
		{{Key: "$documents", Value: bson.A{doc("x", 1), doc("x", 2), doc("x", 3)}}},
		{{Key: "$match", Value: doc("x", doc("$gte", 2))}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []bson.D
	if err := cur.All(e.ctx, &got); err != nil {
		t.Fatal(err)
	}
	if typed(toA(got)) != typed(bson.A{doc("x", 2), doc("x", 3)}) {
		t.Fatalf("$documents = %v", got)
	}
	// $merge from $documents: a duplicate key error carries keyPattern and keyValue.
	coll := e.db.Collection("test")
	seed(t, e, coll, doc("_id", 2))
	_, err = e.db.Aggregate(e.ctx, mongo.Pipeline{
		{{Key: "$documents", Value: bson.A{doc("_id", 2, "x", 1)}}},
		{{Key: "$merge", Value: doc("into", "test", "whenMatched", "fail")}},
	})
	var ce mongo.CommandError
	if errCode(err) != 11000 || !errors.As(err, &ce) || ce.Raw.Lookup("keyValue", "_id").Int32() != 2 {
		t.Fatalf("$merge duplicate: %v", err)
	}
	// A database-level aggregate needs $documents (or $changeStream).
	if _, err := e.db.Aggregate(e.ctx, mongo.Pipeline{{{Key: "$match", Value: bson.D{}}}}); errCode(err) != 73 {
		t.Fatalf("db aggregate without $documents: %v, want InvalidNamespace", err)
	}
}
