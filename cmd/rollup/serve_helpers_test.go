package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/metrics"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// syncBuffer is an io.Writer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// inProcess is `rollup serve` run in the test process (so -race sees it), on its own
// context.
type inProcess struct {
	url     string
	started time.Time
	cancel  context.CancelFunc
	done    chan error
	stdout  *syncBuffer
	logs    *syncBuffer
}

// serveInProcess runs `rollup serve args...` and waits for its API line.
func serveInProcess(t *testing.T, args ...string) *inProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &inProcess{started: time.Now(), cancel: cancel, done: make(chan error, 1), stdout: &syncBuffer{}, logs: &syncBuffer{}}
	go func() { s.done <- run(ctx, &env{stdout: s.stdout, stderr: s.logs}, append([]string{"serve"}, args...)) }()
	t.Cleanup(func() {
		if err := s.stop(t); err != nil {
			t.Errorf("serve: %v", err)
		}
		if t.Failed() {
			logs := s.logs.String()
			t.Logf("serve logs (last 8 KiB):\n%s", logs[max(0, len(logs)-8<<10):])
		}
	})
	waitUntil(t, 30*time.Second, "the API line", func() bool {
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("serve exited before serving: %v\n%s", err, s.logs.String())
		default:
		}
		for _, line := range strings.Split(s.stdout.String(), "\n") {
			if u, ok := strings.CutPrefix(line, "rollup API: "); ok {
				s.url = u
				return true
			}
		}
		return false
	})
	return s
}

// exited returns serve's result if it returned, without waiting.
func (s *inProcess) exited() (error, bool) {
	select {
	case err := <-s.done:
		s.done <- err
		return err, true
	default:
		return nil, false
	}
}

// stop cancels serve and returns its result; shutdown is bounded.
func (s *inProcess) stop(t *testing.T) error {
	s.cancel()
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not shut down within 60s")
		return nil
	}
}

// waitUntil polls cond every 20ms until it holds, failing the test after within.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		tick := time.NewTimer(20 * time.Millisecond)
		<-tick.C
	}
	return time.Since(start)
}

var probeClient = &http.Client{Timeout: 5 * time.Second}

// readyz asks baseURL's /readyz (status 0 when it does not answer).
func readyz(baseURL string) (int, metrics.Readiness) {
	var rd metrics.Readiness
	resp, err := probeClient.Get(baseURL + "/readyz")
	if err != nil {
		return 0, rd
	}
	defer func() { _ = resp.Body.Close() }()
	_ = json.NewDecoder(resp.Body).Decode(&rd)
	return resp.StatusCode, rd
}

// healthz asks baseURL's /healthz (0 when it does not answer).
func healthz(baseURL string) int {
	resp, err := probeClient.Get(baseURL + "/healthz")
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// notReady names the components /readyz lists as not ready, with their reasons.
func notReady(rd metrics.Readiness) string {
	var b strings.Builder
	for _, c := range rd.Components {
		if !c.Ready {
			fmt.Fprintf(&b, "%s since %s: %s; ", c.Component, c.Since.Format(time.RFC3339), c.Reason)
		}
	}
	return b.String()
}

// project is a tree and a token in a store, and the agent's view of it.
type project struct {
	name   string
	token  string
	nodes  []tree.Node
	leaves []tree.Node
	ticks  []time.Time
	rng    *rand.Rand
	round  int
	// last is the last acknowledged value of each leaf.
	last map[string]int64
}

// newProject imports a tree for name and creates its ingest token.
func newProject(ctx context.Context, t *testing.T, db *mongo.Database, name string) *project {
	t.Helper()
	nodes := tree.Generate(name, 2, 3, 4)
	tr, err := tree.Build(name, nodes)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	p := &project{name: name, nodes: nodes, leaves: tr.Leaves(), rng: rand.New(rand.NewPCG(7, 12)), last: map[string]int64{}}
	p.ticks = []time.Time{tree.AlignTick(now, tree.DefaultTick).Add(-tree.DefaultTick)}
	if _, err := treedb.New(db).Import(ctx, name, nodes, p.ticks[0].Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if p.token, err = api.CreateToken(ctx, db, name, "test"); err != nil {
		t.Fatal(err)
	}
	return p
}

// submit sends one round of every leaf once; the values are remembered when acknowledged.
func (p *project) submit(ctx context.Context, baseURL string) error {
	c := &agentclient.Client{BaseURL: baseURL, Token: p.token, MaxAttempts: 1, Logger: zap.NewNop()}
	p.round++
	counts := make([]agentclient.Count, 0, len(p.leaves))
	values := map[string]int64{}
	for _, l := range p.leaves {
		v := int64(p.rng.IntN(1000))
		values[l.ID] = v
		counts = append(counts, agentclient.Count{ID: l.ID, Type: l.Type, Online: v})
	}
	_, err := c.Submit(ctx, agentclient.Submission{Project: p.name, Timestamp: p.ticks[0], ObservedAt: time.Now().UTC(), Counts: counts})
	if err == nil {
		p.last = values
	}
	return err
}

// wrong says what is wrong with the stored totals ("" when every parent is the sum of its
// leaves and every leaf holds its last acknowledged value).
func (p *project) wrong(ctx context.Context, t *testing.T, db *mongo.Database) string {
	t.Helper()
	if bad := checkTotals(ctx, t, db, p.name, p.nodes, p.ticks); bad != "" {
		return bad
	}
	for id, v := range p.last {
		var doc struct {
			Online int64 `bson:"online"`
		}
		if err := db.Collection("counts").FindOne(ctx, map[string]any{"id": id, "timestamp": p.ticks[0]}).Decode(&doc); err != nil {
			return fmt.Sprintf("leaf %s: %v", id, err)
		}
		if doc.Online != v {
			return fmt.Sprintf("leaf %s holds %d, last acknowledged %d", id, doc.Online, v)
		}
	}
	return ""
}

// ownedStore is an embedded server the test stops and restarts on the same address and
// data directory.
type ownedStore struct {
	t      *testing.T
	addr   string
	dir    string
	cancel context.CancelFunc
	done   chan error
}

func startOwnedStore(t *testing.T, addr, dir string) *ownedStore {
	t.Helper()
	s := &ownedStore{t: t, addr: addr, dir: dir}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *ownedStore) start() {
	s.t.Helper()
	srv, err := embedded.New(embedded.Config{Listen: s.addr, DataDir: s.dir, EnableTestCommands: true})
	if err != nil {
		s.t.Fatalf("start embedded server: %v", err)
	}
	s.addr = srv.Addr()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() { s.done <- srv.Run(ctx) }()
}

func (s *ownedStore) stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	if err := <-s.done; err != nil {
		s.t.Errorf("embedded server: %v", err)
	}
	s.cancel = nil
}
