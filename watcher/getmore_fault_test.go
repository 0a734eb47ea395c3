package watcher

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/tree"
)

// TestGetMoreFailsMidStream: with failGetMoreAfterCursorCheckout, a getMore of the watcher's
// stream fails while leaf events are still pending (ShutdownInProgress, which the server
// labels ResumableChangeStreamError), four times over four ticks. The driver resumes after the
// last event it delivered each time, without the watcher having to restart from its
// checkpoint: every leaf event is processed exactly once, the totals are right, and Run
// never stops.
func TestGetMoreFailsMidStream(t *testing.T) {
	embeddedtest.ParallelWithFailPoints(t)
	e := newEnv(t)
	const project, app = "proj", "w-getmore-fault"
	t0 := baseTick()
	e.trees.Add(t, project, t0.Add(-24*time.Hour), tree.Generate(project, 2, 2, 3))
	tr, _, _ := e.trees.TreeAt(context.Background(), project, t0)

	// inFlight counts the watcher's getMores started and not finished.
	var failed, aggregates, inFlight atomic.Int64
	mon := &mevent.CommandMonitor{
		Started: func(_ context.Context, ev *mevent.CommandStartedEvent) {
			switch ev.CommandName {
			case "aggregate":
				aggregates.Add(1)
			case "getMore":
				inFlight.Add(1)
			}
		},
		Succeeded: func(_ context.Context, ev *mevent.CommandSucceededEvent) {
			if ev.CommandName == "getMore" {
				inFlight.Add(-1)
			}
		},
		Failed: func(_ context.Context, ev *mevent.CommandFailedEvent) {
			if ev.CommandName != "getMore" {
				return
			}
			inFlight.Add(-1)
			if strings.Contains(ev.Failure.Error(), "failGetMoreAfterCursorCheckout") {
				failed.Add(1)
			}
		},
	}
	db := e.store.Client(t, options.Client().SetAppName(app).SetMonitor(mon)).Database(e.db.Name())
	// Small batches: a tick's events take several getMores. A long await: the fail point is
	// armed while a getMore waits (its cursor is already checked out), so the one that fails
	// is the next, sent while the tick's events are still pending.
	core, logs := observer.New(zap.WarnLevel)
	log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Core()))
	w := New(db, e.trees, Options{BatchSize: 4, MaxAwait: time.Second}, log)
	r := e.start(w)
	testctx.WaitFor(t, "the first checkpoint", func() bool {
		_, ok, err := newCheckpoints(e.db, DefaultName).load(context.Background())
		return err == nil && ok
	})
	opened := aggregates.Load()

	const ticks = 4
	leaves := int64(len(tr.Leaves()))
	for i := range ticks {
		at := t0.Add(-time.Duration(i) * tick)
		testctx.WaitFor(t, "a waiting getMore", func() bool { return inFlight.Load() == 1 })
		e.store.FailPoint(t, e.client, bson.D{
			{Key: "configureFailPoint", Value: "failGetMoreAfterCursorCheckout"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "errorCode", Value: 91}, {Key: "appName", Value: app}}},
		})
		// The waiting getMore returns the first 4 events, the next one fails.
		e.fill(project, tr, at, int64(i+1), 1)
		testctx.WaitFor(t, "the failed getMore", func() bool { return failed.Load() == int64(i+1) })
		e.waitCorrect(project)
	}
	testctx.WaitFor(t, "every leaf event", func() bool { return w.Stats().Events >= ticks*leaves })
	st := w.Stats()
	if st.Events != ticks*leaves || st.Replays != 0 {
		t.Errorf("Events = %d, Replays = %d; want %d events (each leaf once) and no replay", st.Events, st.Replays, ticks*leaves)
	}
	if n := aggregates.Load() - opened; n != ticks {
		t.Errorf("%d resumes, want %d (one per failed getMore)", n, ticks)
	}
	// The driver resumed by itself: the watcher never had to restart from its checkpoint.
	if n := logs.FilterMessageSnippet("restarting").Len(); n != 0 {
		t.Errorf("the watcher restarted %d times: %v", n, logs.All())
	}
	e.waitCorrect(project)
	select {
	case err := <-r.done:
		t.Fatalf("Run returned %v", err)
	default:
	}
}

// TestGetMoreAlwaysFails: with every getMore of the watcher's idle stream failing
// (failGetMoreAfterCursorCheckout alwaysOn, ShutdownInProgress), the driver resumes the
// stream inside every TryNext and returns an empty batch at once — thousands of
// aggregate/getMore pairs a second if taken for an idle stream. The watcher allows one such
// call and then backs off (capped, jittered): over 30 s the store sees a bounded number of
// commands, Run never returns, the status says why, and once the fault ends the leaves
// written meanwhile are rolled up.
func TestGetMoreAlwaysFails(t *testing.T) {
	if testing.Short() {
		t.Skip("a 30s fault")
	}
	embeddedtest.ParallelWithFailPoints(t) // the 30 s fault overlaps the other tests' windows
	const fault = 30 * time.Second
	e := newEnv(t)
	const project, app = "proj", "w-getmore-always"
	t0 := baseTick()
	e.trees.Add(t, project, t0.Add(-24*time.Hour), tree.Generate(project, 2, 2, 3))
	tr, _, _ := e.trees.TreeAt(context.Background(), project, t0)

	var aggregates, getMores atomic.Int64
	mon := &mevent.CommandMonitor{Started: func(_ context.Context, ev *mevent.CommandStartedEvent) {
		switch ev.CommandName {
		case "aggregate":
			aggregates.Add(1)
		case "getMore":
			getMores.Add(1)
		}
	}}
	db := e.store.Client(t, options.Client().SetAppName(app).SetMonitor(mon)).Database(e.db.Name())
	tracker := status.New("watcher", "starting")
	w := New(db, e.trees, Options{CheckpointInterval: 10 * time.Millisecond, Status: tracker},
		zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
	r := e.start(w)
	testctx.WaitFor(t, "ready", func() bool { return tracker.State().Ready })
	e.fill(project, tr, t0, 1, 1)
	e.waitCorrect(project)

	aggBefore, getMoreBefore := aggregates.Load(), getMores.Load()
	e.store.FailPoint(t, e.client, bson.D{
		{Key: "configureFailPoint", Value: "failGetMoreAfterCursorCheckout"},
		{Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "errorCode", Value: 91}, {Key: "appName", Value: app}}},
	})
	armed := time.Now()
	// The reasons the status gave while not ready. Besides the failing resumes it may show,
	// for a moment, a checkpoint save that failed because the getMore's error (91) cleared
	// the connection pool under it (seen when the package's fault tests overlap).
	var notReady []string
	for time.Since(armed) < fault {
		if st := tracker.State(); !st.Ready && !slices.Contains(notReady, st.Reason) {
			notReady = append(notReady, st.Reason)
		}
		select {
		case err := <-r.done:
			r.once.Do(func() { r.err = err; r.cancel() })
			t.Fatalf("Run returned during the fault: %v", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
	e.fill(project, tr, t0, 2, 2) // written during the fault, streamed after it
	aggs, gets := aggregates.Load()-aggBefore, getMores.Load()-getMoreBefore
	off := bson.D{{Key: "configureFailPoint", Value: "failGetMoreAfterCursorCheckout"}, {Key: "mode", Value: "off"}}
	if err := e.client.Database("admin").RunCommand(context.Background(), off).Err(); err != nil {
		t.Fatal(err)
	}
	e.waitCorrect(project)
	t.Logf("%d aggregates and %d getMores in %v of failing getMores; status %q", aggs, gets, fault, notReady)
	// Each backoff attempt opens a stream (aggregate) and lets the driver resume it twice
	// (getMore, aggregate, twice): 5 commands, one attempt per 1–2 s once the backoff
	// reaches its cap. Unbounded, it was ~8,000 pairs a second.
	if limit := int64(6 * fault / time.Second); aggs+gets > limit {
		t.Errorf("%d aggregates + getMores in %v, want at most %d", aggs+gets, fault, limit)
	}
	if aggs == 0 || gets == 0 {
		t.Errorf("no command during the fault (%d aggregates, %d getMores): the test did not exercise the stream", aggs, gets)
	}
	resumes := func(r string) bool { return strings.Contains(r, "getMores keep failing") }
	poolCleared := func(r string) bool {
		return strings.Contains(r, "save checkpoint") && strings.Contains(r, "failGetMoreAfterCursorCheckout")
	}
	if !slices.ContainsFunc(notReady, resumes) ||
		slices.ContainsFunc(notReady, func(r string) bool { return !resumes(r) && !poolCleared(r) }) {
		t.Errorf("status during the fault %q, want it to name the failing resumes (and nothing else but a checkpoint save the fault's pool clear failed)", notReady)
	}
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
