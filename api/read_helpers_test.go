package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// rt0 is the first tick of the read tests' data; readNow is their server clock.
var (
	rt0     = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	readNow = rt0.Add(48 * time.Hour).Add(90 * time.Second)
)

const rtick = tree.DefaultTick

// readStack is the read API over the embedded server: a migrated database, a tree store and
// the API over real HTTP.
type readStack struct {
	ctx   context.Context
	db    *mongo.Database
	trees *treedb.Store
	url   string
	http  *http.Client
}

func newReadStack(tb testing.TB, log *zap.Logger) *readStack {
	tb.Helper()
	mongod := embeddedtest.Start(tb)
	db := mongod.Database(tb, mongod.Client(tb))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	tb.Cleanup(cancel)
	if _, err := migrations.New(db, zap.NewNop()).Up(ctx, migrations.UpOptions{}); err != nil {
		tb.Fatalf("migrate: %v", err)
	}
	srv := api.NewServer(api.Config{DB: db, Logger: log, TokenCacheTTL: time.Nanosecond, Now: func() time.Time { return readNow }})
	ts := httptest.NewServer(srv.Handler())
	tb.Cleanup(ts.Close)
	return &readStack{ctx: ctx, db: db, trees: treedb.New(db), url: ts.URL, http: ts.Client()}
}

// token creates a token of scope ingest or read.
func (s *readStack) token(tb testing.TB, project string, read bool) string {
	tb.Helper()
	create := api.CreateToken
	if read {
		create = api.CreateReadToken
	}
	tok, err := create(s.ctx, s.db, project, "test")
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// get sends GET path?query with token and returns the status and body.
func (s *readStack) get(tb testing.TB, token, path string, q url.Values) (int, []byte) {
	tb.Helper()
	u := s.url + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, u, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		tb.Fatalf("GET %s: Content-Type %q (%d %s)", u, ct, resp.StatusCode, body)
	}
	return resp.StatusCode, body
}

// getOK is get that must answer 200, decoded strictly into out.
func (s *readStack) getOK(tb testing.TB, token, path string, q url.Values, out any) {
	tb.Helper()
	status, body := s.get(tb, token, path, q)
	if status != http.StatusOK {
		tb.Fatalf("GET %s?%s = %d %s", path, q.Encode(), status, body)
	}
	decodeStrict(tb, body, out)
}

// getErr is get that must answer status with error code code, naming field when not "".
func (s *readStack) getErr(tb testing.TB, token, path string, q url.Values, status int, code, field string) apiv1.ErrorResponse {
	tb.Helper()
	got, body := s.get(tb, token, path, q)
	var e apiv1.ErrorResponse
	decodeStrict(tb, body, &e)
	if got != status || e.Error != code || e.Message == "" {
		tb.Fatalf("GET %s?%s = %d %s; want %d %s", path, q.Encode(), got, body, status, code)
	}
	if field != "" && (len(e.Errors) != 1 || e.Errors[0].Field != field) {
		tb.Fatalf("GET %s?%s: errors %+v, want one naming %q", path, q.Encode(), e.Errors, field)
	}
	return e
}

func decodeStrict(tb testing.TB, body []byte, out any) {
	tb.Helper()
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		tb.Fatalf("decode %s: %v", body, err)
	}
}

// world is the test's model of a project: tree versions and the leaves reported per tick.
// write stores it as the watcher would: leaf documents, and every parent with a reported leaf
// under it through rollup.Parent.Update.
type world struct {
	project  string
	versions []worldVersion // by effective time
	// leaves[tick][id] is the online of a reported leaf (ids outside the tree are orphans).
	leaves map[time.Time]map[string]int64
	// noParents lists ticks whose parents are not written (the watcher is behind).
	noParents map[time.Time]bool
}

type worldVersion struct {
	from    time.Time
	version int
	tree    *tree.Tree
}

func newWorld(project string) *world {
	return &world{project: project, leaves: map[time.Time]map[string]int64{}, noParents: map[time.Time]bool{}}
}

// importTree imports nodes effective from from.
func (w *world) importTree(tb testing.TB, s *readStack, nodes []tree.Node, from time.Time) {
	tb.Helper()
	v, err := s.trees.Import(s.ctx, w.project, nodes, from)
	if err != nil {
		tb.Fatal(err)
	}
	tr, err := tree.Build(w.project, nodes)
	if err != nil {
		tb.Fatal(err)
	}
	w.versions = append(w.versions, worldVersion{from: from, version: v, tree: tr})
}

// at returns the tree version of tick t (nil when none).
func (w *world) at(t time.Time) *worldVersion {
	var out *worldVersion
	for i := range w.versions {
		if !w.versions[i].from.After(t) {
			out = &w.versions[i]
		}
	}
	return out
}

func (w *world) set(t time.Time, id string, online int64) {
	if w.leaves[t] == nil {
		w.leaves[t] = map[string]int64{}
	}
	w.leaves[t][id] = online
}

// total is the naive value of node at t: the sum over the reported leaves under it, how many
// reported and how many the tree has.
func (w *world) total(t time.Time, node string) (online, reported, expected int64) {
	v := w.at(t)
	if v == nil || !v.tree.Has(node) {
		return 0, 0, 0
	}
	var walk func(id string)
	walk = func(id string) {
		if v.tree.IsLeaf(id) {
			expected++
			if o, ok := w.leaves[t][id]; ok {
				online += o
				reported++
			}
			return
		}
		for _, c := range v.tree.Children(id) {
			walk(c.ID)
		}
	}
	walk(node)
	return online, reported, expected
}

// write stores every tick of the world.
func (w *world) write(tb testing.TB, s *readStack) {
	tb.Helper()
	var models []mongo.WriteModel
	for t, leaves := range w.leaves {
		v := w.at(t)
		for id, online := range leaves {
			typ := tree.TypeProcess
			if v != nil {
				if nd, ok := v.tree.Node(id); ok {
					typ = nd.Type
				}
			}
			models = append(models, mongo.NewUpdateOneModel().SetUpsert(true).
				SetFilter(bson.D{{Key: "id", Value: id}, {Key: "type", Value: typ}, {Key: "timestamp", Value: t}}).
				SetUpdate(bson.D{{Key: "$set", Value: bson.D{
					{Key: "project", Value: w.project}, {Key: "online", Value: online}, {Key: "version", Value: int64(1)},
					{Key: "submission_id", Value: "sub"}, {Key: "written_at", Value: t},
				}}}))
		}
		if v == nil || w.noParents[t] {
			continue
		}
		for _, nd := range v.tree.Nodes() {
			if v.tree.IsLeaf(nd.ID) {
				continue
			}
			p := rollup.Parent{ID: nd.ID, Type: nd.Type, Project: w.project, Timestamp: t, Rev: 1,
				TreeVersion: v.version, Children: map[string]rollup.ChildState{}}
			p.Online, p.Reported, p.Expected = w.total(t, nd.ID)
			if p.Reported == 0 {
				continue // a parent without any reported leaf is never created
			}
			for _, c := range v.tree.Children(nd.ID) {
				online, reported, expected := w.total(t, c.ID)
				if reported > 0 {
					p.Children[c.ID] = rollup.ChildState{Type: c.Type, Online: online, Version: 1, Reported: reported, Expected: expected}
				}
			}
			models = append(models, mongo.NewUpdateOneModel().SetUpsert(true).
				SetFilter(bson.D{{Key: "id", Value: nd.ID}, {Key: "type", Value: nd.Type}, {Key: "timestamp", Value: t}}).
				SetUpdate(store.ParentUpdate(p, t)))
		}
	}
	for len(models) > 0 {
		n := min(len(models), 5000)
		if _, err := s.db.Collection(store.CountsCollection).BulkWrite(s.ctx, models[:n], options.BulkWrite().SetOrdered(false)); err != nil {
			tb.Fatalf("write world: %v", err)
		}
		models = models[n:]
	}
}
