package retention_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/retention"
	"github.com/gameops/rollup/retry"
	"github.com/gameops/rollup/store"
)

// allCommands are the commands an enforcer sends, for a fail point that cuts it off.
var allCommands = bson.A{"find", "update", "findAndModify", "delete", "insert", "distinct", "aggregate", "count", "getMore"}

// failApp switches the failCommand fail point: the listed commands of clients named app fail
// with ShutdownInProgress, in mode ("off", "alwaysOn", {skip: n}, {times: n}).
func (e env) failApp(t *testing.T, app string, commands bson.A, mode any) {
	t.Helper()
	cmd := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode}}
	if mode != "off" {
		cmd = append(cmd, bson.E{Key: "data", Value: bson.D{
			{Key: "failCommands", Value: commands}, {Key: "errorCode", Value: 91}, {Key: "appName", Value: app}}})
	}
	e.store.FailPoint(t, e.c, cmd)
}

// oldestGone checks that what is left of before is exactly its newest len(after) documents:
// retention deletes oldest first and never leaves a hole.
func oldestGone(t *testing.T, what string, before, after []time.Time) {
	t.Helper()
	if len(after) > len(before) || !slices.Equal(after, before[len(before)-len(after):]) {
		t.Errorf("%s: the %d documents left are not the newest of the %d stored", what, len(after), len(before))
	}
}

// TestFaultMidBatch: the store starts failing the enforcer's deletes after three batches of
// a pass. The pass ends with the error having deleted exactly those three batches, the oldest
// documents, with the horizon already stored; then the fault lasts (every delete fails for a
// long while) under Run, which deletes nothing more, reports not ready and keeps its commands
// bounded; once the store answers, it finishes: exactly the expired documents are gone, and
// its counters add up to them.
func TestFaultMidBatch(t *testing.T) {
	embeddedtest.ParallelWithFailPoints(t) // waits out its fault window beside the others
	e := newEnv(t)
	e.seed(t, "a", t0.Add(-2*day), t0, shape{leaves: 4})
	if err := retention.NewStore(e.db).Save(e.ctx, retention.DefaultScope, short(), t0); err != nil {
		t.Fatal(err)
	}
	seeded := e.stored(t, "a")[store.TierLeaves]
	h := retention.Horizon(store.TierLeaves, retention.Period(6*time.Hour), t0)
	kept := keptFrom(seeded, h)
	expired := int64(len(seeded) - len(kept))

	const app, batch = "retention-mid-batch", 100
	db, proxy := proxied(t, e, app)
	tr := status.New("retention", "starting")
	enf := retention.New(db, retention.Options{Owner: "x", Interval: 100 * time.Millisecond, LeaseTTL: time.Second, Limits: limits,
		Now: func() time.Time { return t0 }, Batch: batch, Rate: retention.Unlimited, Status: tr,
		Backoff: retry.Backoff{Base: 50 * time.Millisecond, Max: time.Second}}, zaptest.NewLogger(t))

	e.failApp(t, app, bson.A{"delete"}, bson.D{{Key: "skip", Value: 3}})
	rep, err := enf.Pass(e.ctx)
	if err == nil {
		t.Fatal("the pass succeeded through failing deletes")
	}
	if rep.Deleted[store.TierLeaves] != 3*batch {
		t.Errorf("the failed pass reports %d deleted, want %d (it failed with: %v)", rep.Deleted[store.TierLeaves], 3*batch, err)
	}
	left := e.stored(t, "a")[store.TierLeaves]
	if len(left) != len(seeded)-3*batch {
		t.Errorf("%d leaves left after the failed pass, want %d", len(left), len(seeded)-3*batch)
	}
	oldestGone(t, "after the failed pass", seeded, left)
	if hz, err := store.NewHorizons(e.db).Get(e.ctx, "a"); err != nil || !hz.Leaves.Equal(h) {
		t.Errorf("horizon after the failed pass %s, %v; want %s stored before the first delete", hz.Leaves, err, h)
	}

	// The fault lasts: every delete of the enforcer fails.
	stop := start(t, enf)
	testctx.WaitFor(t, "not ready", func() bool { return !tr.State().Ready && tr.State().Reason != "starting" })
	faultFor := testctx.Window{Full: 20 * time.Second, Short: 2 * time.Second}.D()
	proxy.ResetStats()
	began := time.Now()
	testctx.WaitFor(t, "the fault to last", func() bool { return time.Since(began) >= faultFor })
	deletes := len(proxy.Commands("delete"))
	if maxDeletes := 2 * int(8+2*faultFor.Seconds()); deletes == 0 || deletes > maxDeletes {
		t.Errorf("%d delete commands in %s of faults, want 1 to %d (retried with backoff)", deletes, faultFor, maxDeletes)
	}
	if n := len(e.stored(t, "a")[store.TierLeaves]); n != len(left) {
		t.Errorf("%d leaves deleted through the fault", len(left)-n)
	}
	e.failApp(t, app, nil, "off")
	testctx.WaitFor(t, "the pass to finish", func() bool { return enf.Stats().Passes > 0 && tr.State().Ready })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := e.stored(t, "a")[store.TierLeaves]; !slices.Equal(got, kept) {
		t.Errorf("%d leaves left, want the %d from %s", len(got), len(kept), h)
	}
	if n := enf.Stats().Deleted[store.TierLeaves]; n != expired {
		t.Errorf("counted %d deleted, want %d", n, expired)
	}
	// The pass that deleted is recorded for the charts' annotations (for every project).
	evs, err := store.NewEvents(e.db).Range(e.ctx, "a", began.Add(-time.Hour), time.Now().Add(time.Minute), 10)
	if err != nil || len(evs) == 0 || evs[0].Kind != store.EventRetention || evs[0].Project != "" || !strings.Contains(evs[0].Text, "deleted") {
		t.Errorf("recorded events %+v, %v; want the retention pass", evs, err)
	}
}

// TestRestartMidRun: two projects, one with its own override, and an instance that dies in
// the middle of deleting (its connection cut: it cannot even release the lease). A second
// instance takes over once the lease expires and finishes; each project keeps exactly what
// its policy keeps, and the two instances' counts add up to what was deleted.
func TestRestartMidRun(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"a", "b"} {
		e.seed(t, p, t0.Add(-2*day), t0, shape{leaves: 4})
	}
	overrides := retention.NewStore(e.db)
	if err := overrides.Save(e.ctx, retention.DefaultScope, short(), t0); err != nil {
		t.Fatal(err)
	}
	// b keeps its leaves twice as long (12h); its 5m parents must then be kept at least as long.
	if err := overrides.Save(e.ctx, "b", retention.Override{store.TierLeaves: retention.Period(12 * time.Hour)}, t0); err != nil {
		t.Fatal(err)
	}
	kept := map[string]time.Duration{"a": 6 * time.Hour, "b": 12 * time.Hour}
	seeded := map[string][]time.Time{}
	var expired int64
	for p, period := range kept {
		seeded[p] = e.stored(t, p)[store.TierLeaves]
		expired += int64(len(seeded[p]) - len(keptFrom(seeded[p], retention.Horizon(store.TierLeaves, retention.Period(period), t0))))
	}
	deletedNow := func() int64 {
		return int64(len(seeded["a"])+len(seeded["b"])) - int64(len(e.stored(t, "a")[store.TierLeaves])+len(e.stored(t, "b")[store.TierLeaves]))
	}

	const app = "retention-dies"
	dbA, _ := proxied(t, e, app)
	opts := func(owner string) retention.Options {
		return retention.Options{Owner: owner, Interval: 100 * time.Millisecond, LeaseTTL: 2 * time.Second, Limits: limits,
			Now: func() time.Time { return t0 }, Batch: 100, Rate: 1000, Status: status.New("retention", "starting"),
			Backoff: retry.Backoff{Base: 50 * time.Millisecond, Max: 500 * time.Millisecond}}
	}
	a := retention.New(dbA, opts("a"), zaptest.NewLogger(t).Named("a"))
	stopA := start(t, a)
	testctx.WaitFor(t, "a to delete a few batches", func() bool { return a.Stats().Deleted[store.TierLeaves] >= 300 })
	e.failApp(t, app, allCommands, "alwaysOn") // a dies: none of its commands reach the store any more
	if err := stopA(); err != nil {
		t.Fatalf("a: %v", err)
	}
	byA := a.Stats().Deleted[store.TierLeaves]
	if byA >= expired {
		t.Fatalf("a deleted all %d expired leaves before it died; the test needs it to die in the middle", byA)
	}
	if n := deletedNow(); n != byA {
		t.Errorf("a counted %d deleted, the store lost %d", byA, n)
	}
	for p := range kept {
		oldestGone(t, "project "+p+" after a died", seeded[p], e.stored(t, p)[store.TierLeaves])
	}

	died := time.Now()
	b := retention.New(e.db, opts("b"), zaptest.NewLogger(t).Named("b"))
	start(t, b)
	testctx.WaitFor(t, "b to finish", func() bool { return b.Stats().Passes > 0 })
	if took := time.Since(died); took < time.Second {
		t.Errorf("b took over %s after a died, before a's lease (2s, not released) could expire", took)
	}
	for p, period := range kept {
		h := retention.Horizon(store.TierLeaves, retention.Period(period), t0)
		if got, want := e.stored(t, p)[store.TierLeaves], keptFrom(seeded[p], h); !slices.Equal(got, want) {
			t.Errorf("project %s: %d leaves left, want the %d from %s", p, len(got), len(want), h)
		}
		if hz, err := store.NewHorizons(e.db).Get(e.ctx, p); err != nil || !hz.Leaves.Equal(h) {
			t.Errorf("project %s: horizon %s, %v; want %s", p, hz.Leaves, err, h)
		}
	}
	if byB := b.Stats().Deleted[store.TierLeaves]; byA+byB != expired {
		t.Errorf("a deleted %d and b %d: %d, want %d", byA, byB, byA+byB, expired)
	}
}
