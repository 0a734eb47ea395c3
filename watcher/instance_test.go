package watcher

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gameops/rollup/store"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// TestInstanceClaim checks when a process may take an instance id: at once when nobody
// holds it, when its holder stopped, or when the holder was a process of this host that is
// gone (a restart after kill -9); after three still heartbeats when the holder was elsewhere;
// never while the holder's heartbeat moves.
func TestInstanceClaim(t *testing.T) {
	e := newEnv(t)
	const beat = 100 * time.Millisecond
	ctx := context.Background()
	mk := func(id, host string, pid int, alive bool) *instance {
		in := newInstance(e.db, id, beat, time.Now)
		in.host, in.pid = host, pid
		in.alive = func(int) bool { return alive }
		return in
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	tests := []struct {
		name string
		// holder, when set, claims the id first; beating keeps its heartbeat running, stopped
		// marks it stopped.
		holder           *instance
		beating, stopped bool
		next             *instance
		wantDup          bool
		// minWait is the least time the claim must have watched the heartbeat.
		minWait, maxWait time.Duration
	}{
		{name: "free", next: mk("free", "h1", 10, true), maxWait: beat},
		{name: "holder stopped", holder: mk("stopped", "h1", 10, true), stopped: true, next: mk("stopped", "h2", 20, true), maxWait: beat},
		{name: "holder on this host is gone", holder: mk("gone", "h1", 10, true), next: mk("gone", "h1", 11, false), maxWait: beat},
		{name: "holder had this pid on this host", holder: mk("samepid", "h1", 10, true), next: mk("samepid", "h1", 10, true), maxWait: beat},
		{name: "holder elsewhere, heartbeat still", holder: mk("still", "h1", 10, true), next: mk("still", "h2", 10, true), minWait: 3 * beat, maxWait: 20 * beat},
		{name: "holder on this host alive, heartbeat still", holder: mk("alive-still", "h1", 10, true), next: mk("alive-still", "h1", 11, true), minWait: 3 * beat, maxWait: 20 * beat},
		{name: "holder elsewhere, heartbeat moving", holder: mk("moving", "h1", 10, true), beating: true, next: mk("moving", "h2", 10, true), wantDup: true},
		{name: "holder on this host alive, heartbeat moving", holder: mk("moving2", "h1", 10, true), beating: true, next: mk("moving2", "h1", 11, true), wantDup: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.holder != nil {
				if err := tc.holder.claim(ctx); err != nil {
					t.Fatalf("holder claim: %v", err)
				}
				if tc.stopped {
					tc.holder.stop(ctx, time.Now().Add(10*time.Second), log)
				}
				if tc.beating {
					bctx, cancel := context.WithCancel(ctx)
					done := make(chan error, 1)
					go func() { done <- tc.holder.run(bctx, log) }()
					defer func() {
						cancel()
						if err := <-done; err != nil {
							t.Errorf("holder heartbeat: %v", err)
						}
					}()
				}
			}
			start := time.Now()
			err := tc.next.claim(ctx)
			took := time.Since(start)
			var dup *DuplicateInstanceError
			switch {
			case tc.wantDup:
				if !errors.As(err, &dup) || dup.Host != tc.holder.host || dup.PID != tc.holder.pid || !dup.Permanent() {
					t.Fatalf("claim = %v, want a DuplicateInstanceError naming the holder", err)
				}
				var d instanceDoc
				if err := e.db.Collection(InstancesCollection).FindOne(ctx, bson.D{{Key: "_id", Value: tc.holder.id}}).Decode(&d); err != nil || d.Incarnation != tc.holder.incarnation {
					t.Fatalf("the holder lost its document: %+v %v", d, err)
				}
				return
			case err != nil:
				t.Fatalf("claim: %v", err)
			case took < tc.minWait || took > tc.maxWait:
				t.Errorf("claim took %v, want between %v and %v", took, tc.minWait, tc.maxWait)
			}
			if tc.holder != nil {
				// The holder learns at its next heartbeat that the id is gone.
				var over *TakenOverError
				if err := tc.holder.heartbeat(ctx); !errors.As(err, &over) || over.Host != tc.next.host || !over.Permanent() {
					t.Fatalf("old holder heartbeat = %v, want a TakenOverError naming the new holder", err)
				}
			}
			if err := tc.next.heartbeat(ctx); err != nil {
				t.Fatalf("new holder heartbeat: %v", err)
			}
		})
	}
}

// TestDuplicateInstanceRefused runs two leased watchers with one Owner on "two hosts": the
// second's Run fails with a DuplicateInstanceError, the first keeps leading.
func TestDuplicateInstanceRefused(t *testing.T) {
	f := newHAFixture(t, 2)
	onHost := func(host string) func(*Watcher) {
		return func(w *Watcher) {
			w.instanceHook = func(in *instance) { in.host, in.pid = host, 100 }
		}
	}
	opts := Options{Heartbeat: 100 * time.Millisecond}
	a := f.instance("same", opts, onHost("h1"))
	waitFor(t, "a leads", func() bool { return a.w.Leadership()[0].Leader })
	b := f.instance("same", opts, onHost("h2"))
	var dup *DuplicateInstanceError
	if err := b.wait(t); !errors.As(err, &dup) || dup.Host != "h1" {
		t.Fatalf("second Run = %v, want a DuplicateInstanceError naming h1", err)
	}
	f.submitRound()
	f.waitCorrect()
	if !a.w.Leadership()[0].Leader {
		t.Fatal("the first instance stopped leading")
	}
	if err := a.stop(); err != nil {
		t.Fatalf("a: %v", err)
	}
}

// TestRestartReclaimsLease plays a kill -9 and restart with one Owner: the dead process's
// lease has 10 s left, yet the new process leads at once, with a newer term; the dead
// process's last write, arriving after that, is refused by the term, and its heartbeat finds
// the id taken over.
func TestRestartReclaimsLease(t *testing.T) {
	f := newHAFixture(t, 3)
	const ttl = 10 * time.Second
	writes, leasesGo := make(chan struct{}), make(chan struct{})
	parked := make(chan struct{}, 1)
	frozenCh := make(chan struct{})
	closeOnce := func(c chan struct{}) func() {
		done := false
		return func() {
			if !done {
				done = true
				close(c)
			}
		}
	}
	thawWrites, thawLeases := closeOnce(writes), closeOnce(leasesGo)
	t.Cleanup(func() { thawWrites(); thawLeases() })
	opts := Options{Heartbeat: 100 * time.Millisecond}
	start := func(setup func(*Watcher)) *running {
		o := opts
		o.Leases, o.Owner, o.LeaseTTL, o.CheckpointInterval = true, "x", ttl, 10*time.Millisecond
		w := f.e.newWatcher(o)
		if setup != nil {
			setup(w)
		}
		return f.e.start(w)
	}
	old := start(func(w *Watcher) {
		w.writePastExpiry = true
		w.pause = func() {
			select {
			case <-frozenCh:
				select {
				case parked <- struct{}{}:
				default:
				}
				<-writes
			default:
			}
		}
		w.pauseLeases = func() {
			select {
			case <-frozenCh:
				<-leasesGo
			default:
			}
		}
		w.instanceHook = func(in *instance) { in.pause = w.pauseLeases }
	})
	waitFor(t, "the first process leads", func() bool { return old.w.Leadership()[0].Leader })
	for range 3 {
		f.submitRound()
	}
	waitFor(t, "its first writes", func() bool { return old.w.Stats().Events >= 9 })
	oldTerm := old.w.Leadership()[0].Term
	close(frozenCh)
	f.submitRound()
	<-parked // it has merged a burst and is about to write it: "killed" here

	restarted := time.Now()
	b := start(nil)
	waitFor(t, "the restarted process leads", func() bool { return b.w.Leadership()[0].Leader })
	took := time.Since(restarted)
	newTerm := b.w.Leadership()[0].Term
	t.Logf("restarted process leads after %v (lease TTL %v)", took, ttl)
	if took > ttl/2 {
		t.Errorf("the restart waited %v for its own lease, want it at once (TTL %v)", took, ttl)
	}
	if newTerm <= oldTerm {
		t.Fatalf("term after the restart %d, want > %d", newTerm, oldTerm)
	}
	for range 3 {
		f.submitRound()
	}
	waitFor(t, "the restarted process caught up", func() bool { return b.w.Stats().Events >= 4*3 })

	thawWrites() // the dead process's write reaches the store late
	waitFor(t, "the late write fenced", func() bool { return old.w.Stats().Fenced > 0 })
	thawLeases()
	var over *TakenOverError
	if err := old.wait(t); !errors.As(err, &over) {
		t.Fatalf("old process Run = %v, want a TakenOverError", err)
	}
	ctx := context.Background()
	n, err := f.e.counts.CountDocuments(ctx, bson.D{{Key: store.FieldRollup, Value: true}, {Key: fieldTerm, Value: bson.D{{Key: "$ne", Value: newTerm}}},
		{Key: fieldTerm, Value: bson.D{{Key: "$gt", Value: oldTerm}}}})
	if err != nil || n != 0 {
		t.Fatalf("%d parents with a term other than the two processes' (%v)", n, err)
	}
	f.submitRound()
	waitFor(t, "correct totals", func() bool {
		if _, err := f.e.counts.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$unset", Value: bson.D{{Key: fieldTerm, Value: ""}}}}); err != nil {
			t.Fatal(err)
		}
		for _, p := range f.projects {
			if f.e.mismatch(p) != "" {
				return false
			}
		}
		return true
	})
	if err := b.stop(); err != nil {
		t.Fatalf("restarted process: %v", err)
	}
}
