package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourcegraph/conc/pool"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/agentsim"
	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/internal/app"
	"github.com/gameops/rollup/internal/mongoconn"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/store"
)

// step is one scripted answer of the fake ingest server.
type step struct {
	status     int
	retryAfter string // "": no Retry-After header
	close      bool   // "Connection: close"
	cut        bool   // close the connection without an answer (a transport failure)
	hang       bool   // never answer (until the client goes away)
}

// fakeIngest is an ingest API that answers the scripted steps in order, whatever the request,
// then 200 with every item applied. It records the submission id of every request it read.
type fakeIngest struct {
	t     *testing.T
	want  map[string][]byte // submission id -> the 200 answer
	mu    sync.Mutex
	steps []step
	seen  []string
	conns atomic.Int64
	// onRequest, when set, is called with each request's number (0-based) before it is answered.
	onRequest func(n int)
}

func (f *fakeIngest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("read request: %v", err)
		return
	}
	var sub struct {
		ID string `json:"submission_id"`
	}
	if err := json.Unmarshal(body, &sub); err != nil {
		f.t.Errorf("decode request: %v", err)
	}
	f.mu.Lock()
	n := len(f.seen)
	f.seen = append(f.seen, sub.ID)
	var s *step
	if len(f.steps) > 0 {
		s = &f.steps[0]
		f.steps = f.steps[1:]
	}
	f.mu.Unlock()
	if f.onRequest != nil {
		f.onRequest(n)
	}
	switch {
	case s == nil:
		_, _ = w.Write(f.want[sub.ID])
	case s.hang:
		<-r.Context().Done()
	case s.cut:
		c, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			f.t.Errorf("hijack: %v", err)
			return
		}
		_ = c.Close()
	default:
		if s.retryAfter != "" {
			w.Header().Set("Retry-After", s.retryAfter)
		}
		if s.close {
			w.Header().Set("Connection", "close")
		}
		w.WriteHeader(s.status)
		_, _ = w.Write([]byte(`{"error":"scripted"}`))
	}
}

// requests returns the submission ids of the requests read so far.
func (f *fakeIngest) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seen)
}

// startFakeIngest starts f and returns a load generator of agents agents (two leaves each)
// over conns connections to it, with their prepared requests. Waits are recorded in *waits
// and return at once; jitter is always its maximum.
func startFakeIngest(t *testing.T, f *fakeIngest, agents, conns int, waits *[]time.Duration) (*loadGen, []agentRequest) {
	t.Helper()
	f.t = t
	srv := httptest.NewUnstartedServer(f)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	var leaves []agentsim.Leaf
	for i := range 2 * agents {
		leaves = append(leaves, agentsim.Leaf{ID: "p" + string(rune('a'+i)), Type: "process"})
	}
	g := newLoadGen(strings.TrimPrefix(srv.URL, "http://"), "tok", "p", leaves, agents, conns, 7)
	t.Cleanup(g.Close)
	var mu sync.Mutex
	g.resend.randN = func(n int64) int64 { return n - 1 }
	g.resend.wait = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		*waits = append(*waits, d)
		mu.Unlock()
		return ctx.Err()
	}
	tick := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	reqs, err := g.Prepare(tick, tick.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	f.want = map[string][]byte{}
	for _, r := range reqs {
		var sub struct {
			ID string `json:"submission_id"`
		}
		_, body, _ := bytes.Cut(r.req, []byte("\r\n\r\n"))
		if err := json.Unmarshal(body, &sub); err != nil {
			t.Fatal(err)
		}
		f.want[sub.ID] = r.want
	}
	return g, reqs
}

// TestSendResends plays the load generator against a server that answers some requests with
// a 503, 429, 408 or 500, cuts a connection, or answers a 4xx: a request whose outcome is
// unknown is resent (the same submission) after the Retry-After (capped, with jitter) or a
// default backoff, and acknowledged once; a 4xx other than 408 and 429 ends the run at once.
func TestSendResends(t *testing.T) {
	tests := []struct {
		name          string
		steps         []step
		agents, conns int
		wantErr       string
		wantResends   int
		wantByStatus  map[int]int
		wantWaits     []time.Duration // in order (one connection) or sorted
		wantMost      int
	}{
		{name: "503 Retry-After 0, three times", agents: 3, conns: 2,
			steps:       []step{{status: 503, retryAfter: "0"}, {status: 503, retryAfter: "0"}, {status: 503, retryAfter: "0"}},
			wantResends: 3, wantByStatus: map[int]int{503: 3}, wantWaits: []time.Duration{0, 0, 0}},
		{name: "Retry-After 1 and 2, with a quarter of jitter", agents: 1, conns: 1,
			steps:       []step{{status: 503, retryAfter: "1"}, {status: 429, retryAfter: "2"}},
			wantResends: 2, wantByStatus: map[int]int{503: 1, 429: 1}, wantWaits: []time.Duration{1250 * time.Millisecond, 2500 * time.Millisecond}, wantMost: 2},
		{name: "Retry-After over the cap", agents: 1, conns: 1,
			steps:       []step{{status: 503, retryAfter: "120"}},
			wantResends: 1, wantByStatus: map[int]int{503: 1}, wantWaits: []time.Duration{resendMax}},
		{name: "no Retry-After: exponential backoff", agents: 1, conns: 1,
			steps:       []step{{status: 503}, {status: 503}, {status: 500}, {status: 408}},
			wantResends: 4, wantByStatus: map[int]int{503: 2, 500: 1, 408: 1}, wantMost: 4,
			wantWaits: []time.Duration{resendBase, 2 * resendBase, 4 * resendBase, 8 * resendBase}},
		{name: "connection cut: resent on a new one", agents: 2, conns: 1,
			steps:       []step{{cut: true}},
			wantResends: 1, wantByStatus: map[int]int{0: 1}, wantWaits: []time.Duration{resendBase}},
		{name: "Connection: close is no failure", agents: 2, conns: 1,
			steps:       []step{{status: 503, retryAfter: "0", close: true}},
			wantResends: 1, wantByStatus: map[int]int{503: 1}, wantWaits: []time.Duration{0}},
		{name: "400 is fatal", agents: 3, conns: 1, steps: []step{{status: 400}}, wantErr: "HTTP 400"},
		{name: "403 is fatal", agents: 3, conns: 1, steps: []step{{status: 403}}, wantErr: "HTTP 403"},
		{name: "404 after a 503 is fatal", agents: 3, conns: 1, steps: []step{{status: 503, retryAfter: "0"}, {status: 404}},
			wantErr: "HTTP 404", wantResends: 1, wantByStatus: map[int]int{503: 1}, wantWaits: []time.Duration{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			f := &fakeIngest{steps: tc.steps}
			var waits []time.Duration
			g, reqs := startFakeIngest(t, f, tc.agents, tc.conns, &waits)
			var acks sync.Map
			var nacks atomic.Int64
			g.onAck = func(i int) {
				nacks.Add(1)
				if _, dup := acks.LoadOrStore(i, true); dup {
					t.Errorf("request %d acknowledged twice", i)
				}
			}
			st, err := g.Send(ctx, reqs)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
			}
			if st.resends != tc.wantResends || len(st.byStatus) != len(tc.wantByStatus) {
				t.Fatalf("%d resends by status %v, want %d by %v", st.resends, st.byStatus, tc.wantResends, tc.wantByStatus)
			}
			for k, v := range tc.wantByStatus {
				if st.byStatus[k] != v {
					t.Fatalf("resends by status %v, want %v", st.byStatus, tc.wantByStatus)
				}
			}
			if len(waits) != len(tc.wantWaits) {
				t.Fatalf("waits %v, want %v", waits, tc.wantWaits)
			}
			sum := time.Duration(0)
			for i, d := range waits {
				if d != tc.wantWaits[i] {
					t.Fatalf("waits %v, want %v", waits, tc.wantWaits)
				}
				sum += d
			}
			if st.waited != sum || st.busy <= 0 {
				t.Fatalf("waited %s (busy %s), want %s", st.waited, st.busy, sum)
			}
			if tc.wantMost > 0 && st.mostResends != tc.wantMost {
				t.Fatalf("at most %d resends of one request, want %d", st.mostResends, tc.wantMost)
			}
			if tc.wantErr != "" {
				// One connection: nothing is sent after the fatal answer.
				if seen := f.requests(); len(seen) != tc.wantResends+1 {
					t.Fatalf("server saw %d requests after a fatal answer: %v", len(seen), seen)
				}
				return
			}
			// Every request acknowledged once; the server saw each submission once plus its resends.
			if int(nacks.Load()) != len(reqs) {
				t.Fatalf("%d acknowledgements of %d requests", nacks.Load(), len(reqs))
			}
			seen := f.requests()
			if len(seen) != len(reqs)+tc.wantResends {
				t.Fatalf("server saw %d requests, want %d: %v", len(seen), len(reqs)+tc.wantResends, seen)
			}
			for id := range f.want {
				if !slices.Contains(seen, id) {
					t.Fatalf("submission %s never sent: %v", id, seen)
				}
			}
			if tc.wantByStatus[0] > 0 && f.conns.Load() < 2 {
				t.Fatalf("%d connections after a cut one", f.conns.Load())
			}
		})
	}
}

// TestSendResendsWithTimer resends after a real Retry-After: 0 (no injected wait): the timer
// path returns and the request is acknowledged.
func TestSendResendsWithTimer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := &fakeIngest{steps: []step{{status: 503, retryAfter: "0"}, {status: 429, retryAfter: "0"}}}
	var waits []time.Duration
	g, reqs := startFakeIngest(t, f, 2, 2, &waits)
	g.resend = defaultResendPolicy()
	st, err := g.Send(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if seen := f.requests(); st.resends != 2 || st.byStatus[503] != 1 || st.byStatus[429] != 1 || len(seen) != 4 {
		t.Fatalf("%d resends %v, server saw %v", st.resends, st.byStatus, seen)
	}
	if !strings.Contains(st.String(), "2 resends (429 ×1, 503 ×1") {
		t.Fatalf("stats read %q", st.String())
	}
}

// TestSendStopsWithContext: a server that answers 503 for ever keeps the agents resending
// until the run's context ends, during a wait (injected, then a real 30 s Retry-After).
func TestSendStopsWithContext(t *testing.T) {
	always503 := make([]step, 1000)
	for i := range always503 {
		always503[i] = step{status: 503, retryAfter: "30"}
	}
	t.Run("injected wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f := &fakeIngest{steps: always503}
		var waits []time.Duration
		g, reqs := startFakeIngest(t, f, 1, 1, &waits)
		calls := 0
		g.resend.wait = func(ctx context.Context, d time.Duration) error {
			if calls++; calls == 3 {
				cancel()
			}
			return ctx.Err()
		}
		st, err := g.Send(ctx, reqs)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		if seen := f.requests(); st.resends != 3 || len(seen) != 3 {
			t.Fatalf("%d resends, server saw %d requests: want 3 and 3", st.resends, len(seen))
		}
	})
	t.Run("real timer", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f := &fakeIngest{steps: always503, onRequest: func(int) { cancel() }}
		var waits []time.Duration
		g, reqs := startFakeIngest(t, f, 1, 1, &waits)
		g.resend = defaultResendPolicy()
		start := time.Now()
		st, err := g.Send(ctx, reqs)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		if elapsed := time.Since(start); elapsed > 20*time.Second {
			t.Fatalf("Send took %s after its context ended", elapsed)
		}
		if st.resends > 1 {
			t.Fatalf("%d resends", st.resends)
		}
	})
}

// TestSendStopsWaitingForAnAnswer: the run's context ends while a server that will never
// answer holds the request: Send returns at once, not after the connection's deadline.
func TestSendStopsWaitingForAnAnswer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan struct{})
	f := &fakeIngest{steps: []step{{hang: true}}, onRequest: func(int) { close(got) }}
	var waits []time.Duration
	g, reqs := startFakeIngest(t, f, 1, 1, &waits)
	go func() { <-got; cancel() }()
	start := time.Now()
	_, err := g.Send(ctx, reqs)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if elapsed := time.Since(start); elapsed > time.Minute {
		t.Fatalf("Send took %s after its context ended", elapsed)
	}
}

// TestSendGivesUp: a request refused for longer than the policy's giveUp ends the run (a
// serve that died must not hang the benchmark when its context has no deadline).
func TestSendGivesUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	always503 := make([]step, 100)
	for i := range always503 {
		always503[i] = step{status: 503, retryAfter: "0"}
	}
	f := &fakeIngest{steps: always503}
	var waits []time.Duration
	g, reqs := startFakeIngest(t, f, 1, 1, &waits)
	g.resend.giveUp = 0
	st, err := g.Send(ctx, reqs)
	if err == nil || !strings.Contains(err.Error(), "not acknowledged after 1 resends") || !strings.Contains(err.Error(), "HTTP 503") {
		t.Fatalf("err %v", err)
	}
	if seen := f.requests(); st.resends != 1 || len(seen) != 2 {
		t.Fatalf("%d resends, server saw %d", st.resends, len(seen))
	}
}

// TestSendDialRefused: nothing listens; the dial is resent after a backoff until the context
// ends, and Send reports the context's end with the last failure.
func TestSendDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	g := newLoadGen(addr, "tok", "p", []agentsim.Leaf{{ID: "a", Type: "process"}}, 1, 1, 7)
	defer g.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	g.resend.wait = func(ctx context.Context, d time.Duration) error {
		if calls++; calls == 2 {
			cancel()
		}
		return ctx.Err()
	}
	tick := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	reqs, err := g.Prepare(tick, tick)
	if err != nil {
		t.Fatal(err)
	}
	st, err := g.Send(ctx, reqs)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "dial") {
		t.Fatalf("err %v, want context.Canceled after a dial failure", err)
	}
	if st.resends != 2 || st.byStatus[0] != 2 {
		t.Fatalf("%d resends %v", st.resends, st.byStatus)
	}
}

// TestResendDelay checks the waits without a server: Retry-After honoured plus at most a
// quarter, capped; without one, equal jitter under an exponential ceiling, capped.
func TestResendDelay(t *testing.T) {
	p := defaultResendPolicy()
	for n := range 80 {
		for _, ra := range []struct {
			d   time.Duration
			set bool
		}{{0, false}, {0, true}, {time.Second, true}, {20 * time.Second, true}, {time.Hour, true}} {
			e := &resendError{status: 503, retryAfter: ra.d, retryAfterSet: ra.set}
			d := p.delay(n, e)
			lo, hi := time.Duration(0), p.max
			switch {
			case ra.set:
				lo, hi = min(ra.d, p.max), min(ra.d+ra.d/4, p.max)
			case n < 6:
				c := p.base << n
				lo, hi = c/2, c
			default:
				lo = p.max / 2
			}
			if d < lo || d > hi {
				t.Fatalf("resend %d, Retry-After %v (set %v): wait %s outside [%s, %s]", n, ra.d, ra.set, d, lo, hi)
			}
		}
	}
}

// flakySink writes each submission through the bulk writer, then, for the first fail
// submissions, answers as a writer whose outcome is unknown: the items are stored but the
// agent hears 503 — the case that made the 1M-leaf scale run fail.
type flakySink struct {
	w    *bulk.Writer
	fail atomic.Int64
}

func (s *flakySink) Submit(ctx context.Context, items []bulk.Item) ([]bulk.Result, error) {
	res, err := s.w.Submit(ctx, items)
	if err == nil && s.fail.Add(-1) >= 0 {
		return nil, fmt.Errorf("%w: scripted unknown outcome", bulk.ErrUnavailable)
	}
	return res, err
}

// TestSendAgainstAPI plays the load generator against rollup's own ingest server, whose
// writes reach the store but are answered 503 (with the server's Retry-After) three times:
// the agents resend after the Retry-After, every request is acknowledged (the resends come
// back applied or stale), and the store holds every leaf once with the agents' values.
func TestSendAgainstAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	uri, stopStore, err := benchStore(ctx, os.Getenv("MONGODB_URI"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer stopStore()
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	db := mongoconn.Database(client, fmt.Sprintf("rollup_resend_%d", time.Now().UnixNano()))
	defer func() { _ = db.Drop(context.Background()) }()
	log := zaptest.NewLogger(t)
	if _, err := migrations.New(db, log).Up(ctx, migrations.UpOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := api.CreateToken(ctx, db, "p", "test")
	if err != nil {
		t.Fatal(err)
	}
	writer := bulk.New(db.Collection(store.CountsCollection), bulk.Options{}, log)
	sink := &flakySink{w: writer}
	sink.fail.Store(3)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.NewServer(api.Config{DB: db, Sink: sink, Logger: log, RetryAfter: time.Second}).Handler(), ReadHeaderTimeout: 10 * time.Second}
	rctx, stop := context.WithCancel(ctx)
	p := pool.New().WithContext(rctx)
	p.Go(writer.Run)
	p.Go(func(ctx context.Context) error { return app.RunHTTP(ctx, srv, ln) })
	defer func() { stop(); _ = p.Wait() }()

	const agents, perAgent = 5, 4
	var leaves []agentsim.Leaf
	for i := range agents * perAgent {
		leaves = append(leaves, agentsim.Leaf{ID: fmt.Sprintf("p%02d", i), Type: "process"})
	}
	g := newLoadGen(ln.Addr().String(), token, "p", leaves, agents, 2, 7)
	defer g.Close()
	var mu sync.Mutex
	var waits []time.Duration
	g.resend.wait = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return ctx.Err()
	}
	tick := time.Now().UTC().Truncate(5 * time.Minute)
	observed := tick.Add(time.Minute)
	reqs, err := g.Prepare(tick, observed)
	if err != nil {
		t.Fatal(err)
	}
	var acks atomic.Int64
	g.onAck = func(int) { acks.Add(1) }
	st, err := g.Send(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if st.resends != 3 || st.byStatus[503] != 3 || acks.Load() != agents {
		t.Fatalf("%d resends (%v), %d acknowledgements", st.resends, st.byStatus, acks.Load())
	}
	for _, d := range waits { // the server's Retry-After (1 to 2 s: its RetryAfter 1 s), plus at most a quarter
		if d < time.Second || d > 2500*time.Millisecond {
			t.Fatalf("waits %v, want the server's Retry-After", waits)
		}
	}
	stored, invalid, err := store.NewCounts(db).TickLeaves(ctx, "p", tick)
	if err != nil || len(invalid) > 0 {
		t.Fatalf("read leaves: %v (%d invalid)", err, len(invalid))
	}
	want := map[string]int64{}
	for a := range agents {
		for _, c := range agentsim.AgentCounts(leaves, agents, a, 7, observed) {
			want[c.ID] = c.Online
		}
	}
	if len(stored) != len(leaves) {
		t.Fatalf("%d leaves stored, want %d", len(stored), len(leaves))
	}
	for _, l := range stored {
		if v, ok := want[l.ID]; !ok || l.Online != v || l.Version != observed.UnixNano() {
			t.Fatalf("stored %+v, want online %d version %d", l, v, observed.UnixNano())
		}
	}
}
