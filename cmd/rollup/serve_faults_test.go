package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded/blackpipe"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
)

// faultLength is how long each store fault lasts in the serve fault tests.
const faultLength = 60 * time.Second

// faultFixture is `rollup serve` in this process, reaching its store through a black-pipe
// proxy (which counts the commands), and a direct client of the test.
type faultFixture struct {
	store  *ownedStore // nil against MONGODB_URI
	proxy  *blackpipe.Proxy
	direct *mongo.Client
	db     *mongo.Database
	serve  *inProcess
}

func newFaultFixture(t *testing.T, ctx context.Context) *faultFixture {
	t.Helper()
	f := &faultFixture{}
	target := ""
	if uri := os.Getenv("MONGODB_URI"); uri != "" {
		target = options.Client().ApplyURI(uri).Hosts[0]
	} else {
		f.store = startOwnedStore(t, "127.0.0.1:0", t.TempDir())
		target = f.store.addr
	}
	f.proxy = blackpipe.New(target, zap.NewNop())
	if err := f.proxy.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(context.Background())
	pdone := make(chan error, 1)
	go func() { pdone <- f.proxy.Run(pctx) }()
	t.Cleanup(func() {
		pcancel()
		if err := <-pdone; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	es := &embeddedtest.Store{URI: "mongodb://" + target + "/?directConnection=true"}
	f.direct = es.Client(t, options.Client().SetAppName("fault-test"))
	f.db = es.Database(t, f.direct)
	f.serve = serveInProcess(t, "--mongodb-uri", "mongodb://"+f.proxy.Addr()+"/?directConnection=true", "--database", f.db.Name(),
		"--listen", "127.0.0.1:0", "--log-level", "warn")
	return f
}

// failCommand arms (mode alwaysOn) or disarms (nil data) failCommand for serve's commands.
func (f *faultFixture) failCommand(ctx context.Context, t *testing.T, data bson.D) {
	t.Helper()
	cmd := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}
	if data != nil {
		cmd = bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
			{Key: "data", Value: append(bson.D{{Key: "appName", Value: "rollup"}}, data...)}}
	}
	if err := f.direct.Database("admin").RunCommand(ctx, cmd).Err(); err != nil {
		t.Fatalf("configureFailPoint: %v", err)
	}
}

func (f *faultFixture) commands() int {
	n := 0
	for _, c := range f.proxy.Stats().Commands {
		n += c
	}
	return n
}

// faultCase is one fault of TestServeRidesOutStoreFaults and what the test saw of it.
type faultCase struct {
	name     string
	embedded bool // needs the embedded server (stops it)
	// slow: the store answers, late; /readyz may rightly stay 200 while work progresses.
	slow  bool
	begin func(ctx context.Context, t *testing.T, f *faultFixture)
	end   func(ctx context.Context, t *testing.T, f *faultFixture)

	f                          *faultFixture
	p                          *project
	ready, firstNotReady       time.Duration
	seen                       []string // components /readyz named during the fault
	commands, conns            int      // at the proxy, before and then during the fault
	ended                      time.Time
	acked, correct, back       time.Duration // after the end: resend acknowledged, totals right, /readyz 200
	ackedOK, correctOK, backOK bool
}

// TestServeRidesOutStoreFaults holds four faults for a minute, all at once, each against its
// own serve wiring and store: NotWritablePrimary on every write command (an election that
// lasts), closeConnection on every command, every command delayed 1 s (a slow store), and the
// store stopped and restarted. serve stays up the whole time, /healthz answers 200 throughout,
// /readyz answers 503 naming the component that waits (a slow store may stay ready) and 200
// after; the store sees a bounded number of commands and connections (backoff); and once the
// store is back, an agent's resend is acknowledged and every total is right within 5 s.
func TestServeRidesOutStoreFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("holds store faults for a minute")
	}
	t.Parallel()
	ctx := testctx.Context(t)
	writes := bson.A{"insert", "update", "delete", "findAndModify"}
	all := append(bson.A{"find", "aggregate", "getMore", "killCursors", "listIndexes", "ping", "count"}, writes...)
	failOff := func(ctx context.Context, t *testing.T, f *faultFixture) { f.failCommand(ctx, t, nil) }
	cases := []*faultCase{
		{
			name: "NotWritablePrimary on every write",
			begin: func(ctx context.Context, t *testing.T, f *faultFixture) {
				f.failCommand(ctx, t, bson.D{{Key: "failCommands", Value: writes}, {Key: "errorCode", Value: 10107},
					{Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}})
			},
			end: failOff,
		},
		{
			name: "closeConnection on every command",
			begin: func(ctx context.Context, t *testing.T, f *faultFixture) {
				f.failCommand(ctx, t, bson.D{{Key: "failCommands", Value: all}, {Key: "closeConnection", Value: true}})
			},
			end: failOff,
		},
		{
			name: "every command delayed 1 s (slow store)",
			slow: true,
			begin: func(ctx context.Context, t *testing.T, f *faultFixture) {
				f.failCommand(ctx, t, bson.D{{Key: "failCommands", Value: all}, {Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 1000}})
			},
			end: failOff,
		},
		{
			name:     "store stopped",
			embedded: true,
			begin:    func(_ context.Context, _ *testing.T, f *faultFixture) { f.store.stop() },
			end:      func(_ context.Context, _ *testing.T, f *faultFixture) { f.store.start() },
		},
	}
	if os.Getenv("MONGODB_URI") != "" {
		cases = cases[:3] // the store cannot be stopped from here
	}
	for _, c := range cases {
		c.f = newFaultFixture(t, ctx)
		c.ready = waitUntil(t, 30*time.Second, c.name+": serve ready", func() bool { code, _ := readyz(c.f.serve.url); return code == http.StatusOK })
		c.p = newProject(ctx, t, c.f.db, "faults")
		for range 3 {
			if err := c.p.submit(ctx, c.f.serve.url); err != nil {
				t.Fatalf("%s: submit before the fault: %v", c.name, err)
			}
		}
		waitUntil(t, 30*time.Second, c.name+": correct totals before the fault", func() bool { return c.p.wrong(ctx, t, c.f.db) == "" })
	}

	began := time.Now()
	for _, c := range cases {
		st := c.f.proxy.Stats()
		c.commands, c.conns = c.f.commands(), int(st.Conns)
		c.begin(ctx, t, c.f)
	}
	for time.Since(began) < faultLength {
		for _, c := range cases {
			if err, done := c.f.serve.exited(); done {
				t.Fatalf("%s: serve exited %v into the fault: %v", c.name, time.Since(began), err)
			}
			if code := healthz(c.f.serve.url); code != http.StatusOK {
				t.Fatalf("%s: /healthz answered %d %v into the fault", c.name, code, time.Since(began))
			}
			code, rd := readyz(c.f.serve.url)
			if code != http.StatusServiceUnavailable {
				continue
			}
			if c.firstNotReady == 0 {
				c.firstNotReady = time.Since(began)
				t.Logf("%s: /readyz 503 after %v: %s", c.name, c.firstNotReady, notReady(rd))
				for _, comp := range rd.Components {
					if v, ok := componentReadyMetric(c.f.serve.url, comp.Component); !ok {
						t.Errorf("%s: /metrics lacks rollup_component_ready for %s", c.name, comp.Component)
					} else if !comp.Ready && v != 0 {
						t.Logf("%s: /metrics says %s ready while /readyz did not (they raced)", c.name, comp.Component)
					}
				}
			}
			for _, comp := range rd.Components {
				if !comp.Ready && !slices.Contains(c.seen, comp.Component) && comp.Reason != "" && !comp.Since.IsZero() {
					c.seen = append(c.seen, comp.Component)
				}
			}
		}
		tick := time.NewTimer(250 * time.Millisecond)
		<-tick.C // the faults last faultLength whatever happens: this paces the probes
	}
	for _, c := range cases {
		c.commands, c.conns = c.f.commands()-c.commands, int(c.f.proxy.Stats().Conns)-c.conns
		c.end(ctx, t, c.f)
		c.ended = time.Now()
	}
	// After the faults, all at once: each agent resends until acknowledged, then the totals
	// must be right, then /readyz 200; each is timed from its own fault's end.
	deadline := time.Now().Add(60 * time.Second)
	for {
		pending := 0
		for _, c := range cases {
			switch {
			case !c.ackedOK:
				pending++
				if err := c.p.submit(ctx, c.f.serve.url); err == nil {
					c.acked, c.ackedOK = time.Since(c.ended), true
				}
			case !c.correctOK:
				pending++
				if c.p.wrong(ctx, t, c.f.db) == "" {
					c.correct, c.correctOK = time.Since(c.ended), true
				}
			case !c.backOK:
				pending++
				if code, _ := readyz(c.f.serve.url); code == http.StatusOK {
					c.back, c.backOK = time.Since(c.ended), true
				}
			}
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, c := range cases {
				t.Errorf("%s: 60s after the fault: acknowledged %v, totals right %v (%s), ready %v", c.name, c.ackedOK, c.correctOK,
					c.p.wrong(ctx, t, c.f.db), c.backOK)
			}
			t.FailNow()
		}
		tick := time.NewTimer(20 * time.Millisecond)
		<-tick.C
	}
	for _, c := range cases {
		secs := faultLength.Seconds()
		during := "/readyz stayed 200"
		if c.firstNotReady > 0 {
			during = fmt.Sprintf("/readyz 503 after %v naming %v", c.firstNotReady.Round(time.Millisecond), c.seen)
		}
		t.Logf("%s for %v: ready %v after start; %s; during the fault %d store commands (%.1f/s) "+
			"and %d connections (%.1f/s); after it: resend acknowledged after %v, totals right after %v, /readyz 200 after %v",
			c.name, faultLength, c.ready.Round(time.Millisecond), during,
			c.commands, float64(c.commands)/secs, c.conns, float64(c.conns)/secs,
			c.acked.Round(time.Millisecond), c.correct.Round(time.Millisecond), c.back.Round(time.Millisecond))
		if len(c.seen) == 0 && !c.slow {
			t.Errorf("%s: /readyz never named a component during the fault", c.name)
		}
		if limit := int(secs) * 30; c.commands > limit || c.conns > limit {
			t.Errorf("%s: %d store commands and %d connections during the fault, want at most %d each (30/s)", c.name, c.commands, c.conns, limit)
		}
		if c.correct > 5*time.Second {
			t.Errorf("%s: totals right %v after the fault ended, want within 5s", c.name, c.correct)
		}
		if err := c.f.serve.stop(t); err != nil {
			t.Errorf("%s: serve: %v", c.name, err)
		}
	}
}
