package watcher

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// fill submits every leaf of tr at tick with online = seed*1000+i and version v.
func (e *env) fill(project string, tr *tree.Tree, at time.Time, seed, v int64) {
	e.t.Helper()
	var items []bulk.Item
	for i, l := range tr.Leaves() {
		items = append(items, item(project, l.ID, l.Type, at, seed*1000+int64(i), v))
	}
	e.submit(items...)
}

func TestHistoryLost(t *testing.T) {
	e := newEnv(t, embeddedtest.Options{Configure: func(c *embedded.Config) { c.Storage.OplogMaxBytes = 64 << 10 }})
	e.store.SkipIfReal(t)
	const project = "proj"
	t0 := baseTick()
	e.trees.Add(t, project, t0.Add(-24*time.Hour), tree.Generate(project, 2, 3, 4))
	tr, _, _ := e.trees.TreeAt(context.Background(), project, t0)

	first := e.start(e.newWatcher(Options{CheckpointInterval: time.Millisecond}))
	// Its first checkpoint means its stream is open: data written from now on is streamed,
	// not replayed.
	testctx.WaitFor(t, "first checkpoint", func() bool {
		n, err := e.db.Collection(store.CheckpointsCollection).CountDocuments(context.Background(), bson.D{})
		return err == nil && n > 0
	})
	e.fill(project, tr, t0, 1, 1)
	e.waitCorrect(project)
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	if n := first.w.Stats().Replays; n != 0 {
		t.Fatalf("first start replayed %d windows, want 0 (no data yet)", n)
	}
	// Far past the oplog's retention while no watcher runs (updates of two ticks, so that the
	// replay's own parent writes do not push the new stream out of the tiny oplog too).
	for i := range 40 {
		e.fill(project, tr, t0.Add(-time.Duration(i%2)*tick), int64(i+2), int64(i+2))
	}

	core, logs := observer.New(zap.WarnLevel)
	log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Core()))
	second := e.start(New(e.db, e.trees, Options{CheckpointInterval: time.Millisecond}, log))
	e.waitCorrect(project)
	testctx.WaitFor(t, "the replay counted", func() bool { return second.w.Stats().Replays == 1 })
	if logs.FilterMessageSnippet("replaying leaves").FilterField(zap.String("reason", "change stream history lost")).Len() != 1 {
		t.Fatalf("no warning naming the lost window: %v", logs.All())
	}
	// The replay is recorded for the chart: one event for every project, its window.
	lost, err := store.NewEvents(e.db).Range(context.Background(), project, t0.Add(-48*time.Hour), time.Now().Add(time.Hour), 10)
	if err != nil || len(lost) != 1 || lost[0].Kind != store.EventHistoryLost || lost[0].Project != "" || !lost[0].End.After(lost[0].At) ||
		!strings.Contains(lost[0].Text, "replayed") {
		t.Fatalf("events after the replay: %+v, %v; want one history_lost", lost, err)
	}
	// It keeps following the new stream.
	e.fill(project, tr, t0, 99, 1000)
	e.waitCorrect(project)
	if err := second.stop(); err != nil {
		t.Fatal(err)
	}
	if n := second.w.Stats().Replays; n != 1 {
		t.Fatalf("Replays = %d, want 1", n)
	}
}

// TestMissingCheckpointWithData: leaves stored before any watcher ran (or with the
// checkpoints removed) are all recomputed at the first start — counted as a replay, but said
// at info level: nothing was lost.
func TestMissingCheckpointWithData(t *testing.T) {
	e := newEnv(t)
	const project = "proj"
	t0 := baseTick()
	e.trees.Add(t, project, t0.Add(-24*time.Hour), tree.Generate(project, 2, 2, 3))
	tr, _, _ := e.trees.TreeAt(context.Background(), project, t0)
	e.fill(project, tr, t0, 1, 1) // before any watcher ran
	core, logs := observer.New(zap.InfoLevel)
	r := e.start(New(e.db, e.trees, Options{}, zap.New(core)))
	e.waitCorrect(project)
	testctx.WaitFor(t, "the replay counted", func() bool { return r.w.Stats().Replays == 1 })
	if n := logs.FilterLevelExact(zap.WarnLevel).Len(); n != 0 {
		t.Errorf("%d warnings at a start without a checkpoint: %v", n, logs.FilterLevelExact(zap.WarnLevel).All())
	}
	if logs.FilterMessage("no checkpoint: recomputed the parents of every stored leaf").FilterField(zap.Int64("leaves", int64(len(tr.Leaves())))).Len() != 1 {
		t.Errorf("no info line with the leaves recomputed: %v", logs.All())
	}
}

// TestFirstStartQuiet: the first start of a deployment (no checkpoint, no leaf) is normal:
// no warning, no replay counted, one info line.
func TestFirstStartQuiet(t *testing.T) {
	e := newEnv(t)
	core, logs := observer.New(zap.InfoLevel)
	r := e.start(New(e.db, e.trees, Options{CheckpointInterval: time.Millisecond}, zap.New(core)))
	testctx.WaitFor(t, "the first checkpoint", func() bool {
		_, ok, err := newCheckpoints(e.db, DefaultName).load(context.Background())
		return err == nil && ok
	})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if n := logs.FilterLevelExact(zap.WarnLevel).Len(); n != 0 {
		t.Errorf("%d warnings at a first start: %v", n, logs.FilterLevelExact(zap.WarnLevel).All())
	}
	if logs.FilterMessage("no checkpoint and no leaves: watching from now").Len() != 1 {
		t.Errorf("no info line for the first start: %v", logs.All())
	}
	if n := r.w.Stats().Replays; n != 0 {
		t.Errorf("Replays = %d at a first start, want 0", n)
	}
}

func TestInvalidate(t *testing.T) {
	e := newEnv(t)
	const project = "proj"
	t0 := baseTick()
	e.trees.Add(t, project, t0.Add(-24*time.Hour), tree.Generate(project, 2, 2, 3))
	tr, _, _ := e.trees.TreeAt(context.Background(), project, t0)
	core, logs := observer.New(zap.InfoLevel)
	r := e.start(New(e.db, e.trees, Options{CheckpointInterval: time.Millisecond}, zap.New(core)))
	e.fill(project, tr, t0, 1, 1)
	e.waitCorrect(project)

	if err := e.counts.Drop(context.Background()); err != nil {
		t.Fatal(err)
	}
	testctx.WaitFor(t, "the restart after invalidate", func() bool {
		return logs.FilterMessageSnippet("invalidated").Len() > 0
	})
	e.createIndex()
	e.fill(project, tr, t0, 2, 2)
	e.waitCorrect(project)
	if p, ok := e.parentDoc(project, tree.TypeProject, t0); !ok || p.Reported != int64(len(tr.Leaves())) {
		t.Fatalf("root after the drop = %+v (%v)", p, ok)
	}
	select {
	case err := <-r.done:
		t.Fatalf("Run returned %v after an invalidate", err)
	default:
	}
}

// watcherClient connects a client with its own appName (so fail points hit only it) and a
// monitor counting the failures of command cmd whose message contains want.
func (e *env) watcherClient(app string, failed *atomic.Int64, cmd, want string) *mongo.Database {
	mon := &mevent.CommandMonitor{Failed: func(_ context.Context, ev *mevent.CommandFailedEvent) {
		if ev.CommandName == cmd && ev.Failure != nil && strings.Contains(ev.Failure.Error(), want) {
			failed.Add(1)
		}
	}}
	c := e.store.Client(e.t, options.Client().SetAppName(app).SetMonitor(mon))
	return c.Database(e.db.Name())
}

func TestFailPoints(t *testing.T) {
	t.Run("getMore CursorNotFound is resumed by the driver", func(t *testing.T) {
		e := newEnv(t)
		const project = "proj"
		t0 := baseTick()
		e.trees.Add(t, project, t0.Add(-24*time.Hour), tree.Generate(project, 2, 2, 3))
		tr, _, _ := e.trees.TreeAt(context.Background(), project, t0)
		var failed atomic.Int64
		db := e.watcherClient("w-getmore", &failed, "getMore", "(CursorNotFound)")
		r := e.start(New(db, e.trees, Options{MaxAwait: 50 * time.Millisecond}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))))
		e.fill(project, tr, t0, 1, 1)
		e.waitCorrect(project)
		e.store.FailPoint(t, e.client, bson.D{
			{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{
				{Key: "failCommands", Value: bson.A{"getMore"}},
				{Key: "errorCode", Value: 43},
				{Key: "appName", Value: "w-getmore"},
			}},
		})
		testctx.WaitFor(t, "the failed getMore", func() bool { return failed.Load() == 1 })
		e.fill(project, tr, t0, 2, 2)
		e.waitCorrect(project)
		select {
		case err := <-r.done:
			t.Fatalf("Run returned %v", err)
		default:
		}
	})

	t.Run("writeConcernError on the parents' update", func(t *testing.T) {
		e := newEnv(t)
		const project = "proj"
		t0 := baseTick()
		e.trees.Add(t, project, t0.Add(-24*time.Hour), tree.Generate(project, 2, 2, 3))
		tr, _, _ := e.trees.TreeAt(context.Background(), project, t0)
		var failed atomic.Int64
		db := e.watcherClient("w-wce", &failed, "update", "")
		core, logs := observer.New(zap.WarnLevel)
		w := New(db, e.trees, Options{CheckpointInterval: time.Hour}, zap.New(core))
		r := e.start(w)
		// Wait for the first checkpoint so that the next "update" is a parent write.
		testctx.WaitFor(t, "the first checkpoint", func() bool {
			_, ok, err := newCheckpoints(e.db, DefaultName).load(context.Background())
			return err == nil && ok
		})
		e.store.FailPoint(t, e.client, bson.D{
			{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{
				{Key: "failCommands", Value: bson.A{"update"}},
				{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}, {Key: "errmsg", Value: "waiting for replication timed out"}}},
				{Key: "appName", Value: "w-wce"},
			}},
		})
		e.fill(project, tr, t0, 1, 1)
		e.waitCorrect(project)
		if n := logs.FilterMessageSnippet("unknown outcome").Len(); n != 1 {
			t.Fatalf("%d unknown-outcome warnings, want 1: %v", n, logs.All())
		}
		// 1 root + 2 groups + 4 servers, each written once; the re-read finds the writes applied.
		if st := w.Stats(); st.ParentWrites != 7 {
			t.Fatalf("ParentWrites = %d, want 7 (%+v)", st.ParentWrites, st)
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a failed parent read restarts the stream from the last safe position", func(t *testing.T) {
		e := newEnv(t)
		const project = "proj"
		t0 := baseTick()
		e.trees.Add(t, project, t0.Add(-24*time.Hour), tree.Generate(project, 2, 2, 3))
		tr, _, _ := e.trees.TreeAt(context.Background(), project, t0)
		var failed atomic.Int64
		db := e.watcherClient("w-find", &failed, "find", "")
		core, logs := observer.New(zap.WarnLevel)
		r := e.start(New(db, e.trees, Options{}, zap.New(core)))
		testctx.WaitFor(t, "the first checkpoint", func() bool {
			_, ok, err := newCheckpoints(e.db, DefaultName).load(context.Background())
			return err == nil && ok
		})
		e.store.FailPoint(t, e.client, bson.D{
			{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
			{Key: "data", Value: bson.D{
				{Key: "failCommands", Value: bson.A{"find"}},
				{Key: "errorCode", Value: 2},
				{Key: "appName", Value: "w-find"},
			}},
		})
		e.fill(project, tr, t0, 1, 1)
		e.waitCorrect(project)
		if failed.Load() != 1 || logs.FilterMessageSnippet("restarting").Len() != 1 {
			t.Fatalf("failed finds %d, logs %v", failed.Load(), logs.All())
		}
		select {
		case err := <-r.done:
			t.Fatalf("Run returned %v", err)
		default:
		}
	})
}
