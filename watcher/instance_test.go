package watcher

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/lease"
	"github.com/gameops/rollup/store"
)

// TestDuplicateInstanceRefused runs two leased watchers with one Owner on "two hosts": the
// second's Run fails with a DuplicateInstanceError, the first keeps leading.
func TestDuplicateInstanceRefused(t *testing.T) {
	f := newHAFixture(t, 2)
	onHost := func(host string) func(*Knobs) {
		return func(k *Knobs) { k.Lease.Host, k.Lease.PID = host, 100 }
	}
	opts := Options{Heartbeat: 100 * time.Millisecond}
	a := f.instance("same", opts, onHost("h1"))
	waitFor(t, "a leads", func() bool { return a.w.Leadership()[0].Leader })
	b := f.instance("same", opts, onHost("h2"))
	var dup *lease.DuplicateInstanceError
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
	start := func(setup func(*Knobs)) *running {
		o := opts
		o.Leases, o.Owner, o.LeaseTTL, o.CheckpointInterval = true, "x", ttl, 10*time.Millisecond
		if setup != nil {
			o.Knobs = &Knobs{}
			setup(o.Knobs)
		}
		return f.e.start(f.e.newWatcher(o))
	}
	old := start(func(k *Knobs) {
		k.WritePastExpiry = true
		k.Recompute.BeforeFencedWrite = func() {
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
		k.BeforeLeaseRound = func() {
			select {
			case <-frozenCh:
				<-leasesGo
			default:
			}
		}
		k.Lease.BeforeHeartbeat = k.BeforeLeaseRound
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
	var over *lease.TakenOverError
	if err := old.wait(t); !errors.As(err, &over) {
		t.Fatalf("old process Run = %v, want a TakenOverError", err)
	}
	ctx := context.Background()
	n, err := f.e.counts.CountDocuments(ctx, bson.D{{Key: store.FieldRollup, Value: true}, {Key: store.FieldTerm, Value: bson.D{{Key: "$ne", Value: newTerm}}},
		{Key: store.FieldTerm, Value: bson.D{{Key: "$gt", Value: oldTerm}}}})
	if err != nil || n != 0 {
		t.Fatalf("%d parents with a term other than the two processes' (%v)", n, err)
	}
	f.submitRound()
	waitFor(t, "correct totals", func() bool {
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
	if err := b.stop(); err != nil {
		t.Fatalf("restarted process: %v", err)
	}
}
