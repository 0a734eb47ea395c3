package lease

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newDB is a fresh database on an embedded store.
func newDB(t *testing.T) *mongo.Database {
	t.Helper()
	srv := embeddedtest.Start(t)
	return srv.Database(t, srv.Client(t))
}

// clock is a settable time source for lease tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestLeaseLifecycle(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
	a := NewLeases(db, "a", time.Second, clk.now)
	b := NewLeases(db, "b", time.Second, clk.now)

	la, ok, err := a.Acquire(ctx, "w/p")
	if err != nil || !ok || la.Term < 1 {
		t.Fatalf("a acquire = %+v %v %v", la, ok, err)
	}
	if _, ok, err := b.Acquire(ctx, "w/p"); err != nil || ok {
		t.Fatalf("b acquired a held lease: %v %v", ok, err)
	}
	clk.add(900 * time.Millisecond)
	if la, ok, err = a.Renew(ctx, la); err != nil || !ok {
		t.Fatalf("a renew = %v %v", ok, err)
	}
	clk.add(900 * time.Millisecond) // past the first expiry, not the renewed one
	if _, ok, err := b.Acquire(ctx, "w/p"); err != nil || ok {
		t.Fatalf("b acquired a renewed lease: %v %v", ok, err)
	}
	if err := a.Check(ctx, la); err != nil {
		t.Fatalf("a check while leading: %v", err)
	}
	clk.add(200 * time.Millisecond) // expired
	lb, ok, err := b.Acquire(ctx, "w/p")
	if err != nil || !ok || lb.Term <= la.Term {
		t.Fatalf("b takeover = %+v %v %v (a's term %d)", lb, ok, err, la.Term)
	}
	if _, ok, err := a.Renew(ctx, la); err != nil || ok {
		t.Fatalf("stale a renewed: %v %v", ok, err)
	}
	if err := a.Check(ctx, la); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale a check = %v, want ErrFenced", err)
	}
	// Terms are global: another lease gets a larger term still.
	lo, ok, err := a.Acquire(ctx, "w/other")
	if err != nil || !ok || lo.Term <= lb.Term {
		t.Fatalf("other lease = %+v %v %v", lo, ok, err)
	}
	// A release lets a standby in at once.
	if err := b.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
	if la2, ok, err := a.Acquire(ctx, "w/p"); err != nil || !ok || la2.Term <= lo.Term {
		t.Fatalf("acquire after release = %+v %v %v", la2, ok, err)
	}
}

// TestInstanceClaim checks when a process may take an instance id: at once when nobody
// holds it, when its holder stopped, or when the holder was a process of this host that is
// gone (a restart after kill -9); after three still heartbeats when the holder was elsewhere;
// never while the holder's heartbeat moves.
func TestInstanceClaim(t *testing.T) {
	db := newDB(t)
	// A beat long enough that "at once" (a claim that watched no heartbeat: under 3 beats)
	// holds on a machine whose cores other test binaries share (100 ms did not: a claim took
	// 125 ms with four packages' tests beside it).
	const beat = 200 * time.Millisecond
	const atOnce = 3*beat - 10*time.Millisecond
	ctx := context.Background()
	mk := func(id, host string, pid int, alive bool) *Instance {
		return NewInstance(db, id, beat, time.Now, &Knobs{Host: host, PID: pid, Alive: func(int) bool { return alive }})
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	tests := []struct {
		name string
		// holder, when set, claims the id first; beating keeps its heartbeat running, stopped
		// marks it stopped.
		holder           *Instance
		beating, stopped bool
		next             *Instance
		wantDup          bool
		// minWait is the least time the claim must have watched the heartbeat.
		minWait, maxWait time.Duration
	}{
		{name: "free", next: mk("free", "h1", 10, true), maxWait: atOnce},
		{name: "holder stopped", holder: mk("stopped", "h1", 10, true), stopped: true, next: mk("stopped", "h2", 20, true), maxWait: atOnce},
		{name: "holder on this host is gone", holder: mk("gone", "h1", 10, true), next: mk("gone", "h1", 11, false), maxWait: atOnce},
		{name: "holder had this pid on this host", holder: mk("samepid", "h1", 10, true), next: mk("samepid", "h1", 10, true), maxWait: atOnce},
		{name: "holder elsewhere, heartbeat still", holder: mk("still", "h1", 10, true), next: mk("still", "h2", 10, true), minWait: 3 * beat, maxWait: 20 * beat},
		{name: "holder on this host alive, heartbeat still", holder: mk("alive-still", "h1", 10, true), next: mk("alive-still", "h1", 11, true), minWait: 3 * beat, maxWait: 20 * beat},
		{name: "holder elsewhere, heartbeat moving", holder: mk("moving", "h1", 10, true), beating: true, next: mk("moving", "h2", 10, true), wantDup: true},
		{name: "holder on this host alive, heartbeat moving", holder: mk("moving2", "h1", 10, true), beating: true, next: mk("moving2", "h1", 11, true), wantDup: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.holder != nil {
				if err := tc.holder.Claim(ctx); err != nil {
					t.Fatalf("holder claim: %v", err)
				}
				if tc.stopped {
					tc.holder.Stop(ctx, time.Now().Add(10*time.Second), log)
				}
				if tc.beating {
					bctx, cancel := context.WithCancel(ctx)
					done := make(chan error, 1)
					go func() { done <- tc.holder.Run(bctx, log) }()
					defer func() {
						cancel()
						if err := <-done; err != nil {
							t.Errorf("holder heartbeat: %v", err)
						}
					}()
				}
			}
			start := time.Now()
			err := tc.next.Claim(ctx)
			took := time.Since(start)
			var dup *DuplicateInstanceError
			switch {
			case tc.wantDup:
				if !errors.As(err, &dup) || dup.Host != tc.holder.host || dup.PID != tc.holder.pid || !dup.Permanent() {
					t.Fatalf("claim = %v, want a DuplicateInstanceError naming the holder", err)
				}
				var d instanceDoc
				if err := db.Collection(store.InstancesCollection).FindOne(ctx, bson.D{{Key: "_id", Value: tc.holder.id}}).Decode(&d); err != nil || d.Incarnation != tc.holder.incarnation {
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
				if err := tc.holder.Heartbeat(ctx); !errors.As(err, &over) || over.Host != tc.next.host || !over.Permanent() {
					t.Fatalf("old holder heartbeat = %v, want a TakenOverError naming the new holder", err)
				}
			}
			if err := tc.next.Heartbeat(ctx); err != nil {
				t.Fatalf("new holder heartbeat: %v", err)
			}
		})
	}
}

// TestFence: WithTerm adds the term to a $set without changing the update it was given, and
// TermGuard matches a stored term that is absent, older or equal, never a newer one.
func TestFence(t *testing.T) {
	set := bson.D{{Key: store.FieldOnline, Value: int64(1)}}
	upd := bson.D{{Key: "$set", Value: set}}
	got := WithTerm(upd, 7)
	if len(set) != 1 || len(got[0].Value.(bson.D)) != 2 || got[0].Value.(bson.D)[1] != (bson.E{Key: store.FieldTerm, Value: int64(7)}) {
		t.Fatalf("WithTerm = %v (set now %v)", got, set)
	}
	db := newDB(t)
	ctx := context.Background()
	coll := db.Collection("fence")
	docs := []any{bson.D{{Key: "_id", Value: "none"}}}
	for _, term := range []int64{6, 7, 8} {
		docs = append(docs, bson.D{{Key: "_id", Value: term}, {Key: store.FieldTerm, Value: term}})
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	var matched []bson.Raw
	cur, err := coll.Find(ctx, bson.D{TermGuard(7)})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &matched); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range matched {
		ids = append(ids, d.Lookup("_id").String())
	}
	slices.Sort(ids)
	if want := []string{`"none"`, `{"$numberLong":"6"}`, `{"$numberLong":"7"}`}; !slices.Equal(ids, want) {
		t.Fatalf("TermGuard(7) matched %v, want %v", ids, want)
	}
}

// TestInstanceDocumentExpired: when the instance's document disappears while its process
// lives (the TTL index expired it after a day without a heartbeat reaching the store), the
// next heartbeat claims the id again instead of reporting a takeover.
func TestInstanceDocumentExpired(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	in := NewInstance(db, "expired", time.Hour, time.Now, nil)
	if err := in.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	coll := db.Collection(store.InstancesCollection)
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: "expired"}}); err != nil {
		t.Fatal(err)
	}
	if err := in.Heartbeat(ctx); err != nil {
		t.Fatalf("heartbeat after the document expired: %v", err)
	}
	var d instanceDoc
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "expired"}}).Decode(&d); err != nil || d.Incarnation != in.incarnation || d.Stopped {
		t.Fatalf("document after the heartbeat: %+v %v", d, err)
	}
	if err := in.Heartbeat(ctx); err != nil {
		t.Fatalf("next heartbeat: %v", err)
	}
	// Another process claimed it meanwhile: a takeover, as before.
	other := NewInstance(db, "expired", time.Hour, time.Now, nil)
	if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: "expired"}}); err != nil {
		t.Fatal(err)
	}
	if err := other.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	var over *TakenOverError
	if err := in.Heartbeat(ctx); !errors.As(err, &over) {
		t.Fatalf("heartbeat after another process claimed the id: %v, want a TakenOverError", err)
	}
}
