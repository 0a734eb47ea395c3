package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded/blackpipe"
	"github.com/gameops/rollup/internal/testnet"
)

// dbName is the database every process of a seed uses.
const dbName = "rollup"

// violations collects what broke an invariant during a seed.
type violations struct {
	mu   sync.Mutex
	list []string
}

func (v *violations) add(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.list) < 50 {
		v.list = append(v.list, fmt.Sprintf(format, args...))
	}
}

func (v *violations) all() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.list...)
}

// journal is a seed's event log, printed when the seed fails.
type journal struct {
	mu    sync.Mutex
	start time.Time
	b     strings.Builder
}

func (j *journal) logf(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	fmt.Fprintf(&j.b, "%8.3fs ", time.Since(j.start).Seconds())
	fmt.Fprintf(&j.b, format, args...)
	j.b.WriteByte('\n')
}

func (j *journal) String() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.b.String()
}

// world is one seed's deployment: the store process, the black-pipe proxy in front of it,
// one or two serve processes reaching the store through the proxy, and the test's own client
// straight to the store.
type world struct {
	t    *testing.T
	bin  string
	dir  string
	log  *journal
	viol *violations

	storeAddr string
	storeMu   sync.Mutex
	store     *proc

	proxyMu   sync.Mutex
	proxyAddr string
	proxy     *blackpipe.Proxy
	proxyStop func()

	admin *mongo.Client
	db    *mongo.Database
	http  *http.Client

	serves []*serveInst
}

// serveInst is one serve of the seed: its instance id and listen address stay across
// restarts.
type serveInst struct {
	idx  int
	id   string
	addr string
	mu   sync.Mutex
	p    *proc
}

func (s *serveInst) url() string { return "http://" + s.addr }

// newWorld starts the store, the proxy and n serve processes, and waits until every serve
// is ready.
func newWorld(ctx context.Context, t *testing.T, bin string, n int, log *journal, viol *violations) *world {
	t.Helper()
	w := &world{t: t, bin: bin, dir: t.TempDir(), log: log, viol: viol}
	var err error
	if w.storeAddr, err = testnet.FreeAddr(); err != nil {
		t.Fatal(err)
	}
	if err := w.startStore(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.stopStore(syscall.SIGKILL) })
	if err := w.startProxy(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.stopProxy)
	w.admin, err = mongo.Connect(options.Client().ApplyURI("mongodb://" + w.storeAddr + "/?directConnection=true").
		SetAppName("soak").SetServerSelectionTimeout(10 * time.Second).SetHeartbeatInterval(500 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.admin.Disconnect(dctx)
	})
	w.db = w.admin.Database(dbName)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	w.http = &http.Client{Transport: tr, Timeout: 20 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	for i := range n {
		s := &serveInst{idx: i, id: fmt.Sprintf("soak-%d", i)}
		if s.addr, err = testnet.FreeAddr(); err != nil {
			t.Fatal(err)
		}
		w.serves = append(w.serves, s)
		if err := w.startServe(ctx, s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.stopServe(s, syscall.SIGKILL) })
	}
	for _, s := range w.serves {
		if err := w.waitReady(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// startStore runs `rollup mongod` on the world's store address and data directory.
func (w *world) startStore(ctx context.Context) error {
	for try := 0; ; try++ {
		p, err := startProc(w.bin, "store", "mongod", "--listen", w.storeAddr, "--data", w.dir+"/store", "--enable-test-commands")
		if err != nil {
			return err
		}
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		_, err = p.waitLine(sctx, "mongodb://")
		cancel()
		if err == nil {
			w.storeMu.Lock()
			w.store = p
			w.storeMu.Unlock()
			go w.watchExit(p, "the store")
			return nil
		}
		p.stop(syscall.SIGKILL, time.Second)
		if !bindFailed(p.output.String()) || try >= 50 {
			return fmt.Errorf("start the store: %w", err)
		}
		pause(100 * time.Millisecond) // the address is still held (a connection closing): try again
	}
}

// stopStore stops the store with sig (SIGKILL: a crash; SIGTERM: a clean stop).
func (w *world) stopStore(sig syscall.Signal) {
	w.storeMu.Lock()
	p := w.store
	w.store = nil
	w.storeMu.Unlock()
	if p != nil {
		p.stop(sig, 30*time.Second)
	}
}

// startProxy runs a black-pipe proxy to the store, on the proxy's address once it has one.
func (w *world) startProxy() error {
	w.proxyMu.Lock()
	defer w.proxyMu.Unlock()
	addr := w.proxyAddr
	if addr == "" {
		var err error
		if addr, err = testnet.FreeAddr(); err != nil {
			return fmt.Errorf("proxy: %w", err)
		}
	}
	var p *blackpipe.Proxy
	for try := 0; ; try++ {
		p = blackpipe.New(w.storeAddr, zap.NewNop())
		err := p.Listen(addr)
		if err == nil {
			break
		}
		if try >= 50 {
			return fmt.Errorf("proxy: %w", err)
		}
		pause(100 * time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	w.proxy, w.proxyAddr = p, p.Addr()
	w.proxyStop = func() {
		cancel()
		if err := <-done; err != nil {
			w.viol.add("proxy: %v", err)
		}
	}
	return nil
}

// stopProxy stops the proxy: serve's connections to the store are cut and refused.
func (w *world) stopProxy() {
	w.proxyMu.Lock()
	defer w.proxyMu.Unlock()
	if w.proxyStop != nil {
		w.proxyStop()
		w.proxyStop = nil
	}
}

// withProxy runs fn with the running proxy, if any.
func (w *world) withProxy(fn func(p *blackpipe.Proxy)) {
	w.proxyMu.Lock()
	defer w.proxyMu.Unlock()
	if w.proxyStop != nil {
		fn(w.proxy)
	}
}

// startServe runs `rollup serve` for s.
func (w *world) startServe(ctx context.Context, s *serveInst) error {
	w.proxyMu.Lock()
	proxyAddr := w.proxyAddr // stable once the proxy first listened: restarts rebind it
	w.proxyMu.Unlock()
	for try := 0; ; try++ {
		p, err := startProc(w.bin, fmt.Sprintf("serve %d", s.idx), "serve",
			"--mongodb-uri", "mongodb://"+proxyAddr+"/?directConnection=true", "--database", dbName,
			"--listen", s.addr, "--instance-id", s.id, "--lease-ttl", "2s", "--log-level", "warn",
			"--token-rps", "0", "--token-leaves-per-s", "0") // the soak's agents share a token
		if err != nil {
			return err
		}
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		_, err = p.waitLine(sctx, "rollup API: ")
		cancel()
		if err == nil {
			s.mu.Lock()
			s.p = p
			s.mu.Unlock()
			go w.watchExit(p, fmt.Sprintf("serve %d", s.idx))
			return nil
		}
		p.stop(syscall.SIGKILL, time.Second)
		if !bindFailed(p.output.String()) || try >= 50 {
			return fmt.Errorf("start serve %d: %w", s.idx, err)
		}
		pause(100 * time.Millisecond)
	}
}

// stopServe stops s with sig (SIGKILL: kill -9; SIGTERM: a graceful shutdown).
func (w *world) stopServe(s *serveInst, sig syscall.Signal) {
	s.mu.Lock()
	p := s.p
	s.p = nil
	s.mu.Unlock()
	if p != nil {
		p.stop(sig, 60*time.Second)
	}
}

// watchExit records a violation when p ends without the test stopping it.
func (w *world) watchExit(p *proc, what string) {
	<-p.done
	if !p.stopping.Load() {
		w.viol.add("%s exited on its own (%v); its last output:\n%s", what, p.state, lastLines(p.output.String(), 40))
	}
}

// waitReady waits for s's /readyz 200.
func (w *world) waitReady(ctx context.Context, s *serveInst) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := w.http.Get(s.url() + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("serve %d not ready after 2 minutes (last: %w)", s.idx, err)
		}
		pause(20 * time.Millisecond)
	}
}

// metric reads an unlabeled metric from s's /metrics.
func (w *world) metric(s *serveInst, name string) (float64, error) {
	resp, err := w.http.Get(s.url() + "/metrics")
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no metric %s", name)
}

// failPoint runs configureFailPoint on the store, retrying while the store is away (a fail
// point is switched off by a store restart anyway).
func (w *world) failPoint(ctx context.Context, cmd bson.D) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := w.admin.Database("admin").RunCommand(cctx, cmd).Err()
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("configureFailPoint %v: %w", cmd[0].Value, err)
		}
		pause(50 * time.Millisecond)
	}
}

// failPointOff switches every fail point off.
func (w *world) failPointsOff(ctx context.Context) error {
	for _, name := range []string{"failCommand", "onPrimaryTransactionalWrite", "failGetMoreAfterCursorCheckout"} {
		if err := w.failPoint(ctx, bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: "off"}}); err != nil {
			return err
		}
	}
	return nil
}

// runCLI runs `rollup args...` against the store directly and returns its output and error.
func (w *world) runCLI(ctx context.Context, args ...string) (string, error) {
	p, err := startProc(w.bin, args[0], append(args, "--mongodb-uri", "mongodb://"+w.storeAddr+"/?directConnection=true", "--database", dbName)...)
	if err != nil {
		return "", err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.stop(syscall.SIGKILL, time.Second)
		return p.output.String(), ctx.Err()
	}
	if !p.state.Success() {
		return p.output.String(), fmt.Errorf("rollup %s: %v", args[0], p.state)
	}
	return p.output.String(), nil
}

// pause waits d (pacing a poll or a retry; never standing in for a signal).
func pause(d time.Duration) {
	t := time.NewTimer(d)
	<-t.C
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var errNotAcked = errors.New("never acknowledged")
