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

	"github.com/gameops/rollup/embedded/embeddedtest"
)

const cursorDocs = 250

type cursorDoc struct {
	ID  int32 `bson:"_id"`
	G   int32 `bson:"g"`
	V   int32 `bson:"v"`
	Arr bson.A
}

// seedCursorDocs inserts cursorDocs documents {_id: i, g: i%3, v: (i*37)%cursorDocs, arr: [i%5, "s"]}.
func seedCursorDocs(t testing.TB, e env, coll *mongo.Collection) []cursorDoc {
	t.Helper()
	var docs []cursorDoc
	var ins []any
	for i := range int32(cursorDocs) {
		d := cursorDoc{ID: i, G: i % 3, V: (i * 37) % cursorDocs, Arr: bson.A{i % 5, "s"}}
		docs = append(docs, d)
		ins = append(ins, bson.D{{Key: "_id", Value: d.ID}, {Key: "g", Value: d.G}, {Key: "v", Value: d.V}, {Key: "arr", Value: d.Arr}})
	}
	if _, err := coll.InsertMany(e.ctx, ins); err != nil {
		t.Fatalf("seed: %v", err)
	}
	return docs
}

func TestFindAcrossBatches(t *testing.T) {
	store := embeddedtest.Start(t)
	var log commandLog
	c := store.Client(t, quickMonitor(), options.Client().SetMonitor(log.monitor()))
	e := env{store: store, c: c, db: store.Database(t, c), ctx: ctxFor(t)}
	coll := e.db.Collection("c")
	all := seedCursorDocs(t, e, coll)

	type want func([]cursorDoc) []cursorDoc
	filterG := func(g int32) want {
		return func(ds []cursorDoc) (out []cursorDoc) {
			for _, d := range ds {
				if d.G == g {
					out = append(out, d)
				}
			}
			return out
		}
	}
	byVDesc := func(ds []cursorDoc) []cursorDoc {
		out := slices.Clone(ds)
		sort.Slice(out, func(i, j int) bool { return out[i].V > out[j].V })
		return out
	}
	window := func(ds []cursorDoc, skip, limit int) []cursorDoc {
		if skip > len(ds) {
			return nil
		}
		ds = ds[skip:]
		if limit > 0 && limit < len(ds) {
			ds = ds[:limit]
		}
		return ds
	}
	tests := []struct {
		name        string
		filter      bson.D
		opts        *options.FindOptionsBuilder
		want        []cursorDoc
		sorted      bool // the result order is defined (a sort is given)
		minGetMores int
	}{
		{name: "all default batches", filter: bson.D{}, opts: options.Find(), want: all, minGetMores: 1},
		{name: "filter sort skip limit small batches", filter: bson.D{{Key: "g", Value: 1}},
			opts: options.Find().SetSort(bson.D{{Key: "v", Value: -1}}).SetSkip(5).SetLimit(60).SetBatchSize(7),
			want: window(byVDesc(filterG(1)(all)), 5, 60), sorted: true, minGetMores: 8},
		{name: "skip past end", filter: bson.D{}, opts: options.Find().SetSkip(cursorDocs + 1), want: nil},
		{name: "batchSize 1", filter: bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: 5}}}},
			opts: options.Find().SetBatchSize(1).SetSort(bson.D{{Key: "_id", Value: 1}}), want: all[:5], sorted: true, minGetMores: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := log.count("getMore")
			cur, err := coll.Find(e.ctx, tc.filter, tc.opts)
			if err != nil {
				t.Fatalf("find: %v", err)
			}
			var got []cursorDoc
			if err := cur.All(e.ctx, &got); err != nil {
				t.Fatalf("all: %v", err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d docs, want %d", len(got), len(tc.want))
			}
			if tc.sorted {
				for i := range got {
					if fmt.Sprint(got[i]) != fmt.Sprint(tc.want[i]) {
						t.Fatalf("doc %d = %v, want %v", i, got[i], tc.want[i])
					}
				}
			} else {
				sort.Slice(got, func(i, j int) bool { return got[i].ID < got[j].ID })
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("docs differ")
				}
			}
			if n := log.count("getMore") - before; n < tc.minGetMores {
				t.Errorf("%d getMores, want at least %d", n, tc.minGetMores)
			}
		})
	}

	t.Run("projection", func(t *testing.T) {
		var got []bson.D
		cur, err := coll.Find(e.ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{3, 4}}}}},
			options.Find().SetProjection(bson.D{{Key: "v", Value: 1}, {Key: "_id", Value: 0}}).SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			t.Fatalf("find: %v", err)
		}
		if err := cur.All(e.ctx, &got); err != nil {
			t.Fatalf("all: %v", err)
		}
		want := fmt.Sprint([]bson.D{{{Key: "v", Value: all[3].V}}, {{Key: "v", Value: all[4].V}}})
		if fmt.Sprint(got) != want {
			t.Errorf("projected = %v, want %v", got, want)
		}
		var excl []bson.D
		cur, err = coll.Find(e.ctx, bson.D{{Key: "_id", Value: 3}}, options.Find().SetProjection(bson.D{{Key: "arr", Value: 0}, {Key: "g", Value: 0}}))
		if err != nil {
			t.Fatalf("find: %v", err)
		}
		if err := cur.All(e.ctx, &excl); err != nil {
			t.Fatalf("all: %v", err)
		}
		if want := fmt.Sprint([]bson.D{{{Key: "_id", Value: int32(3)}, {Key: "v", Value: all[3].V}}}); fmt.Sprint(excl) != want {
			t.Errorf("exclusion projection = %v, want %v", excl, want)
		}
	})
}

func TestCursorLifecycle(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("c")
	seedCursorDocs(t, e, coll)

	// singleBatch: one batch, no cursor left open.
	raw, err := runRaw(e.ctx, e.db, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 10}, {Key: "singleBatch", Value: true}})
	if err != nil {
		t.Fatalf("find singleBatch: %v", err)
	}
	d := mustD(t, raw)
	if batch, _ := get(d, "cursor.firstBatch").(bson.A); len(batch) != 10 || get(d, "cursor.id") != int64(0) {
		t.Errorf("singleBatch reply: %d docs, cursor id %v; want 10 and 0", len(batch), get(d, "cursor.id"))
	}
	if ns := get(d, "cursor.ns"); ns != e.db.Name()+".c" {
		t.Errorf("cursor.ns = %v", ns)
	}

	// A limit equal to the result closes the cursor in the first batch.
	raw, err = runRaw(e.ctx, e.db, bson.D{{Key: "find", Value: "c"}, {Key: "limit", Value: 5}})
	if err != nil {
		t.Fatalf("find limit: %v", err)
	}
	if id := get(mustD(t, raw), "cursor.id"); id != int64(0) {
		t.Errorf("limit 5 left cursor %v open", id)
	}

	// killCursors, then getMore on the killed cursor: CursorNotFound.
	raw, err = runRaw(e.ctx, e.db, bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 2}})
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	id, _ := get(mustD(t, raw), "cursor.id").(int64)
	if id == 0 {
		t.Fatalf("no cursor id in %v", raw)
	}
	raw, err = runRaw(e.ctx, e.db, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}, {Key: "batchSize", Value: 3}})
	if err != nil {
		t.Fatalf("getMore: %v", err)
	}
	d = mustD(t, raw)
	if batch, _ := get(d, "cursor.nextBatch").(bson.A); len(batch) != 3 || get(d, "cursor.id") != id {
		t.Errorf("getMore reply = %d docs, id %v", len(batch), get(d, "cursor.id"))
	}
	raw, err = runRaw(e.ctx, e.db, bson.D{{Key: "killCursors", Value: "c"}, {Key: "cursors", Value: bson.A{id, int64(424242)}}})
	if err != nil {
		t.Fatalf("killCursors: %v", err)
	}
	d = mustD(t, raw)
	if fmt.Sprint(get(d, "cursorsKilled")) != fmt.Sprint(bson.A{id}) || fmt.Sprint(get(d, "cursorsNotFound")) != fmt.Sprint(bson.A{int64(424242)}) {
		t.Errorf("killCursors reply = %v", d)
	}
	_, err = runRaw(e.ctx, e.db, bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}})
	if errCode(err) != 43 {
		t.Errorf("getMore on killed cursor: %v, want CursorNotFound 43", err)
	}

	// Through the driver: closing a cursor early kills it server-side.
	cur, err := coll.Find(e.ctx, bson.D{}, options.Find().SetBatchSize(2))
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	driverID := cur.ID()
	if driverID == 0 {
		t.Fatalf("driver cursor has no id")
	}
	if err := cur.Close(e.ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	_, err = runRaw(e.ctx, e.db, bson.D{{Key: "getMore", Value: driverID}, {Key: "collection", Value: "c"}})
	if errCode(err) != 43 {
		t.Errorf("getMore after driver Close: %v, want CursorNotFound 43", err)
	}
}

func TestCountAndDistinct(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("c")
	all := seedCursorDocs(t, e, coll)

	if n, err := coll.EstimatedDocumentCount(e.ctx); err != nil || n != cursorDocs {
		t.Errorf("EstimatedDocumentCount = %d, %v", n, err)
	}
	if n, err := e.db.Collection("missing").EstimatedDocumentCount(e.ctx); err != nil || n != 0 {
		t.Errorf("EstimatedDocumentCount of a missing collection = %d, %v", n, err)
	}
	wantG1 := 0
	for _, d := range all {
		if d.G == 1 {
			wantG1++
		}
	}
	countTests := []struct {
		filter bson.D
		opts   *options.CountOptionsBuilder
		want   int64
	}{
		{filter: bson.D{}, want: cursorDocs},
		{filter: bson.D{{Key: "g", Value: 1}}, want: int64(wantG1)},
		{filter: bson.D{{Key: "g", Value: 1}}, opts: options.Count().SetSkip(10), want: int64(wantG1 - 10)},
		{filter: bson.D{{Key: "g", Value: 1}}, opts: options.Count().SetLimit(7), want: 7},
		{filter: bson.D{{Key: "arr", Value: 4}}, want: cursorDocs / 5},
		{filter: bson.D{{Key: "nope", Value: 1}}, want: 0},
	}
	for _, tc := range countTests {
		opts := tc.opts
		if opts == nil {
			opts = options.Count()
		}
		if n, err := coll.CountDocuments(e.ctx, tc.filter, opts); err != nil || n != tc.want {
			t.Errorf("CountDocuments(%v) = %d, %v; want %d", tc.filter, n, err, tc.want)
		}
	}

	dc := e.db.Collection("d")
	if _, err := dc.InsertMany(e.ctx, []any{
		bson.D{{Key: "t", Value: bson.A{1, 2}}, {Key: "sub", Value: bson.A{bson.D{{Key: "x", Value: "a"}}, bson.D{{Key: "x", Value: "b"}}}}},
		bson.D{{Key: "t", Value: 2}, {Key: "sub", Value: bson.D{{Key: "x", Value: "c"}}}},
		bson.D{{Key: "t", Value: "z"}, {Key: "k", Value: 1}},
		bson.D{{Key: "t", Value: 2.0}},
		bson.D{{Key: "k", Value: 1}},
	}); err != nil {
		t.Fatalf("seed distinct: %v", err)
	}
	distinctTests := []struct {
		field  string
		filter bson.D
		want   []string
	}{
		{field: "t", filter: bson.D{}, want: []string{"1", "2", "z"}},
		{field: "t", filter: bson.D{{Key: "k", Value: 1}}, want: []string{"z"}},
		{field: "sub.x", filter: bson.D{}, want: []string{"a", "b", "c"}},
		{field: "missing", filter: bson.D{}, want: nil},
	}
	for _, tc := range distinctTests {
		res := dc.Distinct(e.ctx, tc.field, tc.filter)
		var vals bson.A
		if err := res.Decode(&vals); err != nil {
			t.Errorf("Distinct(%s): %v", tc.field, err)
			continue
		}
		var got []string
		for _, v := range vals {
			got = append(got, fmt.Sprint(v))
		}
		sort.Strings(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Distinct(%s, %v) = %v, want %v", tc.field, tc.filter, got, tc.want)
		}
	}
}

func TestFindAndModifyAndDelete(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("c")
	if _, err := coll.InsertMany(e.ctx, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "k", Value: "a"}, {Key: "n", Value: 1}},
		bson.D{{Key: "_id", Value: 2}, {Key: "k", Value: "a"}, {Key: "n", Value: 2}},
		bson.D{{Key: "_id", Value: 3}, {Key: "k", Value: "b"}, {Key: "n", Value: 3}},
	}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	decode := func(r *mongo.SingleResult) (bson.D, error) {
		var d bson.D
		err := r.Decode(&d)
		return d, err
	}
	d := func(kv ...any) string {
		var out bson.D
		for i := 0; i < len(kv); i += 2 {
			out = append(out, bson.E{Key: kv[i].(string), Value: kv[i+1]})
		}
		return fmt.Sprint(out)
	}
	tests := []struct {
		name    string
		run     func() *mongo.SingleResult
		want    string // "" = ErrNoDocuments
		wantErr bool
	}{
		{name: "update returns before, sorted", run: func() *mongo.SingleResult {
			return coll.FindOneAndUpdate(e.ctx, bson.D{{Key: "k", Value: "a"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 10}}}},
				options.FindOneAndUpdate().SetSort(bson.D{{Key: "n", Value: -1}}))
		}, want: d("_id", int32(2), "k", "a", "n", int32(2))},
		{name: "update returns after with projection", run: func() *mongo.SingleResult {
			return coll.FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$set", Value: bson.D{{Key: "m", Value: true}}}},
				options.FindOneAndUpdate().SetReturnDocument(options.After).SetProjection(bson.D{{Key: "n", Value: 1}, {Key: "m", Value: 1}}))
		}, want: d("_id", int32(2), "n", int32(12), "m", true)},
		{name: "upsert returns after", run: func() *mongo.SingleResult {
			return coll.FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 9}, {Key: "k", Value: "z"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 0}}}},
				options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After))
		}, want: d("_id", int32(9), "k", "z", "n", int32(0))},
		{name: "upsert returns before: no document", run: func() *mongo.SingleResult {
			return coll.FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 10}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 0}}}},
				options.FindOneAndUpdate().SetUpsert(true))
		}, want: ""},
		{name: "update no match", run: func() *mongo.SingleResult {
			return coll.FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 99}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: 0}}}})
		}, want: ""},
		{name: "replace returns after", run: func() *mongo.SingleResult {
			return coll.FindOneAndReplace(e.ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "k", Value: "r"}},
				options.FindOneAndReplace().SetReturnDocument(options.After))
		}, want: d("_id", int32(3), "k", "r")},
		{name: "replace returns before", run: func() *mongo.SingleResult {
			return coll.FindOneAndReplace(e.ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "k", Value: "s"}})
		}, want: d("_id", int32(3), "k", "r")},
		{name: "delete sorted", run: func() *mongo.SingleResult {
			return coll.FindOneAndDelete(e.ctx, bson.D{{Key: "k", Value: "a"}}, options.FindOneAndDelete().SetSort(bson.D{{Key: "_id", Value: 1}}))
		}, want: d("_id", int32(1), "k", "a", "n", int32(1))},
		{name: "delete no match", run: func() *mongo.SingleResult {
			return coll.FindOneAndDelete(e.ctx, bson.D{{Key: "_id", Value: 1}})
		}, want: ""},
		{name: "update with operator error", run: func() *mongo.SingleResult {
			return coll.FindOneAndUpdate(e.ctx, bson.D{{Key: "_id", Value: 2}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "k", Value: 1}}}})
		}, wantErr: true},
	}
	for _, tc := range tests {
		got, err := decode(tc.run())
		switch {
		case tc.wantErr:
			if err == nil || errors.Is(err, mongo.ErrNoDocuments) {
				t.Errorf("%s: err %v, want a server error", tc.name, err)
			}
		case tc.want == "":
			if !errors.Is(err, mongo.ErrNoDocuments) {
				t.Errorf("%s: %v, %v; want ErrNoDocuments", tc.name, got, err)
			}
		case err != nil || fmt.Sprint(got) != tc.want:
			t.Errorf("%s: %v, %v; want %s", tc.name, got, err, tc.want)
		}
	}
	var ten bson.D
	if err := coll.FindOne(e.ctx, bson.D{{Key: "_id", Value: 10}}).Decode(&ten); err != nil || fmt.Sprint(ten) != d("_id", int32(10), "n", int32(0)) {
		t.Errorf("upserted doc 10 = %v, %v", ten, err)
	}

	// DeleteOne / DeleteMany.
	if _, err := coll.InsertMany(e.ctx, []any{bson.D{{Key: "g", Value: 1}}, bson.D{{Key: "g", Value: 1}}, bson.D{{Key: "g", Value: 1}}}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	if res, err := coll.DeleteOne(e.ctx, bson.D{{Key: "g", Value: 1}}); err != nil || res.DeletedCount != 1 {
		t.Errorf("DeleteOne = %+v, %v", res, err)
	}
	if res, err := coll.DeleteMany(e.ctx, bson.D{{Key: "g", Value: 1}}); err != nil || res.DeletedCount != 2 {
		t.Errorf("DeleteMany = %+v, %v", res, err)
	}
	if res, err := coll.DeleteMany(e.ctx, bson.D{{Key: "g", Value: 1}}); err != nil || res.DeletedCount != 0 {
		t.Errorf("DeleteMany of nothing = %+v, %v", res, err)
	}
	if n, err := coll.CountDocuments(e.ctx, bson.D{}); err != nil || n != 4 {
		t.Errorf("count = %d, %v; want 4 (ids 2 3 9 10)", n, err)
	}
}
