package embedded

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/gameops/rollup/embedded/storage"
)

// TestRawChangeEventsMatchDecoded cross-checks the raw path (change events appended from the
// entries' encoding) against the decoded one (eventFor, apply, encode): random inserts,
// updates (operators that set, unset, grow and shorten arrays), replaces and deletes of
// random documents in two collections (one with pre- and post-images) and a few DDL
// operations, written through the driver; then, for each scope, fullDocument mode and
// pipeline, a stream on the raw path and the same stream forced onto the decoded path read
// the oplog in random batch sizes and must return the same events, byte for byte, and the
// same postBatchResumeToken after every batch. A stream that must not be on the raw path
// (whenAvailable, pipelines the raw path does not build) is checked to be off it and drained.
func TestRawChangeEventsMatchDecoded(t *testing.T) {
	if testing.Short() {
		t.Skip("random writes through the driver")
	}
	s, c := startInternal(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	r := rand.New(rand.NewPCG(17, 1))
	db := c.Database("rawcs")
	start := s.engine.LastOpTime()
	if err := db.RunCommand(ctx, bson.D{{Key: "create", Value: "c2"}, {Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	writeRandom(ctx, t, r, db, 300)
	// Events a document stream does not build raw: a collection created, indexed and dropped.
	c3 := db.Collection("c3")
	if _, err := c3.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c3.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "x", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := c3.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	writeRandom(ctx, t, r, db, 100)

	leafFilter := leafFilterStage()
	projects := bson.D{{Key: "$match", Value: bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "operationType", Value: bson.D{{Key: "$nin", Value: bson.A{"insert", "update", "replace"}}}}},
		bson.D{{Key: "fullDocument.project", Value: bson.D{{Key: "$in", Value: bson.A{"a", "b"}}}}},
	}}}}}
	match := func(f bson.D) bson.D { return bson.D{{Key: "$match", Value: f}} }
	project := func(f bson.D) bson.D { return bson.D{{Key: "$project", Value: f}} }
	pipelines := []struct {
		name   string
		stages []bson.D
		raw    bool // built raw with fullDocument default and updateLookup
	}{
		{"none", nil, true},
		{"rollup's leaf filter", []bson.D{leafFilter}, true},
		{"watcher's project partition", []bson.D{leafFilter, projects}, true},
		{"leaf filter then on _id", []bson.D{leafFilter, match(bson.D{{Key: "_id", Value: bson.D{{Key: "$exists", Value: true}}}})}, false},
		{"project partition alone", []bson.D{projects}, true},
		{"deletes", []bson.D{match(bson.D{{Key: "operationType", Value: "delete"}})}, true},
		{"n over 50", []bson.D{match(bson.D{{Key: "fullDocument.n", Value: bson.D{{Key: "$gt", Value: 50}}}})}, true},
		{"nested path", []bson.D{match(bson.D{{Key: "fullDocument.children.k1", Value: bson.D{{Key: "$exists", Value: true}}}})}, true},
		{"missing document", []bson.D{match(bson.D{{Key: "fullDocument", Value: nil}})}, false},
		{"namespace and comment", []bson.D{match(bson.D{{Key: "$comment", Value: "x"}, {Key: "ns.coll", Value: "c"}})}, true},
		{"on _id (no probe)", []bson.D{match(bson.D{{Key: "_id", Value: bson.D{{Key: "$exists", Value: true}}}})}, false},
		{"match then project", []bson.D{leafFilter, {{Key: "$project", Value: bson.D{{Key: "documentKey", Value: 1}, {Key: "fullDocument.n", Value: 1}}}}}, true},
		{"watcher's partition then its projection", []bson.D{leafFilter, projects, project(bson.D{
			{Key: "operationType", Value: 1}, {Key: "clusterTime", Value: true}, {Key: "wallTime", Value: int64(1)},
			{Key: "fullDocument.project", Value: 1}, {Key: "fullDocument.n", Value: 1.0}, {Key: "fullDocument.rollup", Value: 1}})}, true},
		{"project whole fields", []bson.D{project(bson.D{{Key: "_id", Value: 1}, {Key: "fullDocument", Value: 1}, {Key: "ns", Value: 1}, {Key: "updateDescription", Value: 1}})}, true},
		{"project a field no event has", []bson.D{project(bson.D{{Key: "fullDocument.nothere", Value: 1}})}, true},
		{"project then match", []bson.D{project(bson.D{{Key: "operationType", Value: 1}, {Key: "fullDocument.n", Value: 1}}), match(bson.D{{Key: "operationType", Value: "insert"}})}, false},
		{"project a deeper path", []bson.D{project(bson.D{{Key: "fullDocument.children.k1", Value: 1}})}, false},
		{"project an expression", []bson.D{project(bson.D{{Key: "op", Value: "$operationType"}})}, false},
		{"project with exclusion", []bson.D{project(bson.D{{Key: "ns", Value: 0}})}, false},
	}
	scopes := []struct {
		name  string
		scope streamScope
		coll  string
	}{
		{"collection c", scopeCollection, "c"},
		{"collection c2 (pre-images)", scopeCollection, "c2"},
		{"database", scopeDatabase, ""},
		{"cluster", scopeCluster, ""},
	}
	rawStreams, events, compared := 0, 0, 0
	perPipeline := map[string]int{}
	var seen coverage
	for _, sc := range scopes {
		for _, full := range []string{"default", "updateLookup", "whenAvailable"} {
			for _, p := range pipelines {
				name := fmt.Sprintf("%s, %s, %s", sc.name, full, p.name)
				open := func() *changeStream {
					cs := testStream(t, "rawcs", sc.coll, full, start, p.stages...)
					cs.scope = sc.scope
					if sc.scope == scopeCluster {
						cs.db = ""
					}
					return cs
				}
				raw := open()
				if want := p.raw && full != "whenAvailable"; raw.raw != want {
					t.Fatalf("%s: raw path %v, want %v", name, raw.raw, want)
				}
				// A stream not on the raw path runs the decoded path: a second one forced
				// there would run the same code, so it is drained alone (its events
				// counted, as below) instead of compared with itself.
				var decoded *changeStream
				if raw.raw {
					rawStreams++
					decoded = open()
					decoded.raw = false
				}
				n := compareStreams(t, s, name, raw, decoded, r, &seen)
				perPipeline[p.name] += n
				events += n
				if raw.raw {
					compared += n
				}
			}
		}
	}
	for _, p := range pipelines {
		if perPipeline[p.name] == 0 {
			t.Errorf("pipeline %s: no events", p.name)
		}
	}
	if seen.truncated == 0 || seen.removed == 0 || seen.gone == 0 || seen.keyOnly == 0 {
		t.Errorf("the writes did not cover every kind of event: %+v", seen)
	}
	t.Logf("%d streams on the raw path, %d events compared, %d read in all, %+v", rawStreams, compared, events, seen)
}

// coverage counts the raw path's events of the kinds the cross-check must see.
type coverage struct {
	truncated, removed int // updates with truncatedArrays, removedFields
	gone               int // updates whose looked-up document is gone (fullDocument null)
	keyOnly            int // deletes
}

func (c *coverage) add(ev bson.Raw) {
	if v, err := ev.LookupErr("updateDescription", "truncatedArrays"); err == nil && len(v.Array()) > 5 {
		c.truncated++
	}
	if v, err := ev.LookupErr("updateDescription", "removedFields"); err == nil && len(v.Array()) > 5 {
		c.removed++
	}
	if v, err := ev.LookupErr("fullDocument"); err == nil && v.Type == bson.TypeNull {
		c.gone++
	}
	if v, err := ev.LookupErr("operationType"); err == nil && v.StringValue() == "delete" {
		c.keyOnly++
	}
}

// compareStreams drains both streams in the same random batch sizes and fails on the first
// difference; it returns the number of events. With b nil it drains a alone.
func compareStreams(t *testing.T, s *Server, name string, a, b *changeStream, r *rand.Rand, seen *coverage) int {
	t.Helper()
	n := 0
	for i := 0; ; i++ {
		size := int64(r.IntN(40))
		ba, errA := s.streamBatch(a, size)
		if b == nil {
			n += len(ba)
			if errA != nil || len(ba) == 0 || a.invalidated {
				return n
			}
			continue
		}
		bb, errB := s.streamBatch(b, size)
		if (errA == nil) != (errB == nil) || (errA != nil && errA.Error() != errB.Error()) {
			t.Fatalf("%s: batch %d: errors %v and %v", name, i, errA, errB)
		}
		if len(ba) != len(bb) {
			t.Fatalf("%s: batch %d: %d events raw, %d decoded", name, i, len(ba), len(bb))
		}
		for j := range ba {
			x, y := ba[j].(bson.Raw), bb[j].(bson.Raw)
			if !bytes.Equal(x, y) {
				t.Fatalf("%s: batch %d, event %d:\nraw     %s\ndecoded %s", name, i, j, x, y)
			}
			if a.raw {
				seen.add(x)
			}
		}
		if pa, pb := a.pbrt(), b.pbrt(); fmt.Sprint(pa) != fmt.Sprint(pb) {
			t.Fatalf("%s: batch %d: postBatchResumeToken %v raw, %v decoded", name, i, pa, pb)
		}
		n += len(ba)
		if len(ba) == 0 || a.invalidated {
			return n
		}
	}
}

// startInternal runs a server and connects the driver to it.
func startInternal(t *testing.T) (*Server, *mongo.Client) {
	t.Helper()
	s, err := New(Config{Listen: "127.0.0.1:0", TTLMonitorInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	c, err := mongo.Connect(options.Client().ApplyURI(s.URI()).SetHeartbeatInterval(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		_ = c.Disconnect(dctx)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return s, c
}

// writeRandom makes n random writes to the collections c and c2 of db.
func writeRandom(ctx context.Context, t *testing.T, r *rand.Rand, db *mongo.Database, n int) {
	t.Helper()
	ids := []any{int32(1), int32(2), int64(3), "four", "five", bson.D{{Key: "k", Value: 6}}, 7.5, bson.ObjectID{8}}
	for range n {
		coll := db.Collection([]string{"c", "c2"}[r.IntN(2)])
		id := ids[r.IntN(len(ids))]
		filter := bson.D{{Key: "_id", Value: id}}
		var err error
		switch r.IntN(6) {
		case 0:
			_, err = coll.InsertOne(ctx, randomDoc(r, id))
			if mongo.IsDuplicateKeyError(err) {
				err = nil
			}
		case 1:
			_, err = coll.ReplaceOne(ctx, filter, randomDoc(r, id), options.Replace().SetUpsert(r.IntN(2) == 0))
		case 2:
			_, err = coll.DeleteOne(ctx, filter)
		default:
			_, err = coll.UpdateOne(ctx, filter, randomUpdate(r), options.UpdateOne().SetUpsert(r.IntN(3) == 0))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// randomValue is a value of a random BSON type.
func randomValue(r *rand.Rand, depth int) any {
	switch r.IntN(14) {
	case 0:
		return r.Int32()
	case 1:
		return r.Int64()
	case 2:
		return r.Float64() * 1e6
	case 3:
		return fmt.Sprintf("s%d", r.IntN(1000))
	case 4:
		return r.IntN(2) == 0
	case 5:
		return nil
	case 6:
		return bson.NewDateTimeFromTime(time.UnixMilli(r.Int64N(1 << 42)))
	case 7:
		return bson.ObjectID{byte(r.IntN(256)), 1, 2}
	case 8:
		d, _ := bson.ParseDecimal128(fmt.Sprintf("%d.%d", r.IntN(1000), r.IntN(100)))
		return d
	case 9:
		return bson.Binary{Subtype: 0, Data: []byte{byte(r.IntN(256)), 7}}
	case 10:
		return bson.Timestamp{T: r.Uint32(), I: r.Uint32()}
	case 11:
		return bson.Regex{Pattern: "^a", Options: "i"}
	case 12:
		if depth > 0 {
			a := bson.A{}
			for range r.IntN(4) {
				a = append(a, randomValue(r, depth-1))
			}
			return a
		}
	case 13:
		if depth > 0 {
			d := bson.D{}
			for i := range r.IntN(4) {
				d = append(d, bson.E{Key: fmt.Sprintf("k%d", i), Value: randomValue(r, depth-1)})
			}
			return d
		}
	}
	return int32(0)
}

// randomDoc is a document with the fields the pipelines read (project, n, rollup,
// children) and random others.
func randomDoc(r *rand.Rand, id any) bson.D {
	d := bson.D{{Key: "_id", Value: id}, {Key: "project", Value: []string{"a", "b", "c"}[r.IntN(3)]}, {Key: "n", Value: r.IntN(100)}}
	if r.IntN(3) == 0 {
		d = append(d, bson.E{Key: "rollup", Value: r.IntN(2) == 0})
	}
	if r.IntN(2) == 0 {
		d = append(d, bson.E{Key: "children", Value: bson.D{{Key: "k1", Value: randomValue(r, 1)}}})
	}
	arr := bson.A{}
	for range r.IntN(6) {
		arr = append(arr, randomValue(r, 1))
	}
	d = append(d, bson.E{Key: "arr", Value: arr})
	for i := range r.IntN(4) {
		d = append(d, bson.E{Key: fmt.Sprintf("f%d", i), Value: randomValue(r, 2)})
	}
	return d
}

// randomUpdate is an update that sets, removes, grows and shortens fields (a pipeline that
// sets a short array: truncatedArrays).
func randomUpdate(r *rand.Rand) any {
	set := bson.D{{Key: "n", Value: r.IntN(100)}}
	if r.IntN(2) == 0 {
		set = append(set, bson.E{Key: "children.k1", Value: randomValue(r, 1)})
	}
	if r.IntN(3) == 0 {
		set = append(set, bson.E{Key: "project", Value: []string{"a", "b", "c"}[r.IntN(3)]})
	}
	u := bson.D{{Key: "$set", Value: set}}
	switch r.IntN(5) {
	case 0:
		u = append(u, bson.E{Key: "$unset", Value: bson.D{{Key: "f0", Value: ""}, {Key: "rollup", Value: ""}}})
	case 1:
		u = append(u, bson.E{Key: "$push", Value: bson.D{{Key: "arr", Value: randomValue(r, 1)}}})
	case 2:
		return mongo.Pipeline{
			{{Key: "$set", Value: bson.D{{Key: "arr", Value: bson.D{{Key: "$literal", Value: bson.A{int32(1), int32(2), int32(3)}[:r.IntN(3)]}}}, {Key: "n", Value: r.IntN(100)}}}},
			{{Key: "$unset", Value: bson.A{"f1"}}},
		}
	}
	return u
}

// TestAppendTokenElement checks the raw resume token against encodeToken's.
func TestAppendTokenElement(t *testing.T) {
	for _, ts := range []storage.OpTime{{}, {T: 1, I: 2}, {T: 0xFFFFFFFF, I: 0xFFFFFFFF}, {T: 0x6543ABCD, I: 0x10}} {
		for _, kind := range []byte{tokenEvent, tokenInvalidate, tokenHighWater} {
			want, err := bson.Marshal(bson.D{{Key: "t", Value: encodeToken(ts, kind)}})
			if err != nil {
				t.Fatal(err)
			}
			got := appendTokenElement([]byte{0, 0, 0, 0}, "t", ts, kind)
			got = endDocument(got, 0)
			if !bytes.Equal(got, want) {
				t.Errorf("%v kind %d: %s, want %s", ts, kind, bson.Raw(got), bson.Raw(want))
			}
		}
	}
}

// FuzzParseRawEntry feeds arbitrary bytes to the raw path's readers: they must not panic, and
// what they append must be valid BSON.
func FuzzParseRawEntry(f *testing.F) {
	s := newInternalServer(f)
	if _, err := s.engine.Write(context.Background(), func(w *storage.Writer) error {
		d, err := w.Insert("db", "c", bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{1, 2}}})
		if err != nil {
			return err
		}
		_, err = w.Replace("db", "c", d, bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{1}}}, &storage.UpdateDesc{
			UpdatedFields: bson.D{{Key: "b", Value: "x"}}, RemovedFields: []string{"c"},
			TruncatedArrays: []storage.TruncatedArray{{Field: "a", NewSize: 1}},
		})
		if err != nil {
			return err
		}
		return w.Delete("db", "c", d)
	}); err != nil {
		f.Fatal(err)
	}
	for _, re := range s.engine.OplogAfterRaw(storage.OpTime{}, 0) {
		f.Add(append([]byte(nil), re.Bytes()...))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, ok := parseRawEntry(raw)
		if !ok {
			return
		}
		if e.op == "" || len(e.db) == 0 || !e.hasWall {
			t.Fatalf("accepted an entry without op, db or wall clock: %+v", e)
		}
		if e.op == storage.OpUpdate {
			out, ok := appendRawUpdateDescription([]byte{0, 0, 0, 0}, e.u)
			if ok {
				if err := bsoncore.Document(endDocument(out, 0)).Validate(); err != nil {
					t.Fatalf("invalid updateDescription: %v", err)
				}
			}
		}
	})
}
