package watcher

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gameops/rollup/store"
	"go.mongodb.org/mongo-driver/v2/bson"
)

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
	e := newEnv(t)
	ctx := context.Background()
	clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
	coll := e.db.Collection(LeasesCollection, durable())
	a := leases{coll: coll, owner: "a", ttl: time.Second, now: clk.now}
	b := leases{coll: coll, owner: "b", ttl: time.Second, now: clk.now}

	la, ok, err := a.acquire(ctx, "w/p")
	if err != nil || !ok || la.term < 1 {
		t.Fatalf("a acquire = %+v %v %v", la, ok, err)
	}
	if _, ok, err := b.acquire(ctx, "w/p"); err != nil || ok {
		t.Fatalf("b acquired a held lease: %v %v", ok, err)
	}
	clk.add(900 * time.Millisecond)
	if la, ok, err = a.renew(ctx, la); err != nil || !ok {
		t.Fatalf("a renew = %v %v", ok, err)
	}
	clk.add(900 * time.Millisecond) // past the first expiry, not the renewed one
	if _, ok, err := b.acquire(ctx, "w/p"); err != nil || ok {
		t.Fatalf("b acquired a renewed lease: %v %v", ok, err)
	}
	if err := a.check(ctx, la); err != nil {
		t.Fatalf("a check while leading: %v", err)
	}
	clk.add(200 * time.Millisecond) // expired
	lb, ok, err := b.acquire(ctx, "w/p")
	if err != nil || !ok || lb.term <= la.term {
		t.Fatalf("b takeover = %+v %v %v (a's term %d)", lb, ok, err, la.term)
	}
	if _, ok, err := a.renew(ctx, la); err != nil || ok {
		t.Fatalf("stale a renewed: %v %v", ok, err)
	}
	if err := a.check(ctx, la); !errors.Is(err, errFenced) {
		t.Fatalf("stale a check = %v, want errFenced", err)
	}
	// Terms are global: another lease gets a larger term still.
	lo, ok, err := a.acquire(ctx, "w/other")
	if err != nil || !ok || lo.term <= lb.term {
		t.Fatalf("other lease = %+v %v %v", lo, ok, err)
	}
	// A release lets a standby in at once.
	if err := b.release(ctx, lb); err != nil {
		t.Fatal(err)
	}
	if la2, ok, err := a.acquire(ctx, "w/p"); err != nil || !ok || la2.term <= lo.term {
		t.Fatalf("acquire after release = %+v %v %v", la2, ok, err)
	}
}

// TestTermRefusesWrites checks the fence itself: a parent write whose rev guard matches is
// still refused (as a conflict) when the stored document has a newer term, and a checkpoint
// save of an older term fails with errFenced — refused by the term, not by time.
func TestTermRefusesWrites(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	at := baseTick()
	key := docKey{ID: "g1", Type: "group", Tick: at}
	upd := func(online int64) bson.D {
		return bson.D{{Key: "$set", Value: bson.D{{Key: store.FieldOnline, Value: online}, {Key: store.FieldVersion, Value: int64(1)}}}}
	}
	write := func(exists bool, rev, term, online int64) []int {
		t.Helper()
		c, err := writeGuarded(ctx, e.counts, []guardedWrite{{key: key, exists: exists, rev: rev, update: upd(online), term: term}})
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		return c
	}
	if c := write(false, 0, 5, 10); len(c) != 0 {
		t.Fatalf("first write conflicted: %v", c)
	}
	var doc struct {
		Online int64 `bson:"online"`
		Term   int64 `bson:"term"`
	}
	read := func() {
		t.Helper()
		if err := e.counts.FindOne(ctx, bson.D{{Key: store.FieldID, Value: key.ID}}).Decode(&doc); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if doc.Online != 10 || doc.Term != 5 {
		t.Fatalf("doc = %+v, want online 10 term 5", doc)
	}
	if c := write(true, 1, 4, 99); len(c) != 1 {
		t.Fatalf("older term's write not refused: conflicts %v", c)
	}
	if c := write(true, 1, 6, 11); len(c) != 0 {
		t.Fatalf("newer term's write refused: %v", c)
	}
	read()
	if doc.Online != 11 || doc.Term != 6 {
		t.Fatalf("doc = %+v, want online 11 term 6", doc)
	}

	tokRaw, err := bson.Marshal(bson.D{{Key: "_data", Value: "8200000001000000012B"}})
	if err != nil {
		t.Fatal(err)
	}
	newer := checkpoints{coll: e.db.Collection(CheckpointsCollection, durable()), id: "w/p", term: 7}
	older := newer
	older.term = 6
	if _, err := newer.save(ctx, tokRaw, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := older.save(ctx, tokRaw, time.Now()); !errors.Is(err, errFenced) {
		t.Fatalf("older term's checkpoint save = %v, want errFenced", err)
	}
	if _, err := newer.save(ctx, tokRaw, time.Now()); err != nil {
		t.Fatalf("same term's save: %v", err)
	}
	if cp, ok, err := newer.load(ctx); err != nil || !ok || cp.ClusterTime.T != 1 {
		t.Fatalf("load = %+v %v %v", cp, ok, err)
	}
}
