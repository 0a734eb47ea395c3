package migrations

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gameops/rollup/tree/treedb"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testCtx is a context for one test, ending before the test binary's deadline.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	return testctx.Context(t)
}

// newDB starts a store (once per test) and returns a fresh database on it.
func newDB(t *testing.T) *mongo.Database {
	t.Helper()
	srv := embeddedtest.Start(t)
	return srv.Database(t, srv.Client(t))
}

// newTestMigrator is New with a short lock poll so waiting tests run fast.
func newTestMigrator(t *testing.T, db *mongo.Database) *Migrator {
	t.Helper()
	m := New(db, zaptest.NewLogger(t))
	m.poll = 10 * time.Millisecond
	return m
}

// indexSpecs lists the indexes of coll by name.
func indexSpecs(ctx context.Context, t *testing.T, coll *mongo.Collection) map[string]bson.Raw {
	t.Helper()
	cur, err := coll.Indexes().List(ctx)
	if err != nil {
		t.Fatalf("listIndexes %s: %v", coll.Name(), err)
	}
	var specs []bson.Raw
	if err := cur.All(ctx, &specs); err != nil {
		t.Fatalf("listIndexes %s: %v", coll.Name(), err)
	}
	out := map[string]bson.Raw{}
	for _, s := range specs {
		out[s.Lookup("name").StringValue()] = s
	}
	return out
}

// allDocs returns every document of coll in _id order.
func allDocs(ctx context.Context, t *testing.T, coll *mongo.Collection) []bson.Raw {
	t.Helper()
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	var docs []bson.Raw
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatalf("find: %v", err)
	}
	return docs
}

func lockPresent(ctx context.Context, t *testing.T, db *mongo.Database) bool {
	t.Helper()
	n, err := db.Collection(store.LockCollection).CountDocuments(ctx, bson.D{})
	if err != nil {
		t.Fatalf("count lock: %v", err)
	}
	return n > 0
}

func TestStepsAreNumberedInOrder(t *testing.T) {
	steps := Steps()
	if err := validateSteps(steps); err != nil {
		t.Fatal(err)
	}
	if len(steps) != 11 {
		t.Fatalf("got %d steps, want 11", len(steps))
	}
	bad := []struct {
		name  string
		steps []Step
	}{
		{"starts at 2", []Step{{Version: 2, Name: "x", Up: countsUniqueIndex}}},
		{"gap", []Step{{Version: 1, Name: "x", Up: countsUniqueIndex}, {Version: 3, Name: "y", Up: countsUniqueIndex}}},
		{"no name", []Step{{Version: 1, Up: countsUniqueIndex}}},
		{"no up", []Step{{Version: 1, Name: "x"}}},
	}
	for _, tc := range bad {
		if err := validateSteps(tc.steps); err == nil {
			t.Errorf("%s: validateSteps accepted it", tc.name)
		}
	}
}

func TestFreshDatabase(t *testing.T) {
	ctx := testCtx(t)
	db := newDB(t)
	m := newTestMigrator(t, db)

	n, err := m.Pending(ctx)
	if err != nil || n != len(Steps()) {
		t.Fatalf("Pending before = %d, %v; want %d", n, err, len(Steps()))
	}
	r, err := m.Up(ctx, UpOptions{})
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if len(r.Applied) != len(Steps()) || r.DryRun || len(r.Duplicates) != 0 {
		t.Fatalf("report = %+v, want every step applied, no duplicates", r)
	}
	for i, s := range r.Applied {
		if s.Version != i+1 {
			t.Errorf("applied[%d].Version = %d", i, s.Version)
		}
	}
	st, err := m.Status(ctx)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if len(st) != len(Steps()) {
		t.Fatalf("Status = %+v", st)
	}
	for _, s := range st {
		if !s.Applied || s.AppliedAt.IsZero() || s.Unknown || s.Name == "" {
			t.Errorf("status %+v: want applied with a time", s)
		}
	}
	if n, err := m.Pending(ctx); err != nil || n != 0 {
		t.Fatalf("Pending after = %d, %v; want 0", n, err)
	}

	counts := indexSpecs(ctx, t, db.Collection(store.CountsCollection))
	if spec, ok := counts[store.CountsKeyIndex]; !ok || !keyIndex().Matches(spec) {
		t.Fatalf("counts indexes = %v, want unique %s", counts, store.CountsKeyIndex)
	}
	if _, ok := indexSpecs(ctx, t, db.Collection(store.TokensCollection))[store.TokensProjectIndex]; !ok {
		t.Fatalf("tokens has no index %s", store.TokensProjectIndex)
	}
	names, err := db.ListCollectionNames(ctx, bson.D{{Key: "name", Value: store.ProjectsCollection}})
	if err != nil || len(names) != 1 {
		t.Fatalf("projects collection: %v, %v", names, err)
	}
	if lockPresent(ctx, t, db) {
		t.Fatal("lock not released")
	}

	// A second Up (also from another instance) is a no-op.
	for _, m2 := range []*Migrator{m, newTestMigrator(t, db)} {
		r2, err := m2.Up(ctx, UpOptions{})
		if err != nil || !r2.UpToDate() {
			t.Fatalf("second Up = %+v, %v; want up to date", r2, err)
		}
	}
	st2, err := m.Status(ctx)
	if err != nil || !slices.Equal(st, st2) {
		t.Fatalf("Status changed by a no-op Up: %+v -> %+v (%v)", st, st2, err)
	}
}

func TestStatusListsUnknownSteps(t *testing.T) {
	ctx := testCtx(t)
	db := newDB(t)
	m := newTestMigrator(t, db)
	if _, err := m.Up(ctx, UpOptions{}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	future := len(Steps()) + 1
	if _, err := db.Collection(store.MigrationsCollection).InsertOne(ctx, appliedDoc{Version: future, Name: "from the future", AppliedAt: at}); err != nil {
		t.Fatal(err)
	}
	st, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := StepStatus{Version: future, Name: "from the future", Applied: true, AppliedAt: at, Unknown: true}
	known := len(Steps())
	if len(st) != known+1 || st[known] != want {
		t.Fatalf("Status = %+v, want %d known then %+v", st, known, want)
	}
	if n, err := m.Pending(ctx); err != nil || n != 0 {
		t.Fatalf("Pending = %d, %v", n, err)
	}
}

// dupCase is one case of testdata/duplicates.json.
type dupCase struct {
	Name    string          `bson:"name"`
	Docs    []bson.Raw      `bson:"docs"`
	Removed []bson.ObjectID `bson:"removed"`
}

func loadDupCases(t *testing.T) []dupCase {
	t.Helper()
	data, err := os.ReadFile("testdata/duplicates.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []dupCase `bson:"cases"`
	}
	if err := bson.UnmarshalExtJSON(data, false, &file); err != nil {
		t.Fatalf("parse testdata/duplicates.json: %v", err)
	}
	if len(file.Cases) == 0 {
		t.Fatal("no cases")
	}
	return file.Cases
}

// reportRemovedIDs flattens the removed _ids of a report in report order.
func reportRemovedIDs(r Report) []bson.ObjectID {
	var ids []bson.ObjectID
	for _, g := range r.Duplicates {
		for _, d := range g.Removed {
			ids = append(ids, d.Lookup("_id").ObjectID())
		}
	}
	return ids
}

func TestDuplicateResolution(t *testing.T) {
	srv := embeddedtest.Start(t)
	client := srv.Client(t)
	for _, tc := range loadDupCases(t) {
		t.Run(tc.Name, func(t *testing.T) {
			ctx := testCtx(t)
			db := srv.Database(t, client)
			coll := db.Collection(store.CountsCollection)
			docs := make([]any, len(tc.Docs))
			for i, d := range tc.Docs {
				docs[i] = d
			}
			if _, err := coll.InsertMany(ctx, docs); err != nil {
				t.Fatalf("seed: %v", err)
			}
			before := allDocs(ctx, t, coll)
			m := newTestMigrator(t, db)

			// Dry run: reports, changes nothing.
			dry, err := m.Up(ctx, UpOptions{DryRun: true})
			if err != nil {
				t.Fatalf("dry run: %v", err)
			}
			if !dry.DryRun || len(dry.Applied) != len(Steps()) {
				t.Fatalf("dry run report = %+v", dry)
			}
			if got := reportRemovedIDs(dry); !slices.Equal(got, tc.Removed) && (len(got) != 0 || len(tc.Removed) != 0) {
				t.Fatalf("dry run would remove %v, want %v", got, tc.Removed)
			}
			if after := allDocs(ctx, t, coll); !slices.EqualFunc(before, after, func(a, b bson.Raw) bool { return string(a) == string(b) }) {
				t.Fatal("dry run changed the counts collection")
			}
			if _, ok := indexSpecs(ctx, t, coll)[store.CountsKeyIndex]; ok {
				t.Fatal("dry run built the index")
			}
			if n, err := m.Pending(ctx); err != nil || n != len(Steps()) {
				t.Fatalf("dry run recorded steps: pending %d, %v", n, err)
			}
			if lockPresent(ctx, t, db) {
				t.Fatal("dry run left a lock")
			}

			// Real run: removes exactly those, keeps the newest, same report as the dry run.
			r, err := m.Up(ctx, UpOptions{})
			if err != nil {
				t.Fatalf("Up: %v", err)
			}
			if got := reportRemovedIDs(r); !slices.Equal(got, reportRemovedIDs(dry)) {
				t.Fatalf("Up removed %v, dry run said %v", got, reportRemovedIDs(dry))
			}
			if len(r.Duplicates) != len(dry.Duplicates) {
				t.Fatalf("Up found %d groups, dry run %d", len(r.Duplicates), len(dry.Duplicates))
			}
			for i, g := range r.Duplicates {
				if string(g.Kept) != string(dry.Duplicates[i].Kept) || string(g.Key) != string(dry.Duplicates[i].Key) {
					t.Errorf("group %d: kept %s (key %s), dry run kept %s", i, g.Kept, g.Key, dry.Duplicates[i].Kept)
				}
				for _, d := range g.Removed {
					if !slices.ContainsFunc(before, func(b bson.Raw) bool { return string(b) == string(d) }) {
						t.Errorf("report shows removed doc %s that was not stored verbatim", d)
					}
				}
			}
			var want []bson.Raw
			for _, d := range before {
				if !slices.Contains(tc.Removed, d.Lookup("_id").ObjectID()) {
					want = append(want, d)
				}
			}
			after := allDocs(ctx, t, coll)
			if !slices.EqualFunc(want, after, func(a, b bson.Raw) bool { return string(a) == string(b) }) {
				t.Fatalf("after Up:\n got  %v\n want %v", after, want)
			}

			// The unique index exists and rejects a duplicate.
			if spec, ok := indexSpecs(ctx, t, coll)[store.CountsKeyIndex]; !ok || !keyIndex().Matches(spec) {
				t.Fatalf("index %s missing or wrong", store.CountsKeyIndex)
			}
			for _, d := range after {
				dup := bson.D{}
				for _, f := range []string{store.FieldID, store.FieldType, store.FieldTimestamp} {
					if v, err := d.LookupErr(f); err == nil {
						dup = append(dup, bson.E{Key: f, Value: v})
					}
				}
				if _, err := coll.InsertOne(ctx, dup); !mongo.IsDuplicateKeyError(err) {
					t.Fatalf("insert duplicate of %s: err = %v, want E11000", d, err)
				}
			}
		})
	}
}

// naiveKeep picks the document to keep from a group of generated docs, in plain Go.
func naiveKeep(docs []genDoc) genDoc {
	best := docs[0]
	for _, d := range docs[1:] {
		switch {
		case d.Version != best.Version:
			if d.Version > best.Version {
				best = d
			}
		case !d.WrittenAt.Equal(best.WrittenAt):
			if d.WrittenAt.After(best.WrittenAt) {
				best = d
			}
		case d.ID.Hex() > best.ID.Hex():
			best = d
		}
	}
	return best
}

type genDoc struct {
	ID        bson.ObjectID `bson:"_id"`
	NodeID    string        `bson:"id"`
	Type      string        `bson:"type"`
	Timestamp time.Time     `bson:"timestamp"`
	Version   int64         `bson:"version"`
	WrittenAt time.Time     `bson:"written_at"`
	Online    int64         `bson:"online"`
}

// TestDuplicateResolutionRandom cross-checks step 1 against naiveKeep on random collections
// with small key, version and time spaces so that every tie-break is exercised.
func TestDuplicateResolutionRandom(t *testing.T) {
	srv := embeddedtest.Start(t)
	client := srv.Client(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			ctx := testCtx(t)
			db := srv.Database(t, client)
			coll := db.Collection(store.CountsCollection)
			n := 50 + rng.IntN(150)
			groups := map[string][]genDoc{}
			docs := make([]any, n)
			for i := range n {
				var oid bson.ObjectID
				oid[10], oid[11] = byte(i>>8), byte(i)
				oid[0] = byte(rng.IntN(4)) // shuffle _id order against insertion order
				d := genDoc{
					ID:        oid,
					NodeID:    fmt.Sprintf("n%d", rng.IntN(6)),
					Type:      []string{"server", "game"}[rng.IntN(2)],
					Timestamp: base.Add(time.Duration(rng.IntN(3)) * 5 * time.Minute),
					Version:   int64(rng.IntN(3)),
					WrittenAt: base.Add(time.Duration(rng.IntN(3)) * time.Millisecond),
					Online:    int64(i),
				}
				docs[i] = d
				k := d.NodeID + "|" + d.Type + "|" + d.Timestamp.String()
				groups[k] = append(groups[k], d)
			}
			if _, err := coll.InsertMany(ctx, docs); err != nil {
				t.Fatal(err)
			}
			r, err := newTestMigrator(t, db).Up(ctx, UpOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var wantKeep []bson.ObjectID
			wantRemoved := 0
			for _, g := range groups {
				wantKeep = append(wantKeep, naiveKeep(g).ID)
				wantRemoved += len(g) - 1
			}
			var got []genDoc
			cur, err := coll.Find(ctx, bson.D{})
			if err != nil {
				t.Fatal(err)
			}
			if err := cur.All(ctx, &got); err != nil {
				t.Fatal(err)
			}
			gotKeep := make([]bson.ObjectID, len(got))
			for i, d := range got {
				gotKeep[i] = d.ID
			}
			cmp := func(a, b bson.ObjectID) int { return strings.Compare(a.Hex(), b.Hex()) }
			slices.SortFunc(wantKeep, cmp)
			slices.SortFunc(gotKeep, cmp)
			if !slices.Equal(gotKeep, wantKeep) {
				t.Fatalf("kept %v\nwant %v", gotKeep, wantKeep)
			}
			if r.RemovedCount() != wantRemoved {
				t.Fatalf("report removed %d, want %d", r.RemovedCount(), wantRemoved)
			}
		})
	}
}

// keyIndex is store's definition of the unique key index.
func keyIndex() store.Index { return mustIndex(store.CountsCollection, store.CountsKeyIndex) }

// TestIndexConflict: a non-unique index with the unique index's name (what an older
// deployment that created {id: 1, type: 1, timestamp: 1} without options has) is dropped and
// rebuilt unique by step 1, after its duplicates are resolved; a dry run only says so.
func TestIndexConflict(t *testing.T) {
	ctx := testCtx(t)
	db := newDB(t)
	coll := db.Collection(store.CountsCollection)
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: store.CountsKey(), Options: options.Index().SetName(store.CountsKeyIndex)})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for v := range 2 {
		if _, err := coll.InsertOne(ctx, genDoc{ID: bson.NewObjectID(), NodeID: "n", Type: "server", Timestamp: ts, Version: int64(v), WrittenAt: ts}); err != nil {
			t.Fatal(err)
		}
	}
	var ce *IndexConflictError
	if err := CheckSchema(ctx, db); !errors.As(err, &ce) || ce.Name != store.CountsKeyIndex || !strings.Contains(err.Error(), "rollup migrate up") {
		t.Fatalf("CheckSchema = %v, want *IndexConflictError telling how to fix it", err)
	}
	dry, err := newTestMigrator(t, db).Up(ctx, UpOptions{DryRun: true})
	if err != nil || len(dry.Dropped) != 1 || dry.Dropped[0].Name != store.CountsKeyIndex || dry.RemovedCount() != 1 {
		t.Fatalf("dry run = %+v, %v; want the index to drop and 1 duplicate", dry, err)
	}
	var out strings.Builder
	if err := dry.Format(&out); err != nil || !strings.Contains(out.String(), "would drop index id_1_type_1_timestamp_1 on counts") {
		t.Fatalf("dry run report:\n%s", out.String())
	}
	if spec := indexSpecs(ctx, t, coll)[store.CountsKeyIndex]; keyIndex().Matches(spec) {
		t.Fatal("the dry run changed the index")
	}
	r, err := newTestMigrator(t, db).Up(ctx, UpOptions{})
	if err != nil || len(r.Dropped) != 1 || r.RemovedCount() != 1 {
		t.Fatalf("Up = %+v, %v; want the index dropped, 1 duplicate removed", r, err)
	}
	if spec, ok := indexSpecs(ctx, t, coll)[store.CountsKeyIndex]; !ok || !keyIndex().Matches(spec) {
		t.Fatalf("index after Up: %v", spec)
	}
	if err := CheckSchema(ctx, db); err != nil {
		t.Fatalf("CheckSchema after Up = %v", err)
	}
	if lockPresent(ctx, t, db) {
		t.Fatal("Up left the lock")
	}
}

// TestDriftRepair: indexes of applied steps that are dropped or redefined are schema drift:
// Drift names them with their step, a dry run shows the repair, Up repairs them (step 1
// resolving the duplicates written meanwhile) and a second Up finds nothing to do.
func TestDriftRepair(t *testing.T) {
	ctx := testCtx(t)
	db := newDB(t)
	m := newTestMigrator(t, db)
	if _, err := m.Up(ctx, UpOptions{}); err != nil {
		t.Fatal(err)
	}
	if d, err := m.Drift(ctx); err != nil || len(d) != 0 {
		t.Fatalf("Drift after Up = %v, %v", d, err)
	}
	counts := db.Collection(store.CountsCollection)
	if err := counts.Indexes().DropOne(ctx, store.CountsKeyIndex); err != nil {
		t.Fatal(err)
	}
	if err := counts.Indexes().DropOne(ctx, store.CountsWrittenAtIndex); err != nil {
		t.Fatal(err)
	}
	// written_at_1 comes back unique: another definition.
	if _, err := counts.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: store.FieldWrittenAt, Value: 1}},
		Options: options.Index().SetName(store.CountsWrittenAtIndex).SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	older, newer := bson.NewObjectID(), bson.NewObjectID()
	for i, id := range []bson.ObjectID{older, newer} {
		if _, err := counts.InsertOne(ctx, genDoc{ID: id, NodeID: "n", Type: "server", Timestamp: ts, Version: int64(i), WrittenAt: ts.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	drift, err := m.Drift(ctx)
	if err != nil || len(drift) != 2 {
		t.Fatalf("Drift = %v, %v; want 2", drift, err)
	}
	if d := drift[0]; d.Version != 1 || !d.Drift.Missing || !strings.Contains(d.String(), "index id_1_type_1_timestamp_1 on counts is missing") ||
		!strings.Contains(d.String(), "rollup migrate up") {
		t.Errorf("drift[0] = %s", d)
	}
	if d := drift[1]; d.Version != 5 || d.Drift.Missing || !strings.Contains(d.String(), "index written_at_1 on counts has another definition") {
		t.Errorf("drift[1] = %s", d)
	}
	if pending, err := m.Pending(ctx); err != nil || pending != 0 {
		t.Fatalf("Pending = %d, %v: drift is no pending step", pending, err)
	}
	dry, err := m.Up(ctx, UpOptions{DryRun: true})
	if err != nil || len(dry.Repaired) != 2 || dry.RemovedCount() != 1 || len(dry.Dropped) != 1 {
		t.Fatalf("dry run = %+v, %v", dry, err)
	}
	if d, _ := m.Drift(ctx); len(d) != 2 {
		t.Fatalf("the dry run repaired: %v", d)
	}
	r, err := m.Up(ctx, UpOptions{})
	if err != nil || len(r.Repaired) != 2 || r.RemovedCount() != 1 || r.UpToDate() {
		t.Fatalf("Up = %+v, %v", r, err)
	}
	var out strings.Builder
	if err := r.Format(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"schema drift: index id_1_type_1_timestamp_1 on counts is missing",
		"repaired: ran step 1 counts: resolve duplicate keys, unique index id_1_type_1_timestamp_1 again",
		"schema drift: index written_at_1 on counts has another definition",
		"dropped index written_at_1 on counts",
		"removed: _id=" + older.Hex(),
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if d, err := m.Drift(ctx); err != nil || len(d) != 0 {
		t.Fatalf("Drift after the repair = %v, %v", d, err)
	}
	if err := CheckSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	if again, err := m.Up(ctx, UpOptions{}); err != nil || !again.UpToDate() {
		t.Fatalf("second Up = %+v, %v", again, err)
	}
}

// TestCheckSchema: after Up the schema holds; a dropped unique index is a permanent
// SchemaError telling the operator how to rebuild it.
func TestCheckSchema(t *testing.T) {
	ctx := testCtx(t)
	db := newDB(t)
	if _, err := newTestMigrator(t, db).Up(ctx, UpOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := CheckSchema(ctx, db); err != nil {
		t.Fatalf("CheckSchema after Up = %v", err)
	}
	if err := db.Collection(store.CountsCollection).Indexes().DropOne(ctx, store.CountsKeyIndex); err != nil {
		t.Fatal(err)
	}
	err := CheckSchema(ctx, db)
	var se *SchemaError
	if !errors.As(err, &se) || !se.Permanent() || !strings.Contains(err.Error(), "rollup migrate up") {
		t.Fatalf("CheckSchema without the index = %v, want a *SchemaError with the fix", err)
	}
	if _, err := db.Collection(store.CountsCollection).Indexes().CreateOne(ctx, mongo.IndexModel{Keys: store.CountsKey(), Options: options.Index().SetName(store.CountsKeyIndex)}); err != nil {
		t.Fatal(err)
	}
	var ce *IndexConflictError
	if err := CheckSchema(ctx, db); !errors.As(err, &ce) || !ce.Permanent() {
		t.Fatalf("CheckSchema with a non-unique index = %v, want *IndexConflictError", err)
	}
}

// TestGuardedDeleteLeavesChangedDocs changes a document between the scan and the delete: it
// must stay, and the step must report ErrDuplicatesChanged instead of building the index.
func TestGuardedDeleteLeavesChangedDocs(t *testing.T) {
	ctx := testCtx(t)
	db := newDB(t)
	coll := db.Collection(store.CountsCollection)
	ts := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var docs []any
	for i := range 6 {
		docs = append(docs, genDoc{ID: bson.NewObjectID(), NodeID: fmt.Sprint("n", i%2), Type: "server", Timestamp: ts, Version: int64(i), WrittenAt: ts})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	groups, err := findDuplicates(ctx, coll)
	if err != nil || len(groups) != 2 || len(groups[0].Removed) != 2 {
		t.Fatalf("findDuplicates = %d groups, %v", len(groups), err)
	}
	changed := groups[0].Removed[0].Lookup("_id")
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: changed}}, bson.D{{Key: "$set", Value: bson.D{{Key: store.FieldVersion, Value: int64(99)}}}}); err != nil {
		t.Fatal(err)
	}
	removed, err := removeDuplicates(ctx, coll, groups)
	if !errors.Is(err, ErrDuplicatesChanged) {
		t.Fatalf("removeDuplicates err = %v, want ErrDuplicatesChanged", err)
	}
	n := 0
	for _, g := range removed {
		for _, d := range g.Removed {
			n++
			if d.Lookup("_id").Equal(changed) {
				t.Fatal("changed doc reported as removed")
			}
		}
	}
	if n != 3 {
		t.Fatalf("reported %d removed, want 3", n)
	}
	if c, err := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: changed}}); err != nil || c != 1 {
		t.Fatalf("changed doc count = %d, %v; want it kept", c, err)
	}
	// A rerun resolves the group again: the changed doc is now the newest.
	r, err := newTestMigrator(t, db).Up(ctx, UpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Duplicates) != 1 || !r.Duplicates[0].Kept.Lookup("_id").Equal(changed) {
		t.Fatalf("rerun report = %+v, want the changed doc kept", r.Duplicates)
	}
}

// countingSteps wraps Steps so each step counts its runs and may block until release closes.
func countingSteps(runs []atomic.Int32, started chan<- int, release <-chan struct{}) []Step {
	steps := Steps()
	for i := range steps {
		up := steps[i].Up
		steps[i].Up = func(ctx context.Context, db *mongo.Database, r *Report) error {
			runs[i].Add(1)
			if i == 0 && started != nil {
				started <- i
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return up(ctx, db, r)
		}
	}
	return steps
}

// TestConcurrentUp runs several instances' Up at once: while the first holds the lock (its
// step 1 blocked) the others must be waiting, and each step must run exactly once.
func TestConcurrentUp(t *testing.T) {
	ctx := testCtx(t)
	srv := embeddedtest.Start(t)
	const instances = 4
	runs := make([]atomic.Int32, len(Steps()))
	started := make(chan int, instances)
	release := make(chan struct{})
	migs := make([]*Migrator, instances)
	logs := make([]*observer.ObservedLogs, instances)
	name := srv.Database(t, srv.Client(t)).Name()
	for i := range migs {
		db := srv.Client(t).Database(name) // one client per instance, as separate processes
		core, obs := observer.New(zapcore.InfoLevel)
		migs[i] = New(db, zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core())))
		migs[i].poll = 5 * time.Millisecond
		migs[i].steps = countingSteps(runs, started, release)
		logs[i] = obs
	}
	type result struct {
		r   Report
		err error
	}
	results := make([]result, instances)
	var wg sync.WaitGroup
	for i, m := range migs {
		wg.Go(func() {
			r, err := m.Up(ctx, UpOptions{})
			results[i] = result{r, err}
		})
	}
	// Exactly one instance enters step 1; wait until all the others are waiting for its lock.
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("no instance started step 1")
	}
	deadline := testctx.Deadline(t)
	for {
		waiting := 0
		for _, l := range logs {
			if l.FilterMessage("waiting for migration lock").Len() > 0 {
				waiting++
			}
		}
		if waiting == instances-1 {
			break
		}
		if time.Now().After(deadline) {
			close(release)
			wg.Wait()
			t.Fatalf("%d of %d other instances waiting for the lock", waiting, instances-1)
		}
		select {
		case <-started:
			close(release)
			wg.Wait()
			t.Fatal("a second instance entered step 1 while the first held the lock")
		case <-time.After(5 * time.Millisecond):
		}
	}
	close(release)
	wg.Wait()
	applied := 0
	for i, res := range results {
		if res.err != nil {
			t.Fatalf("instance %d: %v", i, res.err)
		}
		applied += len(res.r.Applied)
	}
	for v := range runs {
		if n := runs[v].Load(); n != 1 {
			t.Errorf("step %d ran %d times, want 1", v+1, n)
		}
	}
	if applied != len(Steps()) {
		t.Fatalf("reports show %d applied steps in total, want %d", applied, len(Steps()))
	}
}

func TestLockHeldByAnother(t *testing.T) {
	ctx := testCtx(t)
	db := newDB(t)
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	if _, err := db.Collection(store.LockCollection).InsertOne(ctx, lockDoc{ID: lockID, Owner: "other-host/42/abcd", AcquiredAt: time.Now(), ExpiresAt: expires}); err != nil {
		t.Fatal(err)
	}
	m := newTestMigrator(t, db)
	for _, wait := range []time.Duration{-1, 50 * time.Millisecond} {
		start := time.Now()
		_, err := m.Up(ctx, UpOptions{LockWait: wait})
		var held *LockHeldError
		if !errors.As(err, &held) || !errors.Is(err, ErrLocked) {
			t.Fatalf("wait %s: Up = %v, want *LockHeldError", wait, err)
		}
		if held.Owner != "other-host/42/abcd" || !held.ExpiresAt.Equal(expires) || !strings.Contains(err.Error(), "other-host/42/abcd") {
			t.Fatalf("wait %s: error %+v does not name the owner and expiry", wait, held)
		}
		if wait > 0 && time.Since(start) < wait {
			t.Fatalf("gave up after %s, before the %s wait", time.Since(start), wait)
		}
	}
	if n, err := m.Pending(ctx); err != nil || n != len(Steps()) {
		t.Fatalf("pending = %d, %v: steps ran without the lock", n, err)
	}
	// ctx cancellation ends the wait too.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Up(cctx, UpOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Up with cancelled ctx = %v", err)
	}
	// The foreign lock is untouched.
	var d lockDoc
	if err := db.Collection(store.LockCollection).FindOne(ctx, bson.D{}).Decode(&d); err != nil || d.Owner != "other-host/42/abcd" {
		t.Fatalf("lock = %+v, %v", d, err)
	}
}

func TestExpiredLockIsTakenOver(t *testing.T) {
	ctx := testCtx(t)
	db := newDB(t)
	if _, err := db.Collection(store.LockCollection).InsertOne(ctx, lockDoc{ID: lockID, Owner: "crashed", AcquiredAt: time.Now().Add(-time.Hour), ExpiresAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	r, err := newTestMigrator(t, db).Up(ctx, UpOptions{LockWait: -1})
	if err != nil || len(r.Applied) != len(Steps()) {
		t.Fatalf("Up = %+v, %v", r, err)
	}
	if lockPresent(ctx, t, db) {
		t.Fatal("lock not released")
	}
}

// TestCrashMidStep makes step 2 fail once: the first Up keeps step 1, releases the lock and
// fails; the rerun finishes.
func TestCrashMidStep(t *testing.T) {
	ctx := testCtx(t)
	db := newDB(t)
	m := newTestMigrator(t, db)
	var calls atomic.Int32
	boom := errors.New("boom")
	up2 := m.steps[1].Up
	m.steps[1].Up = func(ctx context.Context, db *mongo.Database, r *Report) error {
		if calls.Add(1) == 1 {
			if err := up2(ctx, db, r); err != nil { // half done, then crash
				return err
			}
			return boom
		}
		return up2(ctx, db, r)
	}
	r, err := m.Up(ctx, UpOptions{})
	if !errors.Is(err, boom) || len(r.Applied) != 1 {
		t.Fatalf("first Up = %+v, %v; want step 1 applied then boom", r, err)
	}
	st, err := m.Status(ctx)
	if err != nil || !st[0].Applied || st[1].Applied || st[2].Applied {
		t.Fatalf("status after failure = %+v, %v", st, err)
	}
	if lockPresent(ctx, t, db) {
		t.Fatal("failed Up left the lock")
	}
	r, err = m.Up(ctx, UpOptions{})
	if err != nil || len(r.Applied) != len(Steps())-1 || r.Applied[0].Version != 2 {
		t.Fatalf("rerun = %+v, %v; want every step from 2 on", r, err)
	}
	if n, err := m.Pending(ctx); err != nil || n != 0 {
		t.Fatalf("pending = %d, %v", n, err)
	}
}

// TestLockRenewedDuringLongStep runs a step longer than the TTL: the lock must be renewed (its
// expiry moves) and stay held against another instance the whole time.
func TestLockRenewedDuringLongStep(t *testing.T) {
	ctx := testCtx(t)
	db := newDB(t)
	m := newTestMigrator(t, db)
	m.ttl = 400 * time.Millisecond // renewed every ~133ms; generous for a loaded 2-core machine
	other := newTestMigrator(t, db)
	lockColl := db.Collection(store.LockCollection)
	m.steps = m.steps[:1]
	m.steps[0].Up = func(ctx context.Context, _ *mongo.Database, _ *Report) error {
		var seen []time.Time
		deadline := testctx.Deadline(t)
		for len(seen) < 4 {
			if time.Now().After(deadline) {
				return fmt.Errorf("lock expiry moved %d times", len(seen)-1)
			}
			var d lockDoc
			if err := lockColl.FindOne(ctx, bson.D{}).Decode(&d); err != nil {
				return err
			}
			if d.Owner != m.owner {
				return fmt.Errorf("lock owner %q", d.Owner)
			}
			if len(seen) == 0 || !d.ExpiresAt.Equal(seen[len(seen)-1]) {
				seen = append(seen, d.ExpiresAt)
				_, err := other.Up(ctx, UpOptions{LockWait: -1})
				if err == nil {
					return errors.New("another instance's Up ran while the lock was held")
				}
				if !errors.Is(err, ErrLocked) {
					return fmt.Errorf("another instance's Up: %w, want ErrLocked", err)
				}
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond): // poll interval
			}
		}
		return nil
	}
	if _, err := m.Up(ctx, UpOptions{}); err != nil {
		t.Fatal(err)
	}
	if lockPresent(ctx, t, db) {
		t.Fatal("lock not released")
	}
}

// TestLockLost steals the lock during a step: Up cancels the step and fails with ErrLockLost.
func TestLockLost(t *testing.T) {
	ctx := testCtx(t)
	db := newDB(t)
	m := newTestMigrator(t, db)
	m.ttl = 60 * time.Millisecond
	m.steps = m.steps[:1]
	m.steps[0].Up = func(ctx context.Context, db *mongo.Database, _ *Report) error {
		_, err := db.Collection(store.LockCollection).UpdateOne(ctx, bson.D{{Key: "_id", Value: lockID}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: "thief"}}}})
		if err != nil {
			return err
		}
		<-ctx.Done() // the renewal notices and cancels; testCtx bounds it
		return ctx.Err()
	}
	_, err := m.Up(ctx, UpOptions{})
	if !errors.Is(err, ErrLockLost) {
		t.Fatalf("Up = %v, want ErrLockLost", err)
	}
	if n, err := m.Pending(ctx); err != nil || n != 1 {
		t.Fatalf("pending = %d, %v", n, err)
	}
	var d lockDoc
	if err := db.Collection(store.LockCollection).FindOne(ctx, bson.D{}).Decode(&d); err != nil || d.Owner != "thief" {
		t.Fatalf("the thief's lock = %+v, %v; must not be released by the loser", d, err)
	}
}

func TestReportFormat(t *testing.T) {
	raw := func(d bson.D) bson.Raw {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ts := time.Date(2024, 1, 1, 0, 5, 0, 0, time.UTC)
	oid := func(b byte) bson.ObjectID { var o bson.ObjectID; o[11] = b; return o }
	dup := DuplicateGroup{
		Key:     raw(bson.D{{Key: "id", Value: "srv-1"}, {Key: "type", Value: "server"}, {Key: "timestamp", Value: ts}}),
		Kept:    raw(bson.D{{Key: "_id", Value: oid(2)}, {Key: "version", Value: int64(5)}, {Key: "online", Value: int64(7)}}),
		Removed: []bson.Raw{raw(bson.D{{Key: "_id", Value: oid(1)}, {Key: "version", Value: int32(3)}, {Key: "online", Value: 4.5}})},
	}
	tests := []struct {
		name string
		r    Report
		want []string
	}{
		{"up to date", Report{}, []string{"up to date"}},
		{"applied", Report{Applied: []StepResult{{Version: 1, Name: "counts", Took: 1500 * time.Microsecond}}, Duplicates: []DuplicateGroup{dup}},
			[]string{"applied step 1 counts (2ms)", "groups in counts: 1; documents removed: 1",
				`id="srv-1" type="server" timestamp=2024-01-01T00:05:00Z`,
				"kept:    _id=000000000000000000000002 version=5 written_at=missing online=7",
				"removed: _id=000000000000000000000001 version=3 written_at=missing online=4.5"}},
		{"dry run", Report{DryRun: true, Applied: []StepResult{{Version: 2, Name: "tokens"}}, Duplicates: []DuplicateGroup{dup}},
			[]string{"dry run: nothing was changed", "would apply step 2 tokens\n", "documents to remove: 1", "would remove: _id=000000000000000000000001"}},
	}
	for _, tc := range tests {
		var b strings.Builder
		if err := tc.r.Format(&b); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: output lacks %q:\n%s", tc.name, w, b.String())
			}
		}
	}
}

// TestStepsAreIdempotent runs every step twice in a row (as a rerun after a crash between the
// step and its record would) and a dry run over the result: nothing fails, nothing changes.
func TestStepsAreIdempotent(t *testing.T) {
	ctx := testCtx(t)
	db := newDB(t)
	ts := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := db.Collection(store.CountsCollection).InsertMany(ctx, []any{
		genDoc{ID: bson.NewObjectID(), NodeID: "a", Type: "server", Timestamp: ts, Version: 1},
		genDoc{ID: bson.NewObjectID(), NodeID: "a", Type: "server", Timestamp: ts, Version: 2},
	}); err != nil {
		t.Fatal(err)
	}
	for _, s := range Steps() {
		for run := range 2 {
			var r Report
			if err := s.Up(ctx, db, &r); err != nil {
				t.Fatalf("step %d run %d: %v", s.Version, run, err)
			}
			if s.Version == 1 && len(r.Duplicates) != 1-run {
				t.Fatalf("step 1 run %d reported %d duplicate groups", run, len(r.Duplicates))
			}
		}
	}
	before := allDocs(ctx, t, db.Collection(store.CountsCollection))
	for _, s := range Steps() {
		r := Report{DryRun: true}
		if err := s.Up(ctx, db, &r); err != nil || len(r.Duplicates) != 0 {
			t.Fatalf("dry run of step %d over a migrated db: %+v, %v", s.Version, r, err)
		}
	}
	if after := allDocs(ctx, t, db.Collection(store.CountsCollection)); len(after) != 1 || len(before) != 1 {
		t.Fatalf("counts: %d docs before dry runs, %d after; want 1", len(before), len(after))
	}
}

// TestSummaryDuplicates: a summaries collection that got duplicate keys while its unique
// index was missing is repaired by `migrate up` (the newest summary of each key kept; the
// dry run only counts them), and the report says how to rebuild them.
func TestSummaryDuplicates(t *testing.T) {
	ctx := testCtx(t)
	db := newDB(t)
	m := newTestMigrator(t, db)
	if _, err := m.Up(ctx, UpOptions{}); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection(store.HourlyCollection)
	if err := coll.Indexes().DropOne(ctx, store.SummaryKeyIndex); err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2024, 1, 1, 3, 0, 0, 0, time.UTC)
	if _, err := coll.InsertMany(ctx, []any{
		genDoc{ID: bson.NewObjectID(), NodeID: "a", Type: "server", Timestamp: ts, Version: 1},
		genDoc{ID: bson.NewObjectID(), NodeID: "a", Type: "server", Timestamp: ts, Version: 3},
		genDoc{ID: bson.NewObjectID(), NodeID: "a", Type: "server", Timestamp: ts, Version: 2},
		genDoc{ID: bson.NewObjectID(), NodeID: "b", Type: "server", Timestamp: ts, Version: 1},
	}); err != nil {
		t.Fatal(err)
	}
	dry, err := m.Up(ctx, UpOptions{DryRun: true})
	if err != nil || dry.SummaryDuplicates[store.HourlyCollection] != 2 || len(allDocs(ctx, t, coll)) != 4 {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	r, err := m.Up(ctx, UpOptions{})
	if err != nil || r.SummaryDuplicates[store.HourlyCollection] != 2 || len(r.Repaired) != 1 || r.Repaired[0].Step.Version != 8 {
		t.Fatalf("repair: %+v, %v", r, err)
	}
	var b strings.Builder
	if err := r.Format(&b); err != nil || !strings.Contains(b.String(), "duplicate summaries in rollups_1h: 2 documents removed") {
		t.Fatalf("report: %q, %v", b.String(), err)
	}
	docs := allDocs(ctx, t, coll)
	if len(docs) != 2 {
		t.Fatalf("%d summaries left, want 2", len(docs))
	}
	for _, d := range docs {
		if id, _ := d.Lookup(store.FieldID).StringValueOK(); id == "a" {
			if v, _ := d.Lookup(store.FieldVersion).AsInt64OK(); v != 3 {
				t.Fatalf("kept version %d of a, want 3", v)
			}
		}
	}
	if d, err := store.CheckIndexes(ctx, db, Catalog()); err != nil || len(d) != 0 {
		t.Fatalf("drift after repair: %v, %v", d, err)
	}
}

// TestCatalog checks the whole catalog: store's indexes and the trees', each named once.
func TestCatalog(t *testing.T) {
	seen := map[string]bool{}
	for _, ix := range Catalog() {
		k := ix.Collection + "." + ix.Name
		if seen[k] {
			t.Errorf("index %s twice in the catalog", k)
		}
		seen[k] = true
	}
	for _, want := range []string{"trees.project_1_effective_from_-1_version_-1", "tree_nodes.project_1_version_1",
		"tree_nodes." + treedb.NodesIDIndex, "counts." + store.CountsKeyIndex, "tokens." + store.TokensProjectIndex} {
		if !seen[want] {
			t.Errorf("catalog lacks %s (has %v)", want, seen)
		}
	}
	for _, ix := range treedb.Indexes() {
		if ix.Name != store.DefaultIndexName(ix.Keys) || ix.Unique {
			t.Errorf("tree index %+v: want a plain index named by the default rule", ix)
		}
	}
}
