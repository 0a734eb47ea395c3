package totals_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gameops/rollup/embedded/blackpipe"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/internal/testnet"
	"github.com/gameops/rollup/metrics/totals"
)

const faultApp = "totals-fault-test"

// startProxy runs a counting proxy to target on addr until the returned stop is called.
func startProxy(t *testing.T, target, addr string) (*blackpipe.Proxy, func()) {
	t.Helper()
	p := blackpipe.New(target, zap.NewNop())
	if err := p.Listen(addr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy: %v", err)
		}
	}
	t.Cleanup(stop)
	return p, stop
}

// TestRunRidesOutStoreFaults runs a Reader through a blip (one failed command, which the
// driver's single retry hides), a store that fails every command for a long time, and a store
// that cannot be reached at all. Run never stops; the snapshot keeps the last good values and
// is marked stale; the commands it sends stay bounded by its backoff (each attempt is one
// command and the driver's one retry); it recovers when the store does, logging the outage
// once and the recovery once.
func TestRunRidesOutStoreFaults(t *testing.T) {
	p := newPipeline(t)
	tr := p.importTree(t, "faulty", prefixed("faulty", 2, 1, 2), t0.Add(-time.Hour))
	p.report(t, "faulty", t0, leafCounts(tr, func(i int) (int64, bool) { return int64(i + 5), i > 0 }), tr, 1)

	target := options.Client().ApplyURI(p.store.URI).Hosts[0]
	// The proxy is stopped and started again on its address: one no other listener is given.
	addr, err := testnet.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	proxy, stopProxy := startProxy(t, target, addr)
	via := &embeddedtest.Store{URI: fmt.Sprintf("mongodb://%s/?directConnection=true", addr)}
	client := via.Client(t, options.Client().SetAppName(faultApp).SetServerSelectionTimeout(300*time.Millisecond))
	core, logs := observer.New(zap.DebugLevel)
	r := totals.New(client.Database(p.db.Name()), totals.Options{
		Interval: time.Second, MinBackoff: 50 * time.Millisecond, Now: func() time.Time { return nowAt(t0) },
	}, zap.New(core))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
	}()
	testctx.WaitFor(t, "the first refresh", func() bool { return r.Snapshot().Refreshes >= 1 })
	good := r.Snapshot()
	if good.Stale || len(good.Projects) != 1 || good.Projects[0].Reported != 3 || good.Projects[0].Expected != 4 {
		t.Fatalf("first snapshot = %+v", good)
	}

	failPoint := func(mode any) {
		t.Helper()
		cmd := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode}}
		if mode != "off" {
			cmd = append(cmd, bson.E{Key: "data", Value: bson.D{
				{Key: "failCommands", Value: bson.A{"distinct", "find"}},
				// HostUnreachable: a retryable read error. Not ShutdownInProgress (91): since the
				// embedded server stopped adding a topologyVersion to an injected 91, as mongod,
				// the driver marks the server unknown and clears its pool, and a blip costs a refresh.
				{Key: "errorCode", Value: 6},
				{Key: "appName", Value: faultApp},
			}})
		}
		p.store.FailPoint(t, p.client, cmd)
	}

	// A blip: the driver retries the read once and the refresh succeeds.
	// Failures are counted from here: a refresh before the blip may have failed on a loaded
	// machine (the 300 ms server selection), which is not what this step checks.
	before := r.Snapshot()
	failPoint(bson.D{{Key: "times", Value: 1}})
	testctx.WaitFor(t, "two refreshes after the blip", func() bool { return r.Snapshot().Refreshes >= before.Refreshes+2 })
	if s := r.Snapshot(); s.Failures != before.Failures || s.Stale {
		var errs []string
		for _, e := range logs.All() {
			if e.ContextMap()["error"] != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", e.Message, e.ContextMap()["error"]))
			}
		}
		t.Fatalf("after a blip: failures %d (%d before it) stale %v; logged errors %q", s.Failures, before.Failures, s.Stale, errs)
	}

	// Every read fails for a long time.
	faultFor := testctx.Window{Full: 30 * time.Second, Short: 3 * time.Second}.D()
	failPoint("alwaysOn")
	testctx.WaitFor(t, "a failed refresh", func() bool { return r.Snapshot().Failures >= 1 })
	proxy.ResetStats()
	f0, start := r.Snapshot().Failures, time.Now()
	testctx.WaitFor(t, fmt.Sprintf("the fault to last %s", faultFor), func() bool { return time.Since(start) >= faultFor })
	s := r.Snapshot()
	failures, cmds := s.Failures-f0, proxy.Stats().Commands
	if !s.Stale || !reflect.DeepEqual(s.Projects, good.Projects) || !s.Tick.Equal(good.Tick) || s.LastError == "" {
		t.Errorf("during the fault: stale %v error %q projects %+v, want the last good values, stale", s.Stale, s.LastError, s.Projects)
	}
	// Backoff: from 50ms doubling to the 1s interval, of which a random half: at most about
	// 6 ramp-up attempts plus two per second after that.
	if maxFailures := int64(8 + 2*faultFor.Seconds()); failures < 2 || failures > maxFailures {
		t.Errorf("%d failed refreshes in %s, want between 2 and %d", failures, faultFor, maxFailures)
	}
	if cmds["find"] != 0 || int64(cmds["distinct"]) > 2*(failures+1) {
		t.Errorf("commands during %d failed refreshes: %v, want at most 2 distinct (one retry) per refresh and no find", failures, cmds)
	}
	t.Logf("%s of failing reads: %d failed refreshes, %v commands", faultFor, failures, cmds)

	failPoint("off")
	testctx.WaitFor(t, "recovery after the fault", func() bool { s := r.Snapshot(); return !s.Stale })

	// The store cannot be reached: the proxy is gone. Then it comes back on the same address.
	stopProxy()
	f1 := r.Snapshot().Failures
	testctx.WaitFor(t, "failed refreshes while the store is unreachable", func() bool { return r.Snapshot().Failures >= f1+3 })
	if s := r.Snapshot(); !s.Stale || !reflect.DeepEqual(s.Projects, good.Projects) {
		t.Errorf("while unreachable: stale %v projects %+v", s.Stale, s.Projects)
	}
	startProxy(t, target, addr)
	testctx.WaitFor(t, "recovery after the outage", func() bool { return !r.Snapshot().Stale })
	if s := r.Snapshot(); !reflect.DeepEqual(s.Projects, good.Projects) || s.LastError != "" {
		t.Errorf("after recovery: %+v", s)
	}

	// Two outages: each logged once when it starts and once when it ends.
	warns := logs.FilterMessage("business metrics refresh failed: keeping the last values, marked stale").Len()
	infos := logs.FilterMessage("business metrics refreshed again").Len()
	if warns != 2 || infos != 2 {
		t.Errorf("logged %d outage warnings and %d recoveries, want 2 and 2", warns, infos)
	}
}
