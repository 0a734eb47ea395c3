package embedded_test

import (
	"fmt"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// indexSummary renders listIndexes output as "name key unique" strings.
func indexSummary(t testing.TB, e env, coll *mongo.Collection) []string {
	t.Helper()
	specs, err := coll.Indexes().ListSpecifications(e.ctx)
	if err != nil {
		t.Fatalf("list indexes: %v", err)
	}
	var out []string
	for _, s := range specs {
		var key bson.D
		if err := bson.Unmarshal(s.KeysDocument, &key); err != nil {
			t.Fatalf("index key: %v", err)
		}
		u := s.Unique != nil && *s.Unique
		out = append(out, fmt.Sprintf("%s %s unique=%v", s.Name, typed(key), u))
	}
	slices.Sort(out)
	return out
}

func TestIndexes(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("c")
	names, err := coll.Indexes().CreateMany(e.ctx, []mongo.IndexModel{
		{Keys: bson.D{{Key: "id", Value: 1}, {Key: "type", Value: 1}, {Key: "timestamp", Value: 1}}, Options: options.Index().SetUnique(true)},
		{Keys: bson.D{{Key: "ts", Value: -1}}, Options: options.Index().SetName("by_ts")},
	})
	if err != nil {
		t.Fatalf("createIndexes: %v", err)
	}
	if !slices.Equal(names, []string{keyIndexName, "by_ts"}) {
		t.Errorf("names = %v", names)
	}
	want := []string{
		`_id_ {_id:int32(1)} unique=false`,
		`by_ts {ts:int32(-1)} unique=false`,
		keyIndexName + ` {id:int32(1), type:int32(1), timestamp:int32(1)} unique=true`,
	}
	if got := indexSummary(t, e, coll); !slices.Equal(got, want) {
		t.Errorf("listIndexes\n got %v\nwant %v", got, want)
	}

	// Creating the same index again is a no-op.
	raw, err := runRaw(e.ctx, e.db, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{
		bson.D{{Key: "key", Value: bson.D{{Key: "ts", Value: -1}}}, {Key: "name", Value: "by_ts"}},
	}}})
	if err != nil {
		t.Fatalf("createIndexes again: %v", err)
	}
	d := mustD(t, raw)
	if get(d, "numIndexesBefore") != int32(3) || get(d, "numIndexesAfter") != int32(3) {
		t.Errorf("repeated createIndexes reply = %v", d)
	}

	errTests := []struct {
		name  string
		model mongo.IndexModel
		code  int32
	}{
		{name: "same name other key", model: mongo.IndexModel{Keys: bson.D{{Key: "other", Value: 1}}, Options: options.Index().SetName("by_ts")}, code: 86},
		{name: "same key other name", model: mongo.IndexModel{Keys: bson.D{{Key: "ts", Value: -1}}, Options: options.Index().SetName("ts_again")}, code: 85},
	}
	for _, tc := range errTests {
		if _, err := coll.Indexes().CreateOne(e.ctx, tc.model); errCode(err) != tc.code {
			t.Errorf("%s: %v, want code %d", tc.name, err, tc.code)
		}
	}

	// A unique index cannot be built over existing duplicates.
	dups := e.db.Collection("dups")
	if _, err := dups.InsertMany(e.ctx, []any{key("a", "p", 1), key("a", "p", 1)}); err != nil {
		t.Fatalf("seed dups: %v", err)
	}
	_, err = dups.Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "id", Value: 1}, {Key: "type", Value: 1}, {Key: "timestamp", Value: 1}}, Options: options.Index().SetUnique(true)})
	if errCode(err) != 11000 {
		t.Errorf("unique index over duplicates: %v, want code 11000", err)
	}

	// The unique index is enforced on insert and on update.
	if _, err := coll.InsertOne(e.ctx, key("a", "p", 1)); err != nil {
		t.Fatalf("insert: %v", err)
	}
	if _, err := coll.InsertOne(e.ctx, withFields(key("a", "p", 1), bson.E{Key: "x", Value: 1})); !mongo.IsDuplicateKeyError(err) {
		t.Errorf("duplicate insert: %v", err)
	}
	if _, err := coll.InsertOne(e.ctx, key("a", "p", 2)); err != nil {
		t.Fatalf("insert: %v", err)
	}
	if _, err := coll.UpdateOne(e.ctx, key("a", "p", 2), bson.D{{Key: "$set", Value: bson.D{{Key: "timestamp", Value: 1}}}}); !mongo.IsDuplicateKeyError(err) {
		t.Errorf("update into a duplicate: %v", err)
	}

	// dropIndexes by name, by key, errors, and "*".
	if err := coll.Indexes().DropOne(e.ctx, "by_ts"); err != nil {
		t.Fatalf("drop by_ts: %v", err)
	}
	if err := coll.Indexes().DropOne(e.ctx, "by_ts"); errCode(err) != 27 {
		t.Errorf("drop missing index: %v, want IndexNotFound 27", err)
	}
	if err := coll.Indexes().DropOne(e.ctx, "_id_"); errCode(err) != 72 {
		t.Errorf("drop _id_: %v, want InvalidOptions 72", err)
	}
	if got := indexSummary(t, e, coll); len(got) != 2 {
		t.Errorf("after dropping by_ts: %v", got)
	}
	if _, err := coll.Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}}}); err != nil {
		t.Fatalf("create k_1: %v", err)
	}
	if err := coll.Indexes().DropWithKey(e.ctx, bson.D{{Key: "k", Value: 1}}); err != nil {
		t.Errorf("drop by key: %v", err)
	}
	if err := coll.Indexes().DropAll(e.ctx); err != nil {
		t.Fatalf("drop all: %v", err)
	}
	if got := indexSummary(t, e, coll); !slices.Equal(got, []string{`_id_ {_id:int32(1)} unique=false`}) {
		t.Errorf("after dropIndexes *: %v", got)
	}
	// With the unique index gone, the duplicate is accepted.
	if _, err := coll.InsertOne(e.ctx, key("a", "p", 1)); err != nil {
		t.Errorf("insert after dropping the unique index: %v", err)
	}
	if _, err := runRaw(e.ctx, e.db, bson.D{{Key: "listIndexes", Value: "missing"}}); errCode(err) != 26 {
		t.Errorf("listIndexes on a missing collection: %v, want NamespaceNotFound 26", err)
	}
}

func TestCatalog(t *testing.T) {
	e := newEnv(t)
	if err := e.db.CreateCollection(e.ctx, "a"); err != nil {
		t.Fatalf("create: %v", err)
	}
	// MongoDB 7.0: creating an existing collection with identical options succeeds.
	if err := e.db.CreateCollection(e.ctx, "a"); err != nil {
		t.Errorf("second identical create: %v, want success (MongoDB 7.0)", err)
	}
	// Different options on an existing collection: NamespaceExists on MongoDB; the embedded
	// server implements no collection options at all.
	err := e.db.CreateCollection(e.ctx, "a", options.CreateCollection().SetCapped(true).SetSizeInBytes(4096))
	if want := map[bool]int32{true: 48, false: 238}[e.store.Real()]; errCode(err) != want {
		t.Errorf("create with other options: %v, want code %d", err, want)
	}
	if _, err := e.db.Collection("b").InsertOne(e.ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatalf("implicit create: %v", err)
	}

	names, err := e.db.ListCollectionNames(e.ctx, bson.D{})
	slices.Sort(names)
	if err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("collections = %v, %v", names, err)
	}
	specs, err := e.db.ListCollectionSpecifications(e.ctx, bson.D{{Key: "name", Value: "b"}})
	if err != nil || len(specs) != 1 || specs[0].Name != "b" || specs[0].Type != "collection" || specs[0].UUID == nil {
		t.Errorf("listCollections {name: b} = %+v, %v", specs, err)
	}

	// Catalog cursors continue with getMore on "<db>.$cmd.listCollections" and the collection.
	for _, name := range []string{"c1", "c2", "c3"} {
		if err := e.db.CreateCollection(e.ctx, name); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	cur, err := e.db.ListCollections(e.ctx, bson.D{}, options.ListCollections().SetBatchSize(1).SetNameOnly(true))
	if err != nil {
		t.Fatalf("listCollections: %v", err)
	}
	var colls []struct{ Name string }
	if err := cur.All(e.ctx, &colls); err != nil || len(colls) != 5 {
		t.Errorf("listCollections in batches of 1 = %v, %v; want 5", colls, err)
	}
	for _, name := range []string{"c1", "c2", "c3"} {
		if err := e.db.Collection(name).Drop(e.ctx); err != nil {
			t.Fatalf("drop %s: %v", name, err)
		}
	}
	cur, err = e.db.Collection("b").Indexes().List(e.ctx, options.ListIndexes().SetBatchSize(1))
	if err != nil {
		t.Fatalf("listIndexes: %v", err)
	}
	if err := cur.All(e.ctx, &colls); err != nil || len(colls) != 1 {
		t.Errorf("listIndexes in batches of 1 = %v, %v", colls, err)
	}

	dbs, err := e.c.ListDatabaseNames(e.ctx, bson.D{{Key: "name", Value: e.db.Name()}})
	if err != nil || !slices.Equal(dbs, []string{e.db.Name()}) {
		t.Errorf("listDatabases filtered = %v, %v", dbs, err)
	}
	res, err := e.c.ListDatabases(e.ctx, bson.D{})
	if err != nil {
		t.Fatalf("listDatabases: %v", err)
	}
	found := false
	for _, d := range res.Databases {
		if d.Name == e.db.Name() {
			found = true
		}
	}
	if !found {
		t.Errorf("listDatabases lacks %s: %+v", e.db.Name(), res.Databases)
	}

	if err := e.db.Collection("a").Drop(e.ctx); err != nil {
		t.Fatalf("drop: %v", err)
	}
	// MongoDB 7.0 drops a missing collection without error.
	if err := e.db.Collection("never").Drop(e.ctx); err != nil {
		t.Errorf("drop missing collection: %v", err)
	}
	if names, err := e.db.ListCollectionNames(e.ctx, bson.D{}); err != nil || !slices.Equal(names, []string{"b"}) {
		t.Errorf("collections after drop = %v, %v", names, err)
	}
	if err := e.db.Drop(e.ctx); err != nil {
		t.Fatalf("dropDatabase: %v", err)
	}
	if dbs, err := e.c.ListDatabaseNames(e.ctx, bson.D{{Key: "name", Value: e.db.Name()}}); err != nil || len(dbs) != 0 {
		t.Errorf("listDatabases after dropDatabase = %v, %v", dbs, err)
	}
	if n, err := e.db.Collection("b").CountDocuments(e.ctx, bson.D{}); err != nil || n != 0 {
		t.Errorf("count after dropDatabase = %d, %v", n, err)
	}
}
