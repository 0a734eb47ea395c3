package watcher

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

const testTTL = time.Second

// haFixture is a store with several projects, their leaves, and watcher instances.
type haFixture struct {
	e        *env
	projects []string
	leaves   map[string][]tree.Node
	ticks    []time.Time
	rng      *rand.Rand
	version  int64
}

func newHAFixture(t *testing.T, projects int) *haFixture {
	e := newEnv(t)
	f := &haFixture{e: e, leaves: map[string][]tree.Node{}, rng: rand.New(rand.NewPCG(3, 9))}
	t0 := baseTick()
	f.ticks = []time.Time{t0, t0.Add(-tick)}
	for i := range projects {
		p := fmt.Sprintf("game-%d", i)
		f.projects = append(f.projects, p)
		// Node ids are keys of the whole counts collection: prefix them per project.
		nodes := tree.Generate(p, 2, 2, 3)
		for j := range nodes {
			if nodes[j].Parent != "" {
				nodes[j].ID = p + ":" + nodes[j].ID
			}
			if nodes[j].Parent != "" && nodes[j].Parent != p {
				nodes[j].Parent = p + ":" + nodes[j].Parent
			}
		}
		e.trees.Add(t, p, t0.Add(-time.Hour), nodes)
		tr, _, _ := e.trees.TreeAt(context.Background(), p, t0)
		f.leaves[p] = tr.Leaves()
	}
	return f
}

// submitRound writes one random leaf of every project (a newer version each time).
func (f *haFixture) submitRound() {
	items := make([]bulk.Item, 0, len(f.projects))
	for _, p := range f.projects {
		l := f.leaves[p][f.rng.IntN(len(f.leaves[p]))]
		f.version++
		items = append(items, item(p, l.ID, l.Type, f.ticks[f.rng.IntN(len(f.ticks))], int64(f.rng.IntN(1000)), f.version))
	}
	f.e.submit(items...)
}

func (f *haFixture) waitCorrect() {
	for _, p := range f.projects {
		f.e.waitCorrect(p)
	}
}

// instance starts a leased watcher.
func (f *haFixture) instance(owner string, opts Options, setup func(*Knobs)) *running {
	opts.Leases, opts.Owner, opts.LeaseTTL = true, owner, testTTL
	opts.CheckpointInterval = 10 * time.Millisecond
	if setup != nil {
		opts.Knobs = &Knobs{}
		setup(opts.Knobs)
	}
	return f.e.start(f.e.newWatcher(opts))
}

// leaderOf returns the index in rs of the instance leading partition i (-1: none), failing
// when two lead it.
func leaderOf(t *testing.T, rs []*running, i int) int {
	t.Helper()
	at := -1
	for j, r := range rs {
		if r.w.Leadership()[i].Leader {
			if at >= 0 {
				t.Fatalf("partition %d has two leaders: %d and %d", i, at, j)
			}
			at = j
		}
	}
	return at
}

// TestFailover runs three instances over two hash partitions (one partition each at most, so
// one is a standby), stops a leader mid-stream (its context cancelled: it finishes its burst
// and releases its lease), and checks that the standby takes over and every total is right.
func TestFailover(t *testing.T) {
	f := newHAFixture(t, 6)
	parts, err := ParsePartitions("hash:2")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Partitions: parts, MaxPartitions: 1}
	rs := []*running{f.instance("a", opts, nil), f.instance("b", opts, nil), f.instance("c", opts, nil)}
	testctx.WaitFor(t, "both partitions led", func() bool { return leaderOf(t, rs, 0) >= 0 && leaderOf(t, rs, 1) >= 0 })
	for range 5 {
		f.submitRound()
	}
	old := leaderOf(t, rs, 0)
	oldTerm := rs[old].w.Leadership()[0].Term
	stopped := time.Now()
	if err := rs[old].stop(); err != nil {
		t.Fatalf("stopped leader: %v", err)
	}
	for range 5 {
		f.submitRound() // leaves keep coming during the takeover
	}
	testctx.WaitFor(t, "a new leader of partition 0", func() bool { return leaderOf(t, rs, 0) >= 0 })
	nl := leaderOf(t, rs, 0)
	// From the stop to when the new leader took the lease (Since), not to when this test
	// noticed it after its submissions and polling.
	took := rs[nl].w.Leadership()[0].Since.Sub(stopped)
	if nl == old || rs[nl].w.Leadership()[0].Term <= oldTerm {
		t.Fatalf("new leader %d term %d, old %d term %d", nl, rs[nl].w.Leadership()[0].Term, old, oldTerm)
	}
	t.Logf("graceful takeover of partition 0 after %v (TTL %v)", took, testTTL)
	if took > testTTL {
		t.Errorf("takeover after a release took %v, want < TTL %v", took, testTTL)
	}
	for range 5 {
		f.submitRound()
	}
	f.waitCorrect()
	for _, r := range rs {
		if err := r.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
}

// TestStaleLeaderFenced freezes the only leader in the middle of a burst (its writes and its
// lease renewals both stop, as in a long GC pause or SIGSTOP), lets a standby take over after
// the TTL, then unfreezes the stale leader: its parent write is refused by the term (it
// stops, fenced), the totals are right, and the surviving documents carry the new term.
func TestStaleLeaderFenced(t *testing.T) {
	f := newHAFixture(t, 3)
	var frozen atomic.Bool
	writes, leasesGo := make(chan struct{}), make(chan struct{})
	parked := make(chan struct{}, 1)
	closeOnce := func(c chan struct{}) func() {
		var once sync.Once
		return func() { once.Do(func() { close(c) }) }
	}
	thawWrites, thawLeases := closeOnce(writes), closeOnce(leasesGo)
	t.Cleanup(func() { thawWrites(); thawLeases() })
	a := f.instance("a", Options{}, func(k *Knobs) {
		k.WritePastExpiry = true // its timers are late too, as after SIGSTOP
		k.Recompute.BeforeFencedWrite = func() {
			if frozen.Load() {
				select {
				case parked <- struct{}{}:
				default:
				}
				<-writes
			}
		}
		k.BeforeLeaseRound = func() {
			if frozen.Load() {
				<-leasesGo
			}
		}
	})
	testctx.WaitFor(t, "a leads", func() bool { return a.w.Leadership()[0].Leader })
	for range 3 {
		f.submitRound()
	}
	testctx.WaitFor(t, "a's first writes", func() bool { return a.w.Stats().Events >= 9 })
	termA := a.w.Leadership()[0].Term
	frozen.Store(true)
	f.submitRound()
	<-parked // a has read and merged a burst and is about to write it
	frozenAt := time.Now()

	b := f.instance("b", Options{}, nil)
	testctx.WaitFor(t, "b takes over", func() bool { return b.w.Leadership()[0].Leader })
	took := time.Since(frozenAt)
	termB := b.w.Leadership()[0].Term
	if termB <= termA {
		t.Fatalf("b's term %d <= a's %d", termB, termA)
	}
	t.Logf("takeover from a frozen leader after %v (TTL %v, renewal every %v)", took, testTTL, testTTL/3)
	for range 3 {
		f.submitRound()
	}
	testctx.WaitFor(t, "b processed the frozen burst and more", func() bool { return b.w.Stats().Events >= 4*3 })

	thawWrites() // a resumes its stale burst; its lease loop is still frozen
	testctx.WaitFor(t, "a fenced", func() bool { return a.w.Stats().Fenced > 0 })
	thawLeases()
	testctx.WaitFor(t, "a stands by", func() bool { return !a.w.Leadership()[0].Leader })
	if !b.w.Leadership()[0].Leader {
		t.Fatal("b lost the lease to the stale leader")
	}
	f.submitRound()
	if err := a.stop(); err != nil {
		t.Fatalf("a: %v", err)
	}
	ctx := context.Background()
	n, err := f.e.counts.CountDocuments(ctx, bson.D{{Key: store.FieldRollup, Value: true}, {Key: store.FieldTerm, Value: bson.D{{Key: "$gt", Value: termB}}}})
	if err != nil || n != 0 {
		t.Fatalf("%d parents with a term newer than b's (%v)", n, err)
	}
	n, err = f.e.counts.CountDocuments(ctx, bson.D{{Key: store.FieldRollup, Value: true}, {Key: store.FieldTerm, Value: termB}})
	if err != nil || n == 0 {
		t.Fatalf("no parent written with b's term (%v)", err)
	}
	// The totals check reads parents with store.DecodeParent, which does not know the term:
	// strip it before each check (harmless to b, whose guard accepts an absent term).
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
	if err := b.stop(); err != nil {
		t.Fatalf("b: %v", err)
	}
	var cp struct {
		Term int64 `bson:"term"`
	}
	if err := f.e.db.Collection(store.CheckpointsCollection).FindOne(ctx, bson.D{{Key: "_id", Value: DefaultName}}).Decode(&cp); err != nil || cp.Term != termB {
		t.Fatalf("checkpoint term = %d (%v), want b's %d", cp.Term, err, termB)
	}
}
