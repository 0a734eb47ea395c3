package ops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// TestTreeImportShow: an import effective in the past says so and is rounded up to a tick
// start; show prints the latest version, a version in effect at a time, or JSON that parses
// back to the same tree; a project without a tree or a time before its first version is an
// error that says what to do.
func TestTreeImportShow(t *testing.T) {
	ctx := testctx.Context(t)
	store := embeddedtest.Start(t)
	s := treedb.New(store.Database(t, store.Client(t)))
	tr, err := tree.Build("p", tree.Generate("p", 1, 2, 2))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2024, 5, 1, 10, 3, 0, 0, time.UTC)
	var out bytes.Buffer
	if err := ImportTree(ctx, &out, s, tr, at); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"project p: version 1, effective from 2024-05-01T10:05:00Z, 8 nodes, 4 leaves",
		"rounded up to the tick start 2024-05-01T10:05:00Z", "the effective time is in the past"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("import report lacks %q:\n%s", w, out.String())
		}
	}
	out.Reset()
	if err := (ShowTree{Project: "p", At: at.Add(time.Hour)}).Show(ctx, &out, s); err != nil || !strings.HasPrefix(out.String(), "project p version 1 of 1") {
		t.Fatalf("show: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := (ShowTree{Project: "p", JSON: true}).Show(ctx, &out, s); err != nil {
		t.Fatal(err)
	}
	back, err := tree.ParseTree(out.Bytes(), tree.FormatJSON)
	if err != nil || back.Len() != tr.Len() {
		t.Fatalf("JSON reads back as %v, %v", back, err)
	}
	if err := (ShowTree{Project: "none"}).Show(ctx, &out, s); err == nil || !strings.Contains(err.Error(), "rollup tree import") {
		t.Errorf("no tree: %v", err)
	}
	if err := (ShowTree{Project: "p", At: at.Add(-time.Hour)}).Show(ctx, &out, s); err == nil || !strings.Contains(err.Error(), "no version of project") {
		t.Errorf("before the first version: %v", err)
	}
}

// TestTokensAndMigrations: a created token is printed once on out (the note goes to notes)
// and never listed; migrate status before and after up.
func TestTokensAndMigrations(t *testing.T) {
	ctx := testctx.Context(t)
	store := embeddedtest.Start(t)
	db := store.Database(t, store.Client(t))
	m := migrations.New(db, zaptest.NewLogger(t))
	var out bytes.Buffer
	if err := MigrateStatus(ctx, &out, m, db.Name()); err != nil || !strings.Contains(out.String(), "pending: run 'rollup migrate up'") {
		t.Fatalf("status before: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := MigrateUp(ctx, &out, m, false, 0); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := MigrateStatus(ctx, &out, m, db.Name()); err != nil || !strings.HasSuffix(out.String(), "up to date\n") {
		t.Fatalf("status after: %v\n%s", err, out.String())
	}
	var tok, notes bytes.Buffer
	if err := CreateToken(ctx, &tok, &notes, db, "p", api.TokenOptions{ReadOnly: true}, Audit{}); err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(tok.String())
	if token == "" || !strings.Contains(notes.String(), `created read token "default" for project "p"`) {
		t.Fatalf("token %q, notes %q", token, notes.String())
	}
	out.Reset()
	if err := ListTokens(ctx, &out, db, "p"); err != nil || !strings.Contains(out.String(), "default") || strings.Contains(out.String(), token) {
		t.Fatalf("list: %v\n%s", err, out.String())
	}
}

// TestTokenAudit: create, rotate and revoke each log one audit line with the token's id,
// project, name, actor and host, and never the token; list shows the state of each.
func TestTokenAudit(t *testing.T) {
	ctx := testctx.Context(t)
	mongod := embeddedtest.Start(t)
	db := mongod.Database(t, mongod.Client(t))
	core, logs := observer.New(zap.InfoLevel)
	audit := Audit{Log: zap.New(core), Actor: "alice", Host: "ops-1"}
	var out, notes bytes.Buffer
	if err := CreateToken(ctx, &out, &notes, db, "p", api.TokenOptions{Name: "eu", ExpiresIn: time.Hour}, audit); err != nil {
		t.Fatal(err)
	}
	first := strings.TrimSpace(out.String())
	id1 := api.HashToken(first)[:api.TokenIDLen]
	out.Reset()
	if err := RotateToken(ctx, &out, &notes, db, "p", id1, time.Minute, 0, audit); err != nil {
		t.Fatal(err)
	}
	second := strings.TrimSpace(out.String())
	id2 := api.HashToken(second)[:api.TokenIDLen]
	if err := RevokeToken(ctx, &notes, db, "p", id2, audit); err != nil {
		t.Fatal(err)
	}
	want := []struct{ msg, id string }{{"token created", id1}, {"token rotated", id2}, {"token revoked", id2}}
	entries := logs.All()
	if len(entries) != len(want) {
		t.Fatalf("%d audit lines, want %d: %+v", len(entries), len(want), entries)
	}
	for i, e := range entries {
		f := e.ContextMap()
		if e.Message != want[i].msg || f["token_id"] != want[i].id || f["project"] != "p" || f["name"] != "eu" ||
			f["actor"] != "alice" || f["host"] != "ops-1" || f["audit"] != "token" {
			t.Errorf("line %d: %q %v, want %q for token %s", i, e.Message, f, want[i].msg, want[i].id)
		}
		for k, v := range f {
			if s := fmt.Sprint(v); strings.Contains(s, first) || strings.Contains(s, second) {
				t.Errorf("line %d: field %s holds a token", i, k)
			}
		}
	}
	if f := entries[1].ContextMap(); f["rotated_from"] != id1 {
		t.Errorf("rotation line %v, want rotated_from %s", f, id1)
	}
	for _, s := range []string{first, second} {
		if strings.Contains(notes.String(), s) {
			t.Errorf("a token was written to the notes: %s", notes.String())
		}
	}
	out.Reset()
	if err := ListTokens(ctx, &out, db, "p"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "LAST USED") || !strings.Contains(lines[1], "(rotated to "+id2+")") ||
		!strings.Contains(lines[2], "revoked ") || strings.Contains(out.String(), first) {
		t.Errorf("list:\n%s", out.String())
	}
}

// TestSubmitReport: one line per item and a summary; a rejected item fails the command.
func TestSubmitReport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req apiv1.CountsRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		resp := apiv1.CountsResponse{SubmissionID: req.SubmissionID, Project: req.Project, Timestamp: req.Timestamp,
			Items: []apiv1.ItemResult{{Index: 0, ID: "a", Type: "t", Status: apiv1.StatusApplied},
				{Index: 1, ID: "b", Type: "t", Status: apiv1.StatusRejected, Error: "no"}},
			Summary: apiv1.Summary{Applied: 1, Rejected: 1}}
		_ = json.NewEncoder(w).Encode(resp)
	}))
	defer srv.Close()
	var out bytes.Buffer
	c := &agentclient.Client{BaseURL: srv.URL, Token: "t", MaxAttempts: 1}
	s := agentclient.Submission{Project: "p", Timestamp: time.Date(2024, 5, 1, 10, 5, 0, 0, time.UTC), SubmissionID: "s1",
		Counts: []agentclient.Count{{ID: "a", Type: "t", Online: 1}, {ID: "b", Type: "t", Online: 2}}}
	err := Submit(t.Context(), &out, c, s, false)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 items rejected") {
		t.Fatalf("err %v", err)
	}
	if want := "0\ta\tt\tapplied\n1\tb\tt\trejected\tno\nsubmission s1: 1 applied, 0 stale, 1 rejected\n"; out.String() != want {
		t.Fatalf("report %q, want %q", out.String(), want)
	}
}

// TestMigrateStatusSharding: on a sharded cluster the status names each collection rollup
// shards and its state; an unsharded one is pending, one on another key says how to fix it.
func TestMigrateStatusSharding(t *testing.T) {
	key := func(d bson.D) bson.Raw {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	applied := []migrations.StepStatus{{Version: 1, Name: "one", Applied: true, AppliedAt: time.Unix(0, 0)}}
	cluster := migrations.Cluster{Sharded: true, MaxWireVersion: 21}
	tests := []struct {
		name string
		sh   migrations.Sharding
		want []string
	}{
		{"replica set", migrations.Sharding{}, []string{"up to date\n"}},
		{"sharded", migrations.Sharding{Cluster: cluster, Collections: []migrations.ShardState{{Namespace: "r.counts", Key: key(store.ShardKey())}}},
			[]string{`sharded cluster: r.counts is sharded on {"id": {"$numberInt":"1"}`, "up to date\n"}},
		{"pending", migrations.Sharding{Cluster: cluster, Collections: []migrations.ShardState{{Namespace: "r.counts"}}},
			[]string{"r.counts is not sharded yet", "1 pending: run 'rollup migrate up'\n"}},
		{"wrong key", migrations.Sharding{Cluster: cluster, Collections: []migrations.ShardState{{Namespace: "r.counts", Key: key(bson.D{{Key: "id", Value: "hashed"}})}}},
			[]string{`r.counts is sharded on {"id": "hashed"}, but rollup needs`, "reshardCollection", "sharded on the wrong key"}},
	}
	for _, tc := range tests {
		var out bytes.Buffer
		if err := printMigrateStatus(&out, "r", applied, nil, tc.sh); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: status lacks %q:\n%s", tc.name, w, out.String())
			}
		}
	}
}
