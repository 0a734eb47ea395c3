package retention_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/embedded/blackpipe"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/retention"
	"github.com/gameops/rollup/retry"
	"github.com/gameops/rollup/store"
)

// proxied returns db reached through a counting proxy, with appName app.
func proxied(t *testing.T, e env, app string) (*mongo.Database, *blackpipe.Proxy) {
	t.Helper()
	p := blackpipe.New(options.Client().ApplyURI(e.store.URI).Hosts[0], zap.NewNop())
	if err := p.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	via := &embeddedtest.Store{URI: fmt.Sprintf("mongodb://%s/?directConnection=true", p.Addr())}
	c := via.Client(t, options.Client().SetAppName(app).SetServerSelectionTimeout(500*time.Millisecond))
	// The short selection timeout is for the faults; the first connection (a handshake through
	// the proxy, under the race detector, beside other packages' tests) may take longer, and a
	// pass that failed on it would fail before its first delete.
	testctx.WaitFor(t, "the proxied client to connect", func() bool { return c.Ping(e.ctx, nil) == nil })
	return c.Database(e.db.Name()), p
}

// start runs enf until the returned stop is called; stop returns Run's error.
func start(t *testing.T, enf *retention.Enforcer) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- enf.Run(ctx) }()
	stopped, result := false, error(nil)
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			result = <-done
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// TestBatchesAndRate: deletes remove at most Batch documents each (one delete command per
// batch, no more) at no more than Rate documents a second.
func TestBatchesAndRate(t *testing.T) {
	e := newEnv(t)
	e.seed(t, "a", t0.Add(-2*day), t0.Add(-day), shape{leaves: 4}) // 1,152 leaves, all expired
	if err := retention.NewStore(e.db).Save(e.ctx, retention.DefaultScope, short(), t0); err != nil {
		t.Fatal(err)
	}
	db, proxy := proxied(t, e, "retention-batches")
	const batch, rate = 100, 1500
	enf := retention.New(db, retention.Options{Limits: limits, Now: func() time.Time { return t0 }, Batch: batch, Rate: rate}, zaptest.NewLogger(t))
	proxy.ResetStats()
	began := time.Now()
	rep, err := enf.Pass(e.ctx)
	took := time.Since(began)
	if err != nil || rep.Deleted[store.TierLeaves] != 1152 {
		t.Fatalf("pass: %+v, %v", rep, err)
	}
	deletes := proxy.Commands("delete")
	if len(deletes) != 12 { // ceil(1152 / 100)
		t.Errorf("%d delete commands, want 12", len(deletes))
	}
	for _, d := range deletes {
		in, err := d.LookupErr("deletes", "0", "q", "_id", "$in")
		if err != nil {
			t.Fatalf("delete without an _id list: %s", d)
		}
		if vals, _ := in.Array().Values(); len(vals) > batch {
			t.Errorf("a delete of %d documents, more than the batch of %d", len(vals), batch)
		}
	}
	// The first batch goes at once, each later one waits its share of the rate.
	if minimum := time.Duration(1152-batch) * time.Second / rate; took < minimum {
		t.Errorf("deleted 1,152 documents in %s, faster than %d/s allows (%s)", took, rate, minimum)
	}
}

// TestRunOneInstanceDeletes: of two instances running the enforcer, exactly one holds the
// lease and deletes; when it stops, the other takes over and goes on.
func TestRunOneInstanceDeletes(t *testing.T) {
	e := newEnv(t)
	e.seed(t, "a", t0.Add(-2*day), t0, shape{leaves: 1, parents: 1})
	if err := retention.NewStore(e.db).Save(e.ctx, retention.DefaultScope, short(), t0); err != nil {
		t.Fatal(err)
	}
	now := t0
	clock := func() time.Time { return now }
	opts := func(owner string) retention.Options {
		return retention.Options{Owner: owner, Interval: 50 * time.Millisecond, LeaseTTL: time.Second, Limits: limits,
			Now: clock, Rate: retention.Unlimited, Status: status.New("retention", "starting")}
	}
	a := retention.New(e.db, opts("a"), zaptest.NewLogger(t).Named("a"))
	b := retention.New(e.db, opts("b"), zaptest.NewLogger(t).Named("b"))
	stopA := start(t, a)
	testctx.WaitFor(t, "a to lead and pass", func() bool { return a.Stats().Leader && a.Stats().Passes > 0 })
	stopB := start(t, b)
	for range 30 { // b never leads while a does
		if b.Stats().Leader || b.Stats().Passes > 0 {
			t.Fatalf("b leads too: %+v", b.Stats())
		}
		tm := time.NewTimer(20 * time.Millisecond)
		<-tm.C
	}
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	testctx.WaitFor(t, "b to take over", func() bool { return b.Stats().Leader && b.Stats().Passes > 0 })
	if a.Stats().Leader {
		t.Error("a still says it leads after it stopped")
	}
	leaves := len(e.stored(t, "a")[store.TierLeaves])
	if err := stopB(); err != nil {
		t.Fatal(err)
	}
	// The stopped instances deleted up to the horizon of t0.
	if want := len(keptFrom(e.stored(t, "a")[store.TierLeaves], retention.Horizon(store.TierLeaves, retention.Period(6*time.Hour), t0))); leaves != want {
		t.Errorf("%d leaves left, want %d", leaves, want)
	}
}

// TestRunRidesOutStoreFaults: every command of the enforcer fails for a long time (a
// fail point on its appName); Run never returns, reports not ready, retries with backoff (its
// commands stay bounded), and once the store answers again it deletes and is ready.
func TestRunRidesOutStoreFaults(t *testing.T) {
	embeddedtest.ParallelWithFailPoints(t) // waits out its fault window beside the others
	e := newEnv(t)
	e.seed(t, "a", t0.Add(-2*day), t0, shape{leaves: 1, parents: 1})
	if err := retention.NewStore(e.db).Save(e.ctx, retention.DefaultScope, short(), t0); err != nil {
		t.Fatal(err)
	}
	const app = "retention-faults"
	db, proxy := proxied(t, e, app)
	fail := func(mode any) {
		cmd := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode}}
		if mode != "off" {
			cmd = append(cmd, bson.E{Key: "data", Value: bson.D{
				{Key: "failCommands", Value: bson.A{"find", "update", "findAndModify", "delete", "distinct"}},
				{Key: "errorCode", Value: 91}, // ShutdownInProgress
				{Key: "appName", Value: app},
			}})
		}
		e.store.FailPoint(t, e.c, cmd)
	}
	fail("alwaysOn")
	tr := status.New("retention", "starting")
	enf := retention.New(db, retention.Options{Owner: "x", Interval: 100 * time.Millisecond, LeaseTTL: time.Second, Limits: limits,
		Now: func() time.Time { return t0 }, Rate: retention.Unlimited, Status: tr,
		Backoff: retry.Backoff{Base: 50 * time.Millisecond, Max: time.Second}}, zaptest.NewLogger(t))
	stop := start(t, enf)
	faultFor := testctx.Window{Full: 30 * time.Second, Short: 3 * time.Second}.D()
	testctx.WaitFor(t, "not ready", func() bool { return !tr.State().Ready && tr.State().Reason != "starting" })
	proxy.ResetStats()
	began := time.Now()
	testctx.WaitFor(t, "the fault to last", func() bool { return time.Since(began) >= faultFor })
	cmds := 0
	for name, n := range proxy.Stats().Commands {
		if name != "hello" && name != "isMaster" && name != "ping" {
			cmds += n
		}
	}
	// Backoff from 50ms to at most 1s (a random half of it): a handful of ramp-up attempts,
	// then at least one per second; each attempt is one command plus the driver's retry.
	t.Logf("%d commands in %s of faults", cmds, faultFor)
	if maxCmds := 2 * int(8+2*faultFor.Seconds()); cmds == 0 || cmds > maxCmds {
		t.Errorf("%d commands in %s of faults, want 1 to %d", cmds, faultFor, maxCmds)
	}
	if len(e.stored(t, "a")[store.TierLeaves]) != 2*288 {
		t.Error("something was deleted through the fault")
	}
	fail("off")
	testctx.WaitFor(t, "a pass after the fault", func() bool { return enf.Stats().Passes > 0 && tr.State().Ready })
	if got := e.stored(t, "a")[store.TierLeaves]; len(got) == 2*288 {
		t.Error("nothing deleted after the fault")
	}
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v", err)
	}
}
