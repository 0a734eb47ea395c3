package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/store"
)

func TestParseToken(t *testing.T) {
	t.Setenv("ROLLUP_MONGODB_URI", "")
	g := lifetime(defaultGrace)
	tests := []parseCase[tokenConfig]{
		{args: []string{"create", "--project", "p", "--mongodb-uri", "mongodb://m"}, want: tokenConfig{sub: "create", store: storeFlags{uri: "mongodb://m", database: "rollup"}, project: "p", grace: g}},
		{args: []string{"--mongodb-uri", "mongodb://m", "create", "--project", "p", "--name", "eu agents", "--database", "x"}, want: tokenConfig{sub: "create", store: storeFlags{uri: "mongodb://m", database: "x"}, project: "p", name: "eu agents", grace: g}},
		{args: []string{"list", "--project", "p", "--mongodb-uri", "mongodb://m"}, want: tokenConfig{sub: "list", store: storeFlags{uri: "mongodb://m", database: "rollup"}, project: "p", grace: g}},
		{args: []string{"create", "--project", "p"}, wantErr: "pass --mongodb-uri"},
		{args: []string{"create", "--mongodb-uri", "mongodb://m"}, wantErr: "--project is required"},
		{args: []string{"list", "--project", "p", "--name", "n", "--mongodb-uri", "mongodb://m"}, wantErr: "--name is for"},
		{args: []string{"create", "--project", "p", "--read-only", "--mongodb-uri", "mongodb://m"}, want: tokenConfig{sub: "create", store: storeFlags{uri: "mongodb://m", database: "rollup"}, project: "p", readOnly: true, grace: g}},
		{args: []string{"list", "--project", "p", "--read-only", "--mongodb-uri", "mongodb://m"}, wantErr: "--read-only is for"},
		{args: []string{"create", "--project", "p", "--expires", "30d", "--mongodb-uri", "mongodb://m"}, want: tokenConfig{sub: "create", store: storeFlags{uri: "mongodb://m", database: "rollup"}, project: "p", expires: lifetime(30 * 24 * time.Hour), grace: g}},
		{args: []string{"create", "--project", "p", "--expires", "90m", "--mongodb-uri", "mongodb://m"}, want: tokenConfig{sub: "create", store: storeFlags{uri: "mongodb://m", database: "rollup"}, project: "p", expires: lifetime(90 * time.Minute), grace: g}},
		{args: []string{"create", "--project", "p", "--expires", "-1h", "--mongodb-uri", "mongodb://m"}, wantErr: "want 0 to 3650d"},
		{args: []string{"create", "--project", "p", "--expires", "5000d", "--mongodb-uri", "mongodb://m"}, wantErr: "up to 3650d"},
		{args: []string{"create", "--project", "p", "--expires", "soon", "--mongodb-uri", "mongodb://m"}, wantErr: "want a duration such as 12h or 30d"},
		{args: []string{"revoke", "--project", "p", "0123456789ab", "--mongodb-uri", "mongodb://m"}, want: tokenConfig{sub: "revoke", store: storeFlags{uri: "mongodb://m", database: "rollup"}, project: "p", id: "0123456789ab", grace: g}},
		{args: []string{"revoke", "--project", "p", "--mongodb-uri", "mongodb://m"}, wantErr: "needs the token's id"},
		{args: []string{"revoke", "--project", "p", "xyz", "--mongodb-uri", "mongodb://m"}, wantErr: "want 8 to 64 hex digits"},
		{args: []string{"revoke", "--project", "p", "0123456789ab", "--grace", "1h", "--mongodb-uri", "mongodb://m"}, wantErr: "--grace is for 'token rotate'"},
		{args: []string{"revoke", "--project", "p", "0123456789ab", "--expires", "1h", "--mongodb-uri", "mongodb://m"}, wantErr: "--expires is for"},
		{args: []string{"rotate", "--project", "p", "--grace", "0", "0123456789ab", "--expires", "7d", "--mongodb-uri", "mongodb://m"}, want: tokenConfig{sub: "rotate", store: storeFlags{uri: "mongodb://m", database: "rollup"}, project: "p", id: "0123456789ab", expires: lifetime(7 * 24 * time.Hour)}},
		{args: []string{"rotate", "--project", "p", "0123456789ab", "extra", "--mongodb-uri", "mongodb://m"}, wantErr: `unexpected argument "extra"`},
		{args: []string{"rename", "--project", "p", "--mongodb-uri", "mongodb://m"}, wantErr: `unknown subcommand "rename"`},
		{args: []string{}, wantErr: "subcommand is required"},
		{args: []string{"list", "--project", "p", "--mongodb-uri", "mongodb://m", "x"}, wantErr: "unexpected argument"},
	}
	checkParse(t, parseToken, tests)
}

// TestTokenAndSubmitEndToEnd: 'rollup token create' prints a token that 'rollup submit'
// then uses against the real API, bulk writer and embedded store; 'token list' never shows it.
func TestTokenAndSubmitEndToEnd(t *testing.T) {
	t.Setenv("ROLLUP_MONGODB_URI", "")
	t.Setenv("ROLLUP_TOKEN", "")
	srv := embeddedtest.Start(t)
	client := srv.Client(t)
	db := srv.Database(t, client)
	log := zaptest.NewLogger(t)
	ctx := testctx.Context(t)
	if _, err := migrations.New(db, log).Up(ctx, migrations.UpOptions{}); err != nil {
		t.Fatal(err)
	}
	w := bulk.New(db.Collection(store.CountsCollection), bulk.Options{MaxDelay: time.Millisecond}, log)
	wctx, wcancel := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	defer func() {
		wcancel()
		if err := <-wdone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("writer: %v", err)
		}
	}()
	ts := httptest.NewServer(api.NewServer(api.Config{DB: db, Sink: w, Logger: log}))
	defer ts.Close()

	var out, errOut strings.Builder
	e := &env{stdout: &out, stderr: &errOut}
	if err := run(ctx, e, []string{"token", "create", "--project", "mygame", "--name", "eu agents", "--mongodb-uri", srv.URI, "--database", db.Name()}); err != nil {
		t.Fatalf("token create: %v (%s)", err, errOut.String())
	}
	token := strings.TrimSpace(out.String())
	if len(token) != 43 || !strings.Contains(errOut.String(), "printed once") {
		t.Fatalf("token create printed %q, stderr %q", out.String(), errOut.String())
	}

	out.Reset()
	if err := run(ctx, e, []string{"token", "list", "--project", "mygame", "--mongodb-uri", srv.URI, "--database", db.Name()}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "eu agents") || !strings.Contains(out.String(), api.HashToken(token)[:12]) || strings.Contains(out.String(), token) {
		t.Fatalf("token list printed %q", out.String())
	}

	out.Reset()
	err := runSubmitWith(ctx, e, strings.NewReader(`[{"id":"srv-1","type":"proc","online":3}]`),
		[]string{"--url", ts.URL, "--token", token, "--project", "mygame", "--timestamp", "now", "-"})
	if err != nil || !strings.Contains(out.String(), "0\tsrv-1\tproc\tapplied\n") {
		t.Fatalf("submit: %v, printed %q", err, out.String())
	}
	n, err := db.Collection(store.CountsCollection).CountDocuments(ctx, map[string]any{"id": "srv-1", "project": "mygame", "online": 3})
	if err != nil || n != 1 {
		t.Fatalf("%d documents (%v)", n, err)
	}
}

// TestReadOnlyToken: 'token create --read-only' prints a token that the read API accepts and
// POST /v1/counts refuses with 403; 'token list' shows each token's scope.
func TestReadOnlyToken(t *testing.T) {
	t.Setenv("ROLLUP_MONGODB_URI", "")
	t.Setenv("ROLLUP_TOKEN", "")
	srv := embeddedtest.Start(t)
	db := srv.Database(t, srv.Client(t))
	ctx := testctx.Context(t)
	ts := httptest.NewServer(api.NewServer(api.Config{DB: db, Logger: zaptest.NewLogger(t)}))
	defer ts.Close()

	var out, errOut strings.Builder
	e := &env{stdout: &out, stderr: &errOut}
	flags := []string{"--project", "mygame", "--mongodb-uri", srv.URI, "--database", db.Name()}
	if err := run(ctx, e, append([]string{"token", "create", "--name", "dash", "--read-only"}, flags...)); err != nil {
		t.Fatalf("token create: %v (%s)", err, errOut.String())
	}
	token := strings.TrimSpace(out.String())
	if len(token) != 43 || !strings.Contains(errOut.String(), "created read token") {
		t.Fatalf("token create printed %q, stderr %q", out.String(), errOut.String())
	}
	out.Reset()
	if err := run(ctx, e, append([]string{"token", "create", "--name", "agents"}, flags...)); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(ctx, e, append([]string{"token", "list"}, flags...)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "SCOPE") ||
		!strings.Contains(out.String(), "dash    read") || !strings.Contains(out.String(), "agents  ingest") {
		t.Fatalf("token list printed %q", out.String())
	}

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/v1/projects", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"name":"mygame"`) {
		t.Fatalf("GET /v1/projects = %d %s", resp.StatusCode, body)
	}
	out.Reset()
	err = runSubmitWith(ctx, e, strings.NewReader(`[{"id":"srv-1","type":"proc","online":3}]`),
		[]string{"--url", ts.URL, "--token", token, "--project", "mygame", "--timestamp", "now", "-"})
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("submit with a read-only token: %v, printed %q", err, out.String())
	}
}

// TestRevokeReachesEveryInstance: two serve instances over one store both accept a token; after
// 'rollup token revoke' both answer 401 "token revoked" within 5 s, and the revocation logs
// one audit line without the token.
func TestRevokeReachesEveryInstance(t *testing.T) {
	t.Setenv("ROLLUP_MONGODB_URI", "")
	srv := embeddedtest.Start(t)
	db := srv.Database(t, srv.Client(t))
	ctx := testctx.Context(t)
	var out, errOut syncBuffer
	e := &env{stdout: &out, stderr: &errOut}
	flags := []string{"--project", "mygame", "--mongodb-uri", srv.URI, "--database", db.Name()}
	if err := run(ctx, e, append([]string{"token", "create", "--name", "agents"}, flags...)); err != nil {
		t.Fatalf("token create: %v (%s)", err, errOut.String())
	}
	token := strings.TrimSpace(out.String())
	id := api.HashToken(token)[:api.TokenIDLen]
	serve := func(name string) *inProcess {
		return serveInProcess(t, "--mongodb-uri", srv.URI, "--database", db.Name(), "--listen", "127.0.0.1:0",
			"--instance-id", name, "--totals-max-projects", "0", "--retention=false", "--log-level", "warn")
	}
	instances := []*inProcess{serve("tokens-one"), serve("tokens-two")}
	get := func(s *inProcess) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/v1/projects", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = res.Body.Close() }()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, s := range instances { // both accept it, and cache it
		if code, body := get(s); code != http.StatusOK {
			t.Fatalf("before the revocation: %d %s", code, body)
		}
	}
	errOut = syncBuffer{}
	if err := run(ctx, e, append([]string{"token", "revoke", id}, flags...)); err != nil {
		t.Fatalf("token revoke: %v (%s)", err, errOut.String())
	}
	revoked := time.Now()
	if logs := errOut.String(); strings.Count(logs, `"msg":"token revoked"`) != 1 || !strings.Contains(logs, `"token_id":"`+id+`"`) ||
		strings.Contains(logs, token) {
		t.Errorf("revoke logged %s", logs)
	}
	for _, s := range instances {
		waitUntil(t, 5*time.Second-time.Since(revoked), "401 token revoked from "+s.url, func() bool {
			code, body := get(s)
			return code == http.StatusUnauthorized && strings.Contains(body, "token revoked at")
		})
	}
	t.Logf("both instances refuse the token %s after the revocation", time.Since(revoked).Round(time.Millisecond))
}
