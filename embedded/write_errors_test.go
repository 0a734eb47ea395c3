package embedded_test

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// keyIndexName is the name MongoDB gives the unique (id, type, timestamp) index by default.
const keyIndexName = "id_1_type_1_timestamp_1"

// createKeyIndex creates rollup's unique (id, type, timestamp) index on coll.
func createKeyIndex(t testing.TB, e env, coll *mongo.Collection) {
	t.Helper()
	name, err := coll.Indexes().CreateOne(e.ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "id", Value: 1}, {Key: "type", Value: 1}, {Key: "timestamp", Value: 1}},
		Options: options.Index().SetUnique(true),
	})
	if err != nil {
		t.Fatalf("create unique index: %v", err)
	}
	if name != keyIndexName {
		t.Fatalf("index name = %q, want %q", name, keyIndexName)
	}
}

// key builds an (id, type, timestamp) document.
func key(id, typ string, ts int32) bson.D {
	return bson.D{{Key: "id", Value: id}, {Key: "type", Value: typ}, {Key: "timestamp", Value: ts}}
}

func withFields(d bson.D, extra ...bson.E) bson.D {
	return append(slices.Clone(d), extra...)
}

// writeErrorIndices returns the sorted op indices of the write errors carried by err.
func writeErrorIndices(t testing.TB, err error) ([]int, []mongo.WriteError) {
	t.Helper()
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) {
		var idx []int
		var wes []mongo.WriteError
		for _, we := range bwe.WriteErrors {
			idx = append(idx, we.Index)
			wes = append(wes, we.WriteError)
		}
		sort.Ints(idx)
		return idx, wes
	}
	var we mongo.WriteException
	if errors.As(err, &we) {
		var idx []int
		for _, w := range we.WriteErrors {
			idx = append(idx, w.Index)
		}
		sort.Ints(idx)
		return idx, we.WriteErrors
	}
	t.Fatalf("error %v (%T) carries no write errors", err, err)
	return nil, nil
}

func TestInsertAssignsIDFirst(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("c")
	// The driver always adds _id itself, so send the raw command.
	raw, err := runRaw(e.ctx, e.db, bson.D{
		{Key: "insert", Value: "c"},
		{Key: "documents", Value: bson.A{
			bson.D{{Key: "k", Value: "noid"}, {Key: "x", Value: 1}},
			bson.D{{Key: "k", Value: "late"}, {Key: "_id", Value: "given"}, {Key: "y", Value: 2}},
		}},
	})
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	if n := get(mustD(t, raw), "n"); n != int32(2) {
		t.Fatalf("n = %v, want 2", n)
	}
	var noID bson.D
	if err := coll.FindOne(e.ctx, bson.D{{Key: "k", Value: "noid"}}).Decode(&noID); err != nil {
		t.Fatalf("find: %v", err)
	}
	if len(noID) != 3 || noID[0].Key != "_id" {
		t.Fatalf("stored doc %v: _id is not the first field", noID)
	}
	if _, ok := noID[0].Value.(bson.ObjectID); !ok {
		t.Fatalf("generated _id %v is %T, want ObjectID", noID[0].Value, noID[0].Value)
	}
	var late bson.D
	if err := coll.FindOne(e.ctx, bson.D{{Key: "k", Value: "late"}}).Decode(&late); err != nil {
		t.Fatalf("find: %v", err)
	}
	want := bson.D{{Key: "_id", Value: "given"}, {Key: "k", Value: "late"}, {Key: "y", Value: int32(2)}}
	if fmt.Sprint(late) != fmt.Sprint(want) {
		t.Fatalf("stored doc = %v, want %v", late, want)
	}
}

func TestDuplicateKeyWriteError(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("events")
	createKeyIndex(t, e, coll)
	if _, err := coll.InsertOne(e.ctx, withFields(key("a", "p", 100), bson.E{Key: "v", Value: 1})); err != nil {
		t.Fatalf("insert: %v", err)
	}
	wantMsg := fmt.Sprintf(`E11000 duplicate key error collection: %s.events index: %s dup key: { id: "a", type: "p", timestamp: 100 }`,
		e.db.Name(), keyIndexName)
	wantPattern := bson.D{{Key: "id", Value: int32(1)}, {Key: "type", Value: int32(1)}, {Key: "timestamp", Value: int32(1)}}

	// Raw command: the reply's writeErrors entry, field by field.
	raw, err := runRaw(e.ctx, e.db, bson.D{
		{Key: "insert", Value: "events"},
		{Key: "documents", Value: bson.A{
			withFields(key("b", "p", 100), bson.E{Key: "v", Value: 1}),
			withFields(key("a", "p", 100), bson.E{Key: "v", Value: 2}),
			withFields(key("c", "p", 100), bson.E{Key: "v", Value: 1}),
		}},
		{Key: "ordered", Value: false},
	})
	if !mongo.IsDuplicateKeyError(err) || raw == nil {
		t.Fatalf("insert: %v, want a duplicate key write error with the raw reply", err)
	}
	d := mustD(t, raw)
	if get(d, "ok") != 1.0 || get(d, "n") != int32(2) {
		t.Fatalf("reply = %v, want ok 1 n 2", d)
	}
	wes, _ := get(d, "writeErrors").(bson.A)
	if len(wes) != 1 {
		t.Fatalf("writeErrors = %v, want one", get(d, "writeErrors"))
	}
	we, _ := wes[0].(bson.D)
	if get(we, "index") != int32(1) || get(we, "code") != int32(11000) {
		t.Errorf("write error %v, want index 1 code 11000", we)
	}
	if get(we, "errmsg") != wantMsg {
		t.Errorf("errmsg\n got %q\nwant %q", get(we, "errmsg"), wantMsg)
	}
	if fmt.Sprint(get(we, "keyPattern")) != fmt.Sprint(wantPattern) {
		t.Errorf("keyPattern = %v, want %v", get(we, "keyPattern"), wantPattern)
	}
	if fmt.Sprint(get(we, "keyValue")) != fmt.Sprint(key("a", "p", 100)) {
		t.Errorf("keyValue = %v, want %v", get(we, "keyValue"), key("a", "p", 100))
	}

	// Through the driver: the same error as a WriteException.
	_, err = coll.InsertOne(e.ctx, withFields(key("a", "p", 100), bson.E{Key: "v", Value: 3}))
	if !mongo.IsDuplicateKeyError(err) {
		t.Fatalf("InsertOne duplicate: %v, want a duplicate key error", err)
	}
	_, wErrs := writeErrorIndices(t, err)
	if wErrs[0].Message != wantMsg {
		t.Errorf("driver message %q, want %q", wErrs[0].Message, wantMsg)
	}
	var kv bson.D
	if err := wErrs[0].Raw.Lookup("keyValue").Unmarshal(&kv); err != nil || fmt.Sprint(kv) != fmt.Sprint(key("a", "p", 100)) {
		t.Errorf("driver keyValue = %v (%v)", kv, err)
	}
	if n, err := coll.CountDocuments(e.ctx, bson.D{}); err != nil || n != 3 {
		t.Errorf("count = %d, %v; want 3", n, err)
	}
}

// TestOrderedVersusUnordered inserts a batch with two duplicates: ordered stops at the first,
// unordered reports both and inserts everything else.
func TestOrderedVersusUnordered(t *testing.T) {
	docs := func() []any {
		return []any{
			key("k1", "p", 1), key("k2", "p", 1), key("k1", "p", 1), // 2: dup of 0
			key("k3", "p", 1), key("k2", "p", 1), key("k4", "p", 1), // 4: dup of 1
		}
	}
	tests := []struct {
		ordered   bool
		wantIdx   []int
		wantCount int64
	}{
		{ordered: true, wantIdx: []int{2}, wantCount: 2},
		{ordered: false, wantIdx: []int{2, 4}, wantCount: 4},
	}
	e := newEnv(t)
	for _, tc := range tests {
		t.Run(fmt.Sprintf("InsertMany/ordered=%v", tc.ordered), func(t *testing.T) {
			coll := e.db.Collection(fmt.Sprintf("im_%v", tc.ordered))
			createKeyIndex(t, e, coll)
			_, err := coll.InsertMany(e.ctx, docs(), options.InsertMany().SetOrdered(tc.ordered))
			idx, wes := writeErrorIndices(t, err)
			if !slices.Equal(idx, tc.wantIdx) {
				t.Errorf("failed indices %v, want %v", idx, tc.wantIdx)
			}
			for _, we := range wes {
				if we.Code != 11000 {
					t.Errorf("write error code %d, want 11000", we.Code)
				}
			}
			if n, err := coll.CountDocuments(e.ctx, bson.D{}); err != nil || n != tc.wantCount {
				t.Errorf("count = %d, %v; want %d", n, err, tc.wantCount)
			}
		})
		t.Run(fmt.Sprintf("BulkWrite/ordered=%v", tc.ordered), func(t *testing.T) {
			coll := e.db.Collection(fmt.Sprintf("bw_%v", tc.ordered))
			createKeyIndex(t, e, coll)
			var models []mongo.WriteModel
			for _, d := range docs() {
				models = append(models, mongo.NewInsertOneModel().SetDocument(d))
			}
			res, err := coll.BulkWrite(e.ctx, models, options.BulkWrite().SetOrdered(tc.ordered))
			idx, _ := writeErrorIndices(t, err)
			if !slices.Equal(idx, tc.wantIdx) {
				t.Errorf("failed indices %v, want %v", idx, tc.wantIdx)
			}
			if res == nil || res.InsertedCount != tc.wantCount {
				t.Errorf("result %+v, want InsertedCount %d", res, tc.wantCount)
			}
			if n, err := coll.CountDocuments(e.ctx, bson.D{}); err != nil || n != tc.wantCount {
				t.Errorf("count = %d, %v; want %d", n, err, tc.wantCount)
			}
		})
	}
}

func TestUpdateReplyCounts(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("c")
	if _, err := coll.InsertMany(e.ctx, []any{
		bson.D{{Key: "k", Value: 1}, {Key: "v", Value: 0}},
		bson.D{{Key: "k", Value: 2}, {Key: "v", Value: 5}},
	}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	raw, err := runRaw(e.ctx, e.db, bson.D{
		{Key: "update", Value: "c"},
		{Key: "updates", Value: bson.A{
			bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}}},
			// No-op: same value. Counts in n, not in nModified.
			bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: 2}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 5}}}}}},
			bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: 3}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}}, {Key: "upsert", Value: true}},
			bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: "x"}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}}, {Key: "upsert", Value: true}},
			bson.D{{Key: "q", Value: bson.D{{Key: "k", Value: 99}}}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}}},
		}},
	})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	d := mustD(t, raw)
	if get(d, "n") != int32(4) || get(d, "nModified") != int32(1) {
		t.Errorf("n = %v nModified = %v, want 4 and 1 (reply %v)", get(d, "n"), get(d, "nModified"), d)
	}
	ups, _ := get(d, "upserted").(bson.A)
	if len(ups) != 2 {
		t.Fatalf("upserted = %v, want two entries", get(d, "upserted"))
	}
	u0, u1 := ups[0].(bson.D), ups[1].(bson.D)
	if get(u0, "index") != int32(2) || get(u1, "index") != int32(3) || get(u1, "_id") != "x" {
		t.Errorf("upserted = %v", ups)
	}
	oid, ok := get(u0, "_id").(bson.ObjectID)
	if !ok {
		t.Fatalf("upserted[0]._id = %v, want ObjectID", get(u0, "_id"))
	}
	var got bson.D
	if err := coll.FindOne(e.ctx, bson.D{{Key: "_id", Value: oid}}).Decode(&got); err != nil {
		t.Fatalf("find upserted: %v", err)
	}
	if want := (bson.D{{Key: "_id", Value: oid}, {Key: "k", Value: int32(3)}, {Key: "v", Value: int32(1)}}); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("upserted doc = %v, want %v", got, want)
	}
}

func TestBulkWriteResultCounts(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("c")
	if _, err := coll.InsertMany(e.ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 0}},
		bson.D{{Key: "_id", Value: 2}, {Key: "v", Value: 5}},
		bson.D{{Key: "_id", Value: 3}, {Key: "v", Value: 0}},
	}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	models := []mongo.WriteModel{
		mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 1}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}),
		mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 2}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 5}}}}), // no-op
		mongo.NewInsertOneModel().SetDocument(bson.D{{Key: "_id", Value: 4}}),
		mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "k", Value: "up"}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}).SetUpsert(true),
		mongo.NewDeleteOneModel().SetFilter(bson.D{{Key: "_id", Value: 3}}),
		mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: "r"}}).SetReplacement(bson.D{{Key: "v", Value: 9}}).SetUpsert(true),
		mongo.NewUpdateManyModel().SetFilter(bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{1, 2}}}}}).SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "w", Value: 1}}}}),
	}
	res, err := coll.BulkWrite(e.ctx, models, options.BulkWrite().SetOrdered(false))
	if err != nil {
		t.Fatalf("bulk write: %v", err)
	}
	if res.InsertedCount != 1 || res.MatchedCount != 4 || res.ModifiedCount != 3 || res.DeletedCount != 1 || res.UpsertedCount != 2 {
		t.Errorf("result = %+v, want inserted 1 matched 4 modified 3 deleted 1 upserted 2", res)
	}
	if len(res.UpsertedIDs) != 2 || res.UpsertedIDs[5] != "r" {
		t.Fatalf("UpsertedIDs = %v, want keys 3 and 5 (5 = \"r\")", res.UpsertedIDs)
	}
	if _, ok := res.UpsertedIDs[3].(bson.ObjectID); !ok {
		t.Errorf("UpsertedIDs[3] = %v, want an ObjectID", res.UpsertedIDs[3])
	}
	var r bson.D
	if err := coll.FindOne(e.ctx, bson.D{{Key: "_id", Value: "r"}}).Decode(&r); err != nil {
		t.Fatalf("find replaced upsert: %v", err)
	}
	if want := (bson.D{{Key: "_id", Value: "r"}, {Key: "v", Value: int32(9)}}); fmt.Sprint(r) != fmt.Sprint(want) {
		t.Errorf("replacement upsert = %v, want %v", r, want)
	}
}

// TestUpsertOnUniqueKey is the behaviour rollup relies on: an upsert whose filter is exactly
// the unique key never fails with E11000; one with an extra guard that does not match an
// existing document tries to insert and fails with E11000 at that op's index.
func TestUpsertOnUniqueKey(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("events")
	createKeyIndex(t, e, coll)
	set := func(version, value int) bson.D {
		return bson.D{{Key: "$set", Value: bson.D{{Key: "version", Value: version}, {Key: "value", Value: value}}}}
	}
	for i, v := range []int{1, 2, 2} {
		res, err := coll.UpdateOne(e.ctx, key("a", "p", 100), set(v, v*10), options.UpdateOne().SetUpsert(true))
		if err != nil {
			t.Fatalf("upsert %d: %v", i, err)
		}
		wantUpserted, wantMatched := int64(0), int64(1)
		if i == 0 {
			wantUpserted, wantMatched = 1, 0
		}
		if res.UpsertedCount != wantUpserted || res.MatchedCount != wantMatched {
			t.Errorf("upsert %d: %+v", i, res)
		}
	}

	guard := func(k bson.D, lt int) bson.D {
		return withFields(k, bson.E{Key: "version", Value: bson.D{{Key: "$lt", Value: lt}}})
	}
	models := []mongo.WriteModel{
		// 0: guard passes (version 2 < 3): updates.
		mongo.NewUpdateOneModel().SetFilter(guard(key("a", "p", 100), 3)).SetUpdate(set(3, 30)).SetUpsert(true),
		// 1: new key: upserts.
		mongo.NewUpdateOneModel().SetFilter(guard(key("b", "p", 100), 3)).SetUpdate(set(1, 10)).SetUpsert(true),
		// 2: guard fails (version 3 is not < 2): the upsert's insert collides with the key.
		mongo.NewUpdateOneModel().SetFilter(guard(key("a", "p", 100), 2)).SetUpdate(set(1, 99)).SetUpsert(true),
		// 3: exact key equality: updates.
		mongo.NewUpdateOneModel().SetFilter(key("b", "p", 100)).SetUpdate(set(2, 20)).SetUpsert(true),
	}
	res, err := coll.BulkWrite(e.ctx, models, options.BulkWrite().SetOrdered(false))
	idx, wes := writeErrorIndices(t, err)
	if !slices.Equal(idx, []int{2}) || wes[0].Code != 11000 {
		t.Fatalf("write errors at %v (%v), want one E11000 at index 2", idx, err)
	}
	if res.MatchedCount != 2 || res.UpsertedCount != 1 || res.ModifiedCount != 2 {
		t.Errorf("result = %+v, want matched 2 upserted 1 modified 2", res)
	}
	for _, tc := range []struct {
		k     bson.D
		value int32
	}{{key("a", "p", 100), 30}, {key("b", "p", 100), 20}} {
		var got struct{ Value int32 }
		if err := coll.FindOne(e.ctx, tc.k).Decode(&got); err != nil || got.Value != tc.value {
			t.Errorf("%v: value %d (%v), want %d", tc.k, got.Value, err, tc.value)
		}
	}
	if n, err := coll.CountDocuments(e.ctx, bson.D{}); err != nil || n != 2 {
		t.Errorf("count = %d, %v; want 2", n, err)
	}

	// findAndModify: the same guard failure is a command error E11000.
	err = coll.FindOneAndUpdate(e.ctx, guard(key("a", "p", 100), 2), set(1, 99), options.FindOneAndUpdate().SetUpsert(true)).Err()
	if !mongo.IsDuplicateKeyError(err) || errCode(err) != 11000 {
		t.Errorf("findAndModify guarded upsert: %v, want E11000", err)
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		var kv bson.D
		if lerr := ce.Raw.Lookup("keyValue").Unmarshal(&kv); lerr != nil || fmt.Sprint(kv) != fmt.Sprint(key("a", "p", 100)) {
			t.Errorf("findAndModify keyValue = %v (%v)", kv, lerr)
		}
	}
	var after struct{ Value int32 }
	if err := coll.FindOneAndUpdate(e.ctx, key("c", "p", 100), set(1, 5),
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&after); err != nil || after.Value != 5 {
		t.Errorf("findAndModify exact-key upsert = %+v, %v", after, err)
	}
}

// TestMixedBulkWriteErrorIndices checks that write errors map back to positions in the
// caller's model slice although the driver regroups models by type.
func TestMixedBulkWriteErrorIndices(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("events")
	createKeyIndex(t, e, coll)
	if _, err := coll.InsertMany(e.ctx, []any{
		withFields(key("a", "p", 100), bson.E{Key: "_id", Value: 10}),
		withFields(key("b", "p", 100), bson.E{Key: "_id", Value: 11}),
		withFields(key("c", "p", 1), bson.E{Key: "_id", Value: 2}),
		withFields(key("d", "p", 1), bson.E{Key: "_id", Value: 5}),
	}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	// Every document carries a distinct key, so the only failures are the intended ones.
	models := []mongo.WriteModel{
		/* 0 ok   */ mongo.NewInsertOneModel().SetDocument(withFields(key("i1", "p", 1), bson.E{Key: "_id", Value: 1})),
		/* 1 ok   */ mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 5}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}),
		/* 2 fail */ mongo.NewInsertOneModel().SetDocument(withFields(key("i2", "p", 1), bson.E{Key: "_id", Value: 2})),
		/* 3 ok   */ mongo.NewDeleteOneModel().SetFilter(bson.D{{Key: "_id", Value: 99}}),
		/* 4 fail */ mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: 2}}).SetReplacement(withFields(key("c", "p", 1), bson.E{Key: "_id", Value: 3})),
		/* 5 fail */ mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: 11}}).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "id", Value: "a"}}}}),
		/* 6 ok   */ mongo.NewInsertOneModel().SetDocument(withFields(key("i4", "p", 1), bson.E{Key: "_id", Value: 4})),
		/* 7 ok   */ mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: 5}}).SetReplacement(withFields(key("r5", "p", 1), bson.E{Key: "y", Value: 2})),
		/* 8 fail */ mongo.NewInsertOneModel().SetDocument(withFields(key("i8", "p", 1), bson.E{Key: "_id", Value: bson.A{1}})),
		/* 9 ok   */ mongo.NewDeleteManyModel().SetFilter(bson.D{{Key: "_id", Value: 10}}),
		/* 10 fail */ mongo.NewInsertOneModel().SetDocument(withFields(key("b", "p", 100), bson.E{Key: "_id", Value: 12})),
	}
	res, err := coll.BulkWrite(e.ctx, models, options.BulkWrite().SetOrdered(false))
	idx, _ := writeErrorIndices(t, err)
	if want := []int{2, 4, 5, 8, 10}; !slices.Equal(idx, want) {
		t.Fatalf("failed indices %v, want %v (%v)", idx, want, err)
	}
	var bwe mongo.BulkWriteException
	errors.As(err, &bwe)
	codes := map[int]int{}
	for _, we := range bwe.WriteErrors {
		codes[we.Index] = we.Code
	}
	wantCodes := map[int]int{2: 11000, 4: 66, 5: 11000, 8: 53, 10: 11000}
	for i, c := range wantCodes {
		if codes[i] != c {
			t.Errorf("model %d: code %d, want %d", i, codes[i], c)
		}
	}
	if res.InsertedCount != 2 || res.MatchedCount != 2 || res.ModifiedCount != 2 || res.DeletedCount != 1 {
		t.Errorf("result = %+v, want inserted 2 matched 2 modified 2 deleted 1", res)
	}
	if n, err := coll.CountDocuments(e.ctx, bson.D{}); err != nil || n != 5 {
		t.Errorf("count = %d, %v; want 5 (ids 1 2 4 5 11)", n, err)
	}
}
