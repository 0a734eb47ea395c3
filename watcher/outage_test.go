package watcher

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/retry"
	"github.com/gameops/rollup/store"
)

// outage is how long TestRunRidesOutOutages holds each fault (3 s under -short).
var outage = testctx.Window{Full: 15 * time.Second, Short: 3 * time.Second}

// TestRunRidesOutOutages holds a fault on the watcher's commands for outage (15 s) while leaves keep
// arriving (written by another client): NotWritablePrimary on every write, as in an election,
// and closeConnection on every command. Run never returns; its status turns not ready, naming
// the failure, and ready again after; the store sees a bounded number of commands (backoff);
// and the totals are correct within 5 s of the fault's end.
func TestRunRidesOutOutages(t *testing.T) {
	embeddedtest.ParallelWithFailPoints(t)
	writes := bson.A{"insert", "update", "delete", "findAndModify"}
	all := append(bson.A{"find", "aggregate", "getMore", "killCursors"}, writes...)
	tests := []struct {
		name string
		data bson.D
		// perSecond bounds the watcher's commands per second of outage.
		perSecond int
	}{
		{"NotWritablePrimary on every write", bson.D{{Key: "failCommands", Value: writes}, {Key: "errorCode", Value: 10107},
			{Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}}, 30},
		{"closeConnection on every command", bson.D{{Key: "failCommands", Value: all}, {Key: "closeConnection", Value: true}}, 30},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			embeddedtest.ParallelWithFailPoints(t) // each fault on a store of its own
			f := newHAFixture(t, 3)
			app := fmt.Sprintf("w-outage-%d", i)
			var commands atomic.Int64
			mon := &mevent.CommandMonitor{Started: func(context.Context, *mevent.CommandStartedEvent) { commands.Add(1) }}
			db := f.e.store.Client(t, options.Client().SetAppName(app).SetMonitor(mon)).Database(f.e.db.Name())
			tracker := status.New("watcher", "starting")
			w := New(db, f.e.trees, Options{Leases: true, Owner: "outage", LeaseTTL: time.Second, CheckpointInterval: 10 * time.Millisecond,
				Status: tracker}, zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
			r := f.e.start(w)
			testctx.WaitFor(t, "ready", func() bool { return tracker.State().Ready })
			f.submitRound()
			f.waitCorrect()

			before := commands.Load()
			armed := time.Now()
			f.e.store.FailPoint(t, f.e.client, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
				{Key: "data", Value: append(bson.D{{Key: "appName", Value: app}}, tc.data...)}})
			var notReady status.State
			for time.Since(armed) < outage.D() {
				f.submitRound() // leaves keep coming from the agents' side
				if st := tracker.State(); !st.Ready && notReady.Reason == "" {
					notReady = st
				}
				select {
				case err := <-r.done:
					r.once.Do(func() { r.err = err; r.cancel() })
					t.Fatalf("Run returned during the outage: %v", err)
				case <-time.After(500 * time.Millisecond):
				}
			}
			if notReady.Reason == "" {
				t.Errorf("status stayed ready during the outage")
			}
			sent := commands.Load() - before
			off := bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}
			if err := f.e.client.Database("admin").RunCommand(context.Background(), off).Err(); err != nil {
				t.Fatal(err)
			}
			back := time.Now()
			f.waitCorrect()
			correct := time.Since(back)
			testctx.WaitFor(t, "ready again", func() bool { return tracker.State().Ready })
			t.Logf("%s: %d commands in %v; status during: %q; totals correct %v after the fault ended, ready after %v",
				tc.name, sent, outage.D(), notReady.Reason, correct, time.Since(back))
			if limit := int64(tc.perSecond) * int64(outage.D()/time.Second); sent > limit {
				t.Errorf("%d commands during the outage, want at most %d", sent, limit)
			}
			if correct > 5*time.Second {
				t.Errorf("totals correct %v after the fault ended, want within 5s", correct)
			}
			if err := r.stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}

// TestRunStopsOnPermanentError: a store that refuses the change stream as unauthorized ends
// Run with that error (a configuration error: retrying cannot fix it).
func TestRunStopsOnPermanentError(t *testing.T) {
	f := newHAFixture(t, 1)
	const app = "w-unauthorized"
	db := f.e.store.Client(t, options.Client().SetAppName(app)).Database(f.e.db.Name())
	f.e.store.FailPoint(t, f.e.client, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "appName", Value: app}, {Key: "failCommands", Value: bson.A{"aggregate"}}, {Key: "errorCode", Value: 13}}}})
	tracker := status.New("watcher", "starting")
	w := New(db, f.e.trees, Options{Leases: true, LeaseTTL: time.Second, Status: tracker}, zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
	r := f.e.start(w)
	err := r.wait(t)
	if !retry.IsPermanent(err) || !strings.Contains(err.Error(), "open change stream") {
		t.Fatalf("Run = %v, want the permanent error of the change stream", err)
	}
	if st := tracker.State(); st.Ready {
		t.Fatalf("status %+v, want not ready", st)
	}
}

// TestLeaderStopsBeforeLeaseExpiry freezes a leader's lease renewals (its writes go on): it
// stops leading, and writing, before its lease expires, so the standby that takes over after
// the expiry never races it.
func TestLeaderStopsBeforeLeaseExpiry(t *testing.T) {
	f := newHAFixture(t, 2)
	const ttl = 3 * time.Second
	var frozen atomic.Bool
	leasesGo, parked := make(chan struct{}), make(chan struct{}, 1)
	t.Cleanup(func() {
		if frozen.Load() {
			close(leasesGo)
		}
	})
	start := func(owner string, setup func(*Knobs)) *running {
		opts := Options{Leases: true, Owner: owner, LeaseTTL: ttl, CheckpointInterval: 10 * time.Millisecond}
		if setup != nil {
			opts.Knobs = &Knobs{}
			setup(opts.Knobs)
		}
		return f.e.start(f.e.newWatcher(opts))
	}
	a := start("a", func(k *Knobs) {
		k.BeforeLeaseRound = func() {
			if frozen.Load() {
				select {
				case parked <- struct{}{}:
				default:
				}
				<-leasesGo
			}
		}
	})
	testctx.WaitFor(t, "a leads", func() bool { return a.w.Leadership()[0].Leader })
	f.submitRound()
	f.waitCorrect()
	frozen.Store(true)
	<-parked
	var doc struct {
		ExpiresAt time.Time `bson:"expires_at"`
	}
	if err := f.e.db.Collection(store.LeasesCollection).FindOne(context.Background(), bson.D{{Key: "_id", Value: DefaultName}}).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	testctx.WaitFor(t, "a stops leading", func() bool { return !a.w.Leadership()[0].Leader })
	if stopped := time.Now(); !stopped.Before(doc.ExpiresAt) {
		t.Fatalf("a stopped at %v, after its lease expired at %v", stopped, doc.ExpiresAt)
	}
	written := a.w.Stats().ParentWrites
	b := start("b", nil)
	for range 3 {
		f.submitRound()
	}
	testctx.WaitFor(t, "b leads", func() bool { return b.w.Leadership()[0].Leader })
	ctx := context.Background()
	testctx.WaitFor(t, "correct totals", func() bool {
		if _, err := f.e.counts.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$unset", Value: bson.D{{Key: store.FieldTerm, Value: ""}}}}); err != nil {
			t.Fatal(err)
		}
		for _, p := range f.projects {
			if f.e.mismatch(p) != "" {
				return false
			}
		}
		return true
	})
	if n := a.w.Stats().ParentWrites; n != written {
		t.Fatalf("a sent %d parent writes after it stopped leading", n-written)
	}
	frozen.Store(false)
	close(leasesGo)
	if err := a.stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("a: %v", err)
	}
	if err := b.stop(); err != nil {
		t.Fatalf("b: %v", err)
	}
}
