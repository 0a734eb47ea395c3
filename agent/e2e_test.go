package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/store"
)

// fakeClock is a Clock the test moves: After's channels fire when Advance passes their time.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	return ch
}

// Advance moves the clock to t and fires the waiters due by then.
func (c *fakeClock) Advance(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(t) {
			keep = append(keep, w)
			continue
		}
		w.ch <- t
	}
	c.waiters = keep
}

// gate stands in front of the API: up, 503 with Retry-After, 429, or gone (the connection is
// closed without an answer).
type gate struct {
	mode atomic.Value // string: "up", "503", "429", "gone"
	next http.Handler
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch mode := g.mode.Load().(string); mode {
	case "up":
		g.next.ServeHTTP(w, r)
	case "gone":
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	default:
		code := map[string]int{"503": http.StatusServiceUnavailable, "429": http.StatusTooManyRequests}[mode]
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(apiv1.ErrorResponse{Error: apiv1.ErrUnavailable, Message: "away (test)"})
	}
}

type leafDoc struct {
	ID        string    `bson:"id"`
	Type      string    `bson:"type"`
	Timestamp time.Time `bson:"timestamp"`
	Online    int64     `bson:"online"`
	Version   int64     `bson:"version"`
}

// ingestStack is rollup's ingest path over the embedded store, on the fake clock, behind a
// gate.
type ingestStack struct {
	db    *mongo.Database
	url   string
	http  *http.Client
	gate  *gate
	token string
}

func newIngestStack(t *testing.T, clock *fakeClock) *ingestStack {
	t.Helper()
	mongod := embeddedtest.Start(t)
	db := mongod.Database(t, mongod.Client(t))
	log := zaptest.NewLogger(t)
	ctx := testctx.Context(t)
	if _, err := migrations.New(db, log).Up(ctx, migrations.UpOptions{}); err != nil {
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
	srv := api.NewServer(api.Config{DB: db, Sink: w, Logger: log, Now: clock.Now})
	g := &gate{next: srv.Handler()}
	g.mode.Store("up")
	ts := httptest.NewServer(g)
	t.Cleanup(ts.Close)
	token, err := api.CreateToken(ctx, db, "proj", "agent")
	if err != nil {
		t.Fatal(err)
	}
	return &ingestStack{db: db, url: ts.URL, http: ts.Client(), gate: g, token: token}
}

func (s *ingestStack) leaves(t *testing.T) []leafDoc {
	t.Helper()
	ctx := testctx.Context(t)
	cur, err := s.db.Collection(store.CountsCollection).Find(ctx, bson.D{{Key: "project", Value: "proj"}})
	if err != nil {
		t.Fatal(err)
	}
	var docs []leafDoc
	if err := cur.All(ctx, &docs); err != nil {
		t.Fatal(err)
	}
	return docs
}

// e2eSources are a file source (leaves p1, p2) and a Prometheus source (p3) whose values the
// test sets per tick.
type e2eSources struct {
	path string
	prom atomic.Value // string: the exposition
}

func newE2ESources(t *testing.T) (*e2eSources, []Source) {
	t.Helper()
	s := &e2eSources{path: filepath.Join(t.TempDir(), "online.json")}
	ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(s.prom.Load().(string)))
	}))
	t.Cleanup(ps.Close)
	return s, []Source{
		&FileSource{SourceName: "file", LeafIDs: []string{"p1", "p2"}, Path: s.path}, // no MaxAge: the file's mtime is wall time
		&PromSource{SourceName: "prom", LeafIDs: []string{"p3"}, URL: ps.URL, Metric: "players", Label: "leaf", HTTP: ps.Client()},
	}
}

// set writes the sources' values: p2's is written as given (it may be bad data).
func (s *e2eSources) set(t *testing.T, p1 int64, p2 string, p3 int64) {
	t.Helper()
	if err := os.WriteFile(s.path, fmt.Appendf(nil, `{"p1": %d, "p2": %s}`, p1, p2), 0o600); err != nil {
		t.Fatal(err)
	}
	s.prom.Store(fmt.Sprintf("# TYPE players gauge\nplayers{leaf=\"p3\"} %d\n", p3))
}

// TestAgentOutageEndToEnd: the agent samples 10 ticks of three leaves while rollup (the real
// ingest path over the embedded store, on a fake clock) answers 503, then 429, then nothing
// for 30 minutes of ticks; the agent is killed once between spooling a tick and sending it,
// and once (when rollup is back) after a 200 but before its tick left the spool. Every tick's values arrive exactly
// once (one applied answer per leaf and tick, the resend stale) with the version of their
// first observation; a leaf with bad data is missing, never 0; the spool ends empty.
func TestAgentOutageEndToEnd(t *testing.T) {
	const tick = 5 * time.Minute
	start := time.Now().UTC().Truncate(tick).Add(-time.Hour) // the API's window is 24 h around its (fake) now
	clock := &fakeClock{now: start.Add(-time.Second)}
	stack := newIngestStack(t, clock)
	src, sources := newE2ESources(t)
	spoolDir := t.TempDir()
	stats := &Stats{}
	log := zaptest.NewLogger(t)
	settings := Settings{
		Client:  &agentclient.Client{BaseURL: stack.url, Token: stack.token, HTTP: stack.http, MaxAttempts: 1},
		Project: "proj", Tick: tick, Interval: tick, Window: 24 * time.Hour, NoJitter: true, Sources: sources,
	}

	// Each agent runs in the background; rounds says when it waits again, done when it ended.
	type running struct {
		rounds chan struct{}
		done   chan struct{} // closed when Run returned, with err
		err    error
		cancel context.CancelFunc
	}
	// killAfterSpool is the tick whose spooling kills the agent; armAfterSpool the tick whose
	// spooling arms the crash after the next 200 (crashArmed).
	const killAfterSpool, armAfterSpool = 4, 8
	var crashArmed atomic.Bool
	startAgent := func() *running {
		sp, err := OpenSpool(spoolDir, 1<<20, log)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(testctx.Context(t))
		r := &running{rounds: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
		opts := Options{Settings: settings, Spool: sp, Logger: log, Stats: stats, Clock: clock}
		opts.hooks.afterRound = func() {
			select {
			case r.rounds <- struct{}{}:
			case <-ctx.Done():
			}
		}
		opts.hooks.afterSpool = func(rec Record) {
			switch {
			case rec.Timestamp.Equal(start.Add(killAfterSpool * tick)):
				cancel() // killed between the spool write and the send
			case rec.Timestamp.Equal(start.Add(armAfterSpool * tick)):
				crashArmed.Store(true)
			}
		}
		opts.hooks.crashAfterSend = func(Record) bool {
			if crashArmed.CompareAndSwap(true, false) {
				cancel() // killed after a 200, before its tick left the spool
				return true
			}
			return false
		}
		a := New(opts)
		go func() { r.err = a.Run(ctx); close(r.done) }()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	// settle waits until the agent has handled everything due at the clock's now and has
	// sampled want ticks in all; it reports whether the agent is still running.
	settle := func(r *running, want int64) bool {
		t.Helper()
		ctx := testctx.Context(t)
		for {
			select {
			case <-r.rounds:
				clock.mu.Lock()
				due := false
				for _, w := range clock.waiters {
					due = due || !w.at.After(clock.now)
				}
				clock.mu.Unlock()
				if !due && stats.Snapshot().TicksSampled >= want {
					return true
				}
			case <-r.done:
				if r.err != nil {
					t.Fatalf("agent: %v", r.err)
				}
				return false
			case <-ctx.Done():
				t.Fatalf("agent did not settle with %d ticks sampled (stats %+v)", want, stats.Snapshot())
			}
		}
	}

	// What each tick samples, and the store must end up with.
	type want struct{ p1, p2, p3 int64 } // p2 < 0: bad data, missing
	wants := map[int]want{}
	observed := map[int]time.Time{}
	modes := []string{"up", "up", "503", "503", "429", "429", "gone", "gone", "up", "up"}

	agent := startAgent()
	if !settle(agent, 0) {
		t.Fatal("the agent ended at start")
	}
	for k, mode := range modes {
		w := want{p1: int64(100 + k), p2: int64(200 + k), p3: int64(300 + k)}
		p2 := fmt.Sprint(w.p2)
		if k == 5 {
			w.p2, p2 = -1, "1.5" // bad data: p2 is missing from tick 5, never 0
		}
		wants[k] = w
		src.set(t, w.p1, p2, w.p3)
		stack.gate.mode.Store(mode)
		at := start.Add(time.Duration(k)*tick + 3*time.Millisecond)
		observed[k] = at
		clock.Advance(at)
		if !settle(agent, int64(k+1)) {
			agent = startAgent() // a restart over the same spool
			if !settle(agent, int64(k+1)) {
				t.Fatalf("the restarted agent ended at tick %d", k)
			}
		}
		if n := spoolDepth(t, spoolDir); mode != "up" && n == 0 {
			t.Errorf("tick %d: rollup is away (%s) and the spool is empty", k, mode)
		}
	}

	if n := spoolDepth(t, spoolDir); n != 0 {
		t.Errorf("%d ticks left in the spool", n)
	}
	docs := stack.leaves(t)
	sort.Slice(docs, func(i, j int) bool {
		if !docs[i].Timestamp.Equal(docs[j].Timestamp) {
			return docs[i].Timestamp.Before(docs[j].Timestamp)
		}
		return docs[i].ID < docs[j].ID
	})
	got := map[string]leafDoc{}
	for _, d := range docs {
		k := fmt.Sprintf("%s@%d", d.ID, int(d.Timestamp.Sub(start)/tick))
		if _, dup := got[k]; dup {
			t.Errorf("two documents for %s", k)
		}
		got[k] = d
	}
	items := 0
	for k, w := range wants {
		for id, v := range map[string]int64{"p1": w.p1, "p2": w.p2, "p3": w.p3} {
			key := fmt.Sprintf("%s@%d", id, k)
			d, ok := got[key]
			switch {
			case v < 0 && ok:
				t.Errorf("%s: bad data stored as %d, want the leaf missing", key, d.Online)
			case v < 0:
			case !ok:
				t.Errorf("%s: missing, want %d", key, v)
			case d.Online != v || d.Version != observed[k].UnixNano() || d.Type != DefaultLeafType:
				t.Errorf("%s: online %d version %d type %s, want %d version %d", key, d.Online, d.Version, d.Type, v, observed[k].UnixNano())
			}
			if v >= 0 {
				items++
			}
		}
	}
	if len(docs) != items {
		t.Errorf("%d documents, want %d", len(docs), items)
	}
	s := stats.Snapshot()
	// Each leaf and tick is applied once: the crashed send's 3 applied answers died with that
	// agent, and its resend answered 3 stale.
	if s.Items["applied"] != int64(items-3) || s.Items["stale"] != 3 || s.Items["rejected"] != 0 {
		t.Errorf("item answers %v, want %d applied (each once, 3 more lost with the crash) and 3 stale (the resend)", s.Items, items-3)
	}
	if s.TicksSampled != int64(len(modes)) || s.SendErrors["503"] == 0 || s.SendErrors["429"] == 0 || s.SendErrors[SendErrorNetwork] == 0 {
		t.Errorf("stats %+v", s)
	}
	if !s.LastSentTick.Equal(start.Add(9*tick)) || s.LeafErrors["file"] != 1 || len(s.Dropped) != 0 {
		t.Errorf("last sent %s, leaf errors %v, dropped %v", s.LastSentTick, s.LeafErrors, s.Dropped)
	}
}

// spoolDepth counts the spool files in dir (the agent is idle: no write in flight).
func spoolDepth(t *testing.T, dir string) int {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, de := range des {
		if _, ok := parseEntryName(de.Name()); ok {
			n++
		}
	}
	return n
}
