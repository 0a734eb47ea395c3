package watcher

import (
	"context"
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

	"github.com/gameops/rollup/tree"
)

// TestGetMoreFailsMidStream: with failGetMoreAfterCursorCheckout, a getMore of the watcher's
// stream fails while leaf events are still pending (ShutdownInProgress, which the server
// labels ResumableChangeStreamError), four times over four ticks. The driver resumes after the
// last event it delivered each time, without the watcher having to restart from its
// checkpoint: every leaf event is processed exactly once, the totals are right, and Run
// never stops.
func TestGetMoreFailsMidStream(t *testing.T) {
	e := newEnv(t)
	const project, app = "proj", "w-getmore-fault"
	t0 := baseTick()
	e.trees.add(t, project, t0.Add(-24*time.Hour), tree.Generate(project, 2, 2, 3))
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
	waitFor(t, "the first checkpoint", func() bool {
		_, ok, err := newCheckpoints(e.db, DefaultName).load(context.Background())
		return err == nil && ok
	})
	opened := aggregates.Load()

	const ticks = 4
	leaves := int64(len(tr.Leaves()))
	for i := range ticks {
		at := t0.Add(-time.Duration(i) * tick)
		waitFor(t, "a waiting getMore", func() bool { return inFlight.Load() == 1 })
		e.store.FailPoint(t, e.client, bson.D{
			{Key: "configureFailPoint", Value: "failGetMoreAfterCursorCheckout"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{{Key: "errorCode", Value: 91}, {Key: "appName", Value: app}}},
		})
		// The waiting getMore returns the first 4 events, the next one fails.
		e.fill(project, tr, at, int64(i+1), 1)
		waitFor(t, "the failed getMore", func() bool { return failed.Load() == int64(i+1) })
		e.waitCorrect(project)
	}
	waitFor(t, "every leaf event", func() bool { return w.Stats().Events >= ticks*leaves })
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
