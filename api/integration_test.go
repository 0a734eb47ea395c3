package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// stack is the whole ingest path against the embedded server: migrated database, bulk
// writer, API over real HTTP.
type stack struct {
	db   *mongo.Database
	url  string
	http *http.Client
}

func newStack(t *testing.T) *stack {
	t.Helper()
	mongod := embeddedtest.Start(t)
	client := mongod.Client(t)
	db := mongod.Database(t, client)
	log := zaptest.NewLogger(t)
	if _, err := migrations.New(db, log).Up(testctx.Context(t), migrations.UpOptions{}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	w := bulk.New(db.Collection(store.CountsCollection), bulk.Options{MaxDelay: 2 * time.Millisecond}, log)
	wctx, wcancel := context.WithCancel(context.Background())
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	t.Cleanup(func() {
		wcancel()
		if err := <-wdone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("bulk writer: %v", err)
		}
	})
	srv := api.NewServer(api.Config{DB: db, Sink: w, Logger: log, TokenCacheTTL: time.Nanosecond})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &stack{db: db, url: ts.URL, http: ts.Client()}
}

func (s *stack) client(t *testing.T, token string) *agentclient.Client {
	return &agentclient.Client{BaseURL: s.url, Token: token, HTTP: s.http, Logger: zaptest.NewLogger(t), MaxAttempts: 2, BaseDelay: time.Millisecond}
}

type leafDoc struct {
	ID           string    `bson:"id"`
	Type         string    `bson:"type"`
	Timestamp    time.Time `bson:"timestamp"`
	Project      string    `bson:"project"`
	Online       int64     `bson:"online"`
	Version      int64     `bson:"version"`
	SubmissionID string    `bson:"submission_id"`
	WrittenAt    time.Time `bson:"written_at"`
}

func (s *stack) leaves(t *testing.T) map[[2]string]leafDoc {
	t.Helper()
	ctx := testctx.Context(t)
	cur, err := s.db.Collection(store.CountsCollection).Find(ctx, bson.D{}, options.Find())
	if err != nil {
		t.Fatal(err)
	}
	var docs []leafDoc
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	out := map[[2]string]leafDoc{}
	for _, d := range docs {
		k := [2]string{d.ID, d.Type}
		if _, dup := out[k]; dup {
			t.Fatalf("duplicate document for %v", k)
		}
		out[k] = d
	}
	return out
}

func statuses(r *agentclient.Response) []apiv1.Status {
	out := make([]apiv1.Status, len(r.Items))
	for i, it := range r.Items {
		out[i] = it.Status
	}
	return out
}

// TestIngestEndToEnd: agent client → HTTP → API → bulk.Writer → embedded server; documents
// present with the right values; a resend is stale; the newest observation wins in any order.
func TestIngestEndToEnd(t *testing.T) {
	s := newStack(t)
	ctx := testctx.Context(t)
	token, err := api.CreateToken(ctx, s.db, "proj-a", "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	c := s.client(t, token)
	now := time.Now()
	tick := tree.AlignTick(now, tree.DefaultTick)
	sub := agentclient.Submission{
		Project: "proj-a", Timestamp: tick, ObservedAt: now, SubmissionID: "sub-1",
		Counts: []agentclient.Count{{ID: "srv-1", Type: "proc", Online: 3}, {ID: "srv-2", Type: "proc", Online: 0}, {ID: "srv-1", Type: "players", Online: 250}},
	}
	resp, err := c.Submit(ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Summary != (apiv1.Summary{Applied: 3}) {
		t.Fatalf("first submit: %+v", resp)
	}
	got := s.leaves(t)
	if len(got) != 3 {
		t.Fatalf("%d documents, want 3", len(got))
	}
	for _, cnt := range sub.Counts {
		d := got[[2]string{cnt.ID, cnt.Type}]
		if d.Online != cnt.Online || d.Version != now.UnixNano() || d.Project != "proj-a" || d.SubmissionID != "sub-1" ||
			!d.Timestamp.Equal(tick) || d.WrittenAt.IsZero() {
			t.Errorf("document %+v for %+v", d, cnt)
		}
	}

	// A resend of the same submission (same observed_at) changes nothing and reports stale.
	resp, err = c.Submit(ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Summary != (apiv1.Summary{Stale: 3}) {
		t.Fatalf("resend: %+v", statuses(resp))
	}

	// A newer observation applies; an older one arriving after it is stale.
	newer := sub
	newer.SubmissionID, newer.ObservedAt = "sub-3", now.Add(2*time.Second)
	newer.Counts = []agentclient.Count{{ID: "srv-1", Type: "proc", Online: 5}}
	older := sub
	older.SubmissionID, older.ObservedAt = "sub-2", now.Add(time.Second)
	older.Counts = []agentclient.Count{{ID: "srv-1", Type: "proc", Online: 4}, {ID: "srv-3", Type: "proc", Online: 1}}
	if resp, err = c.Submit(ctx, newer); err != nil || resp.Items[0].Status != apiv1.StatusApplied {
		t.Fatalf("newer: %v %+v", err, resp)
	}
	if resp, err = c.Submit(ctx, older); err != nil {
		t.Fatal(err)
	}
	if st := statuses(resp); st[0] != apiv1.StatusStale || st[1] != apiv1.StatusApplied {
		t.Fatalf("older: %v", st)
	}
	got = s.leaves(t)
	if d := got[[2]string{"srv-1", "proc"}]; d.Online != 5 || d.SubmissionID != "sub-3" || d.Version != newer.ObservedAt.UnixNano() {
		t.Errorf("srv-1/proc = %+v, want the newest observation (5, sub-3)", d)
	}
	if len(got) != 4 {
		t.Errorf("%d documents, want 4", len(got))
	}

	// An invalid request writes nothing.
	bad := sub
	bad.SubmissionID = "sub-bad"
	bad.ObservedAt = now.Add(time.Hour / 2) // would win, but the request is rejected
	bad.Counts = []agentclient.Count{{ID: "srv-1", Type: "proc", Online: 99}, {ID: "srv$", Type: "proc", Online: 1}}
	_, err = c.Submit(ctx, bad)
	var apiErr *agentclient.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Body.Errors[0].Field != "counts[1].id" {
		t.Fatalf("invalid submit: %v", err)
	}
	if d := s.leaves(t)[[2]string{"srv-1", "proc"}]; d.Online != 5 {
		t.Errorf("a rejected request wrote: %+v", d)
	}
}

// TestTokensAgainstStore: tokens created in the store authenticate; another project's token
// is 403; a deleted project is 404; an unknown token 401; listing shows no secrets.
func TestTokensAgainstStore(t *testing.T) {
	s := newStack(t)
	ctx := testctx.Context(t)
	tokA, err := api.CreateToken(ctx, s.db, "proj-a", "")
	if err != nil {
		t.Fatal(err)
	}
	tokA2, err := api.CreateToken(ctx, s.db, "proj-a", "second agent")
	if err != nil {
		t.Fatal(err)
	}
	tokB, err := api.CreateToken(ctx, s.db, "proj-b", "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(tokA) != 43 || tokA == tokA2 {
		t.Fatalf("tokens %q %q", tokA, tokA2)
	}
	list, err := api.ListTokens(ctx, s.db, "proj-a")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]api.TokenInfo{}
	for _, ti := range list {
		byName[ti.Name] = ti
	}
	if d := byName[api.DefaultTokenName]; len(list) != 2 || d.ID != api.HashToken(tokA)[:12] || d.Project != "proj-a" || d.CreatedAt.IsZero() ||
		byName["second agent"].ID != api.HashToken(tokA2)[:12] {
		t.Fatalf("ListTokens = %+v", list)
	}
	// Only the hash is stored.
	n, err := s.db.Collection(store.TokensCollection).CountDocuments(ctx, bson.D{{Key: "_id", Value: api.HashToken(tokA)}})
	if err != nil || n != 1 {
		t.Fatalf("token hash stored %d times (%v)", n, err)
	}
	if n, _ := s.db.Collection(store.TokensCollection).CountDocuments(ctx, bson.D{{Key: "_id", Value: tokA}}); n != 0 {
		t.Fatal("the token itself is stored")
	}
	if _, err := api.CreateToken(ctx, s.db, "bad.project", ""); err == nil {
		t.Error("CreateToken accepted an invalid project")
	}
	if _, err := api.CreateToken(ctx, s.db, "p", "bad\nname"); err == nil {
		t.Error("CreateToken accepted a name with a newline")
	}

	sub := agentclient.Submission{Project: "proj-a", Timestamp: tree.AlignTick(time.Now(), tree.DefaultTick),
		Counts: []agentclient.Count{{ID: "x", Type: "proc", Online: 1}}}
	for _, tc := range []struct {
		name   string
		token  string
		want   int
		before func()
	}{
		{"own token", tokA2, http.StatusOK, nil},
		{"other project's token", tokB, http.StatusForbidden, nil},
		{"unknown token", "bm90LWEtdG9rZW4", http.StatusUnauthorized, nil},
		{"deleted project", tokA, http.StatusNotFound, func() {
			if _, err := s.db.Collection(store.ProjectsCollection).DeleteOne(ctx, bson.D{{Key: "_id", Value: "proj-a"}}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		if tc.before != nil {
			tc.before()
		}
		_, err := s.client(t, tc.token).Submit(ctx, sub)
		var apiErr *agentclient.APIError
		switch {
		case tc.want == http.StatusOK && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != http.StatusOK && (!errors.As(err, &apiErr) || apiErr.StatusCode != tc.want):
			t.Errorf("%s: error %v, want status %d", tc.name, err, tc.want)
		}
	}
}
