package bulk

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/embedded/blackpipe"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a store reached through a black-pipe proxy (coll, for the code under test) and
// directly (check, for seeding, fail points and assertions).
type env struct {
	store  *embeddedtest.Store
	proxy  *blackpipe.Proxy
	direct *mongo.Client
	client *mongo.Client
	coll   *mongo.Collection
	check  *mongo.Collection
}

func newEnv(t testing.TB, clientOpts ...*options.ClientOptions) *env {
	t.Helper()
	srv := embeddedtest.Start(t)
	direct := srv.Client(t)
	db := srv.Database(t, direct)
	check := db.Collection(store.CountsCollection)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := check.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{
			{Key: store.FieldID, Value: 1},
			{Key: store.FieldType, Value: 1},
			{Key: store.FieldTimestamp, Value: 1},
		},
		Options: options.Index().SetUnique(true).SetName(store.CountsKeyIndex),
	})
	if err != nil {
		t.Fatalf("create index: %v", err)
	}

	hosts := options.Client().ApplyURI(srv.URI).Hosts
	p := blackpipe.New(hosts[0], zap.NewNop())
	if err := p.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(context.Background())
	pdone := make(chan error, 1)
	go func() { pdone <- p.Run(pctx) }()
	t.Cleanup(func() {
		pcancel()
		if err := <-pdone; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	ps := &embeddedtest.Store{URI: fmt.Sprintf("mongodb://%s/?directConnection=true", p.Addr())}
	client := ps.Client(t, clientOpts...)
	return &env{
		store:  srv,
		proxy:  p,
		direct: direct,
		client: client,
		coll:   client.Database(db.Name()).Collection(store.CountsCollection),
		check:  check,
	}
}

// failPoint arms failCommand on the update command with data.
func (e *env) failPoint(t testing.TB, mode any, data bson.D) {
	t.Helper()
	e.store.FailPoint(t, e.direct, bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: mode},
		{Key: "data", Value: append(bson.D{{Key: "failCommands", Value: bson.A{"update"}}}, data...)},
	})
}

// startWriter runs a Writer on coll until the test ends.
func startWriter(t testing.TB, coll *mongo.Collection, opts Options) *Writer {
	t.Helper()
	w := New(coll, opts, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("writer: %v", err)
		}
	})
	return w
}

// leafDoc is a stored leaf.
type leafDoc struct {
	ID           string    `bson:"id"`
	Type         string    `bson:"type"`
	Timestamp    time.Time `bson:"timestamp"`
	Project      string    `bson:"project"`
	Online       int64     `bson:"online"`
	Version      int64     `bson:"version"`
	SubmissionID string    `bson:"submission_id"`
}

// leaves returns every stored leaf, sorted by key.
func (e *env) leaves(t testing.TB) []leafDoc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cur, err := e.check.Find(ctx, bson.D{})
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	var docs []leafDoc
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatalf("find: %v", err)
	}
	slices.SortFunc(docs, func(a, b leafDoc) int {
		return cmpKey(Key{a.ID, a.Type, a.Timestamp}, Key{b.ID, b.Type, b.Timestamp})
	})
	return docs
}

// byKey indexes leaves by key and fails the test on a duplicate key.
func byKey(t testing.TB, docs []leafDoc) map[dedupKey]leafDoc {
	t.Helper()
	m := make(map[dedupKey]leafDoc, len(docs))
	for _, d := range docs {
		k := keyOf(Key{d.ID, d.Type, d.Timestamp})
		if _, dup := m[k]; dup {
			t.Fatalf("duplicate document for key %+v", k)
		}
		m[k] = d
	}
	return m
}

func cmpKey(a, b Key) int {
	if a.ID != b.ID {
		if a.ID < b.ID {
			return -1
		}
		return 1
	}
	if a.Type != b.Type {
		if a.Type < b.Type {
			return -1
		}
		return 1
	}
	return a.Timestamp.Compare(b.Timestamp)
}

// seed inserts leaves directly.
func (e *env) seed(t testing.TB, items ...Item) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	docs := make([]any, len(items))
	for i, it := range items {
		docs[i] = leafDoc{ID: it.ID, Type: it.Type, Timestamp: it.Timestamp.UTC(), Project: it.Project,
			Online: it.Online, Version: it.Version, SubmissionID: it.SubmissionID}
	}
	if _, err := e.check.InsertMany(ctx, docs); err != nil {
		t.Fatalf("seed: %v", err)
	}
}

// updateCounts counts the update commands the proxy recorded since its last ResetStats: the
// writer's batches and its probes of the store (an update of _id probeID).
func updateCounts(t testing.TB, p *blackpipe.Proxy) (writes, probes int) {
	t.Helper()
	for _, cmd := range p.Commands("update") {
		var body struct {
			Updates []struct {
				Q bson.M `bson:"q"`
			} `bson:"updates"`
		}
		if err := bson.Unmarshal(cmd, &body); err != nil {
			t.Fatalf("decode update command: %v", err)
		}
		if len(body.Updates) == 1 && body.Updates[0].Q["_id"] == probeID {
			probes++
		} else {
			writes++
		}
	}
	return writes, probes
}

// updateFilters returns the id of each op's q filter of every recorded update command, one
// slice per command.
func updateFilters(t testing.TB, p *blackpipe.Proxy) [][]string {
	t.Helper()
	var out [][]string
	for _, cmd := range p.Commands("update") {
		var body struct {
			Updates []struct {
				Q bson.M `bson:"q"`
			} `bson:"updates"`
		}
		if err := bson.Unmarshal(cmd, &body); err != nil {
			t.Fatalf("decode update command: %v", err)
		}
		if len(body.Updates) == 1 && body.Updates[0].Q["_id"] == probeID {
			continue
		}
		ids := make([]string, len(body.Updates))
		for i, u := range body.Updates {
			ids[i] = fmt.Sprint(u.Q[store.FieldID])
		}
		slices.Sort(ids)
		out = append(out, ids)
	}
	return out
}

// findIDs returns the $in ids of every recorded find on the counts collection (the reads of
// conflicting documents), one sorted slice per command.
func findIDs(t testing.TB, p *blackpipe.Proxy) [][]string {
	t.Helper()
	var out [][]string
	for _, cmd := range p.Commands("find") {
		var body struct {
			Find   string `bson:"find"`
			Filter struct {
				ID struct {
					In []string `bson:"$in"`
				} `bson:"id"`
			} `bson:"filter"`
		}
		if err := bson.Unmarshal(cmd, &body); err != nil {
			t.Fatalf("decode find command: %v", err)
		}
		if body.Find != store.CountsCollection {
			continue
		}
		ids := slices.Clone(body.Filter.ID.In)
		slices.Sort(ids)
		out = append(out, ids)
	}
	return out
}

// updateQs returns the q filters (extended JSON) of the ops of every recorded update command,
// one slice per command, sorted.
func updateQs(t testing.TB, p *blackpipe.Proxy) [][]string {
	t.Helper()
	var out [][]string
	for _, cmd := range p.Commands("update") {
		var body struct {
			Updates []struct {
				Q bson.Raw `bson:"q"`
			} `bson:"updates"`
		}
		if err := bson.Unmarshal(cmd, &body); err != nil {
			t.Fatalf("decode update command: %v", err)
		}
		qs := make([]string, len(body.Updates))
		for i, u := range body.Updates {
			qs[i] = u.Q.String()
		}
		slices.Sort(qs)
		out = append(out, qs)
	}
	return out
}

// guardFilter is the q filter the writer sends for it, as extended JSON.
func guardFilter(t testing.TB, it Item) string {
	t.Helper()
	m, _ := model(nil, it, time.Time{})
	b, err := bson.Marshal(m.(*mongo.UpdateOneModel).Filter)
	if err != nil {
		t.Fatal(err)
	}
	return bson.Raw(b).String()
}

var tick0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// item builds a leaf item for node id at tick0.
func item(id string, online, version int64) Item {
	return Item{Key: Key{ID: id, Type: "server", Timestamp: tick0}, Project: "p", Online: online,
		Version: version, SubmissionID: fmt.Sprintf("s-%s-%d", id, version)}
}

func submit(t testing.TB, w *Writer, items []Item) []Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := w.Submit(ctx, items)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if len(res) != len(items) {
		t.Fatalf("submit: %d results for %d items", len(res), len(items))
	}
	return res
}

func outcomes(res []Result) []Outcome {
	out := make([]Outcome, len(res))
	for i, r := range res {
		out[i] = r.Outcome
	}
	return out
}
