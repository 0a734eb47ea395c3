package api_test

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
	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/migrations"
)

// TestTokenLifecycle runs a token through expiry, rotation and revocation against the
// embedded store and a server that caches nothing: each step's answer, the stored state
// ListTokens shows, and the last-used time Run writes.
func TestTokenLifecycle(t *testing.T) {
	ctx := testctx.Context(t)
	mongod := embeddedtest.Start(t)
	db := mongod.Database(t, mongod.Client(t))
	log := zaptest.NewLogger(t)
	if _, err := migrations.New(db, log).Up(ctx, migrations.UpOptions{}); err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(api.Config{DB: db, Logger: log, TokenCacheTTL: time.Nanosecond, TokenUsageInterval: 10 * time.Millisecond})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(rctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	// get answers GET /v1/projects with token: the status and the body.
	get := func(token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+apiv1.ProjectsPath, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = res.Body.Close() }()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	find := func(id string) api.TokenInfo {
		t.Helper()
		list, err := api.ListTokens(ctx, db, "p")
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range list {
			if ti.ID == id {
				return ti
			}
		}
		t.Fatalf("token %s not listed: %+v", id, list)
		return api.TokenInfo{}
	}

	start := time.Now()
	tok1, info1, err := api.NewToken(ctx, db, "p", api.TokenOptions{Name: "agents", ExpiresIn: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if d := info1.ExpiresAt.Sub(start); d < time.Hour-time.Second || d > time.Hour+time.Minute {
		t.Errorf("expires %s after creation, want 1h", d)
	}
	if got := find(info1.ID); got.ExpiresAt != info1.ExpiresAt || got.State(time.Now()) != "active" || !got.LastUsedAt.IsZero() {
		t.Errorf("listed %+v, created %+v", got, info1)
	}
	if code, body := get(tok1); code != http.StatusOK {
		t.Fatalf("new token: %d %s", code, body)
	}
	testctx.WaitFor(t, "last_used_at written", func() bool { return !find(info1.ID).LastUsedAt.IsZero() })
	if lu := find(info1.ID).LastUsedAt; lu.Before(start.Add(-time.Second)) || lu.After(time.Now().Add(time.Second)) {
		t.Errorf("last used at %s, want between %s and now", lu, start)
	}

	// Rotation with a grace period: both work, the old until the end of the grace.
	rot, err := api.RotateToken(ctx, db, "p", info1.ID, 30*time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rot.New.Name != "agents" || rot.New.RotatedFrom != info1.ID || rot.Old.RotatedTo != rot.New.ID ||
		!rot.New.ExpiresAt.IsZero() || rot.Old.ExpiresAt.After(info1.ExpiresAt) || rot.Old.ExpiresAt.Sub(start) > 31*time.Minute {
		t.Errorf("rotation %+v", rot)
	}
	if got := find(info1.ID); got.ExpiresAt != rot.Old.ExpiresAt || got.RotatedTo != rot.New.ID {
		t.Errorf("old token listed as %+v", got)
	}
	for _, tok := range []string{tok1, rot.Token} {
		if code, body := get(tok); code != http.StatusOK {
			t.Fatalf("during the grace period: %d %s", code, body)
		}
	}
	// A grace period longer than the old token's remaining life keeps its expiry.
	rot2, err := api.RotateToken(ctx, db, "p", rot.New.ID[:8], 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(rot.Token); code != http.StatusUnauthorized || !strings.Contains(body, "token expired at") {
		t.Errorf("token rotated without grace: %d %s", code, body)
	}
	if _, err := api.RotateToken(ctx, db, "p", rot.New.ID, time.Hour, 0); err == nil || !strings.Contains(err.Error(), "expired at") {
		t.Errorf("rotating an expired token: %v", err)
	}

	// Revocation.
	rev, err := api.RevokeToken(ctx, db, "p", rot2.New.ID)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(rot2.Token); code != http.StatusUnauthorized || !strings.Contains(body, "token revoked at "+rev.RevokedAt.Format(time.RFC3339)) {
		t.Errorf("revoked token: %d %s", code, body)
	}
	if got := find(rev.ID); got.State(time.Now()) != "revoked" {
		t.Errorf("revoked token listed as %+v", got)
	}
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"revoke twice", func() error { _, err := api.RevokeToken(ctx, db, "p", rev.ID); return err }, "already revoked at"},
		{"rotate revoked", func() error { _, err := api.RotateToken(ctx, db, "p", rev.ID, time.Hour, 0); return err }, "was revoked at"},
		{"unknown id", func() error { _, err := api.RevokeToken(ctx, db, "p", "0123456789ab"); return err }, "no such token"},
		{"other project", func() error { _, err := api.RevokeToken(ctx, db, "q", info1.ID); return err }, "no such token"},
		{"short id", func() error { _, err := api.RevokeToken(ctx, db, "p", "abc"); return err }, "want 8 to 64 hex digits"},
		{"upper-case id", func() error { _, err := api.RevokeToken(ctx, db, "p", "ABCDEF012345"); return err }, "lowercase hex"},
		{"negative grace", func() error { _, err := api.RotateToken(ctx, db, "p", info1.ID, -time.Second, 0); return err }, "grace period"},
		{"negative expiry", func() error {
			_, _, err := api.NewToken(ctx, db, "p", api.TokenOptions{ExpiresIn: -time.Second})
			return err
		}, "token expiry"},
	} {
		err := tc.err()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if tc.want == "no such token" && !errors.Is(err, api.ErrTokenNotFound) {
			t.Errorf("%s: %v is not ErrTokenNotFound", tc.name, err)
		}
	}
	// No failed step left a token behind: created, rotated twice.
	if list, err := api.ListTokens(ctx, db, "p"); err != nil || len(list) != 3 {
		t.Errorf("tokens %+v, %v; want 3", list, err)
	}
}
