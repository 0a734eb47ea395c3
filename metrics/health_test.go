package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/migrations"
)

func get(t *testing.T, h http.Handler, path string) (int, Readiness) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	var rd Readiness
	if path == "/readyz" {
		if err := json.Unmarshal(rec.Body.Bytes(), &rd); err != nil {
			t.Fatalf("decode %q: %v", rec.Body.String(), err)
		}
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	return rec.Code, rd
}

func components(s ...status.State) func() []status.State {
	return func() []status.State { return s }
}

func TestReadyz(t *testing.T) {
	ok := func(context.Context) error { return nil }
	down := func(context.Context) error { return errors.New("connection refused") }
	slow := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	pending := func(n int, err error) func(context.Context) (int, error) {
		return func(context.Context) (int, error) { return n, err }
	}
	running := func(b bool) func() bool { return func() bool { return b } }
	cases := []struct {
		name     string
		h        Health
		status   int
		notReady []string
		checks   []string
	}{
		{"all ready", Health{Ping: ok, Pending: pending(0, nil), Running: running(true)}, 200, nil, []string{"store", "migrations", "watcher"}},
		{"store down", Health{Ping: down, Pending: pending(0, nil), Running: running(true)}, 503, []string{"store"}, []string{"store", "migrations", "watcher"}},
		{"store hangs: bounded by the timeout", Health{Ping: slow, Running: running(true), Timeout: 20 * time.Millisecond}, 503, []string{"store"}, []string{"store", "watcher"}},
		{"migrations pending", Health{Ping: ok, Pending: pending(2, nil), Running: running(true)}, 503, []string{"migrations"}, []string{"store", "migrations", "watcher"}},
		{"migrations unknown", Health{Ping: ok, Pending: pending(0, errors.New("no")), Running: running(true)}, 503, []string{"migrations"}, []string{"store", "migrations", "watcher"}},
		{"watcher stopped", Health{Ping: ok, Pending: pending(0, nil), Running: running(false)}, 503, []string{"watcher"}, []string{"store", "migrations", "watcher"}},
		{"everything wrong", Health{Ping: down, Pending: pending(1, nil), Running: running(false)}, 503, []string{"store", "migrations", "watcher"}, []string{"store", "migrations", "watcher"}},
		{"no checks", Health{}, 200, nil, nil},
		{"a component not ready", Health{Ping: ok, Components: components(
			status.State{Component: "bulk", Ready: true}, status.State{Component: "watcher", Reason: "store unreachable"})}, 503, []string{"watcher"}, []string{"store"}},
		{"components ready", Health{Ping: ok, Components: components(status.State{Component: "bulk", Ready: true})}, 200, nil, []string{"store"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, rd := get(t, tc.h.Ready(), "/readyz")
			if status != tc.status || rd.Ready != (tc.status == 200) || !slices.Equal(rd.NotReady, tc.notReady) {
				t.Fatalf("status %d %+v, want %d not ready %v", status, rd, tc.status, tc.notReady)
			}
			var names []string
			for _, c := range rd.Checks {
				names = append(names, c.Name)
				if c.OK == (c.Error != "") {
					t.Errorf("check %+v: ok and error disagree", c)
				}
			}
			if !slices.Equal(names, tc.checks) {
				t.Fatalf("checks %v, want %v", names, tc.checks)
			}
			if tc.h.Components != nil && !slices.Equal(rd.Components, tc.h.Components()) {
				t.Fatalf("components %+v, want %+v", rd.Components, tc.h.Components())
			}
			if status, _ := get(t, tc.h.Live(), "/healthz"); status != 200 {
				t.Fatalf("healthz %d, want 200 whatever the readiness", status)
			}
		})
	}
}

// TestReadyzStore checks readiness against a real store: migrations pending, then applied,
// then the watcher flag, then the store stopped.
func TestReadyzStore(t *testing.T) {
	store := embeddedtest.Start(t)
	store.SkipIfReal(t)
	client := store.Client(t)
	db := store.Database(t, client)
	m := migrations.New(db, zap.NewNop())
	var flag RunFlag
	h := &Health{
		Ping:    func(ctx context.Context) error { return client.Ping(ctx, readpref.Primary()) },
		Pending: m.Pending,
		Running: flag.Running,
		Timeout: time.Second,
	}
	if _, rd := get(t, h.Ready(), "/readyz"); rd.Ready || !slices.Equal(rd.NotReady, []string{"migrations", "watcher"}) {
		t.Fatalf("fresh store: %+v, want migrations and watcher not ready", rd)
	}
	ctx := testctx.Context(t)
	if _, err := m.Up(ctx, migrations.UpOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		done <- flag.Wrap(func(context.Context) error { close(started); <-stop; return nil })(ctx)
	}()
	<-started
	if status, rd := get(t, h.Ready(), "/readyz"); status != 200 || !rd.Ready {
		t.Fatalf("migrated and running: %d %+v, want ready", status, rd)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if flag.Running() {
		t.Fatal("flag still running after Run returned")
	}
	// A store nobody listens on: the ping fails within the timeout.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	dead, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + addr + "/?directConnection=true").SetServerSelectionTimeout(200 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dead.Disconnect(context.Background()) }()
	h.Ping = func(ctx context.Context) error { return dead.Ping(ctx, readpref.Primary()) }
	start := time.Now()
	if _, rd := get(t, h.Ready(), "/readyz"); rd.Ready || !slices.Equal(rd.NotReady, []string{"store", "watcher"}) {
		t.Fatalf("store unreachable: %+v, want store (and the stopped watcher) not ready", rd)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("readyz took %v with an unreachable store", took)
	}
}
