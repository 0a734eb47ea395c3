package watcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb/treedbtest"
)

// TestMain overlaps the fault windows of the parallel tests (30 s, two of 15 s, 12 s, 8 s:
// each on a store of its own, mostly waiting), 2 at a time by default on 2 cores.
func TestMain(m *testing.M) {
	embeddedtest.OverlapWaits(8)
	goleak.VerifyTestMain(m)
}

const tick = tree.DefaultTick

// env is an embedded store with the counts collection's unique index, a bulk writer for
// leaves and a tree source.
type env struct {
	t      testing.TB
	store  *embeddedtest.Store
	client *mongo.Client
	db     *mongo.Database
	counts *mongo.Collection
	trees  *treedbtest.Trees
	leaves *bulk.Writer
}

func newEnv(t testing.TB, opts ...embeddedtest.Options) *env {
	t.Helper()
	srv := embeddedtest.Start(t, opts...)
	client := srv.Client(t)
	db := srv.Database(t, client)
	e := &env{t: t, store: srv, client: client, db: db, counts: db.Collection(store.CountsCollection), trees: &treedbtest.Trees{}}
	e.createIndex()
	e.leaves = bulk.New(e.counts, bulk.Options{}, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.leaves.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("bulk writer: %v", err)
		}
	})
	return e
}

func (e *env) createIndex() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := e.counts.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{
			{Key: store.FieldID, Value: 1},
			{Key: store.FieldType, Value: 1},
			{Key: store.FieldTimestamp, Value: 1},
		},
		Options: options.Index().SetUnique(true).SetName(store.CountsKeyIndex),
	})
	if err != nil {
		e.t.Fatalf("create index: %v", err)
	}
	for _, ix := range store.Indexes() {
		if ix.Collection == store.HourlyCollection || ix.Collection == store.DailyCollection {
			if _, err := e.db.Collection(ix.Collection).Indexes().CreateOne(ctx, ix.Model()); err != nil {
				e.t.Fatalf("create index: %v", err)
			}
		}
	}
}

// submit writes leaves through the bulk writer and fails the test on any error.
func (e *env) submit(items ...bulk.Item) []bulk.Result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := e.leaves.Submit(ctx, items)
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	for i, r := range res {
		if r.Outcome == bulk.OutcomeRejected || r.Outcome == bulk.OutcomeUnknown {
			e.t.Fatalf("submit item %d: %v %v", i, r.Outcome, r.Err)
		}
	}
	return res
}

func item(project, id, typ string, at time.Time, online, version int64) bulk.Item {
	return bulk.Item{
		Key:     bulk.Key{ID: id, Type: typ, Timestamp: at},
		Project: project, Online: online, Version: version, SubmissionID: fmt.Sprintf("s-%s-%d", id, version),
	}
}

// running is a watcher whose Run goroutine the test owns.
type running struct {
	w      *Watcher
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func (e *env) newWatcher(opts Options) *Watcher {
	return New(e.db, e.trees, opts, zaptest.NewLogger(e.t, zaptest.Level(zap.WarnLevel)))
}

func (e *env) start(w *Watcher) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{w: w, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- w.Run(ctx) }()
	e.t.Cleanup(func() { _ = r.stop() })
	return r
}

// wait waits for Run to return on its own (within the generous test deadline).
func (r *running) wait(t testing.TB) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.once.Do(func() { r.err = err; r.cancel() })
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// stop cancels the watcher and returns what Run returned.
func (r *running) stop() error {
	r.once.Do(func() {
		r.cancel()
		r.err = <-r.done
	})
	return r.err
}

// mismatch compares every parent document of project with the naive full recompute of the
// final leaves, tick by tick, then its hourly and daily summaries with the naive ones of the
// stored parents; it returns a description of the first difference, "" if none.
func (e *env) mismatch(project string) string {
	m, parents := e.parentMismatch(project)
	if m != "" {
		return m
	}
	return e.tierMismatch(project, parents)
}

// parentMismatch is mismatch without the summaries; it also returns the parents it read.
func (e *env) parentMismatch(project string) (string, map[time.Time]map[string]rollup.Parent) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cur, err := e.counts.Find(ctx, bson.D{{Key: store.FieldProject, Value: project}})
	if err != nil {
		e.t.Fatalf("find: %v", err)
	}
	var docs []bson.Raw
	if err := cur.All(ctx, &docs); err != nil {
		e.t.Fatalf("find: %v", err)
	}
	leaves := map[time.Time]map[string]rollup.Leaf{}
	parents := map[time.Time]map[string]rollup.Parent{}
	for _, d := range docs {
		if r, ok := d.Lookup(store.FieldRollup).BooleanOK(); ok && r {
			p, err := store.DecodeParent(d)
			if err != nil {
				return fmt.Sprintf("bad parent doc: %v", err), nil
			}
			if parents[p.Timestamp] == nil {
				parents[p.Timestamp] = map[string]rollup.Parent{}
			}
			if _, dup := parents[p.Timestamp][p.ID]; dup {
				return fmt.Sprintf("two parent docs for %s at %s", p.ID, p.Timestamp), nil
			}
			parents[p.Timestamp][p.ID] = p
			continue
		}
		l, err := store.DecodeLeaf(d)
		if err != nil {
			return fmt.Sprintf("bad leaf doc: %v", err), nil
		}
		if leaves[l.Tick] == nil {
			leaves[l.Tick] = map[string]rollup.Leaf{}
		}
		leaves[l.Tick][l.ID] = rollup.Leaf{Type: l.Type, Online: l.Online, Version: l.Version}
	}
	ticks := map[time.Time]bool{}
	for t := range leaves {
		ticks[t] = true
	}
	for t := range parents {
		ticks[t] = true
	}
	sorted := make([]time.Time, 0, len(ticks))
	for t := range ticks {
		sorted = append(sorted, t)
	}
	slices.SortFunc(sorted, time.Time.Compare)
	for _, at := range sorted {
		tr, v, _ := e.trees.TreeAt(ctx, project, at)
		if tr == nil {
			if len(parents[at]) > 0 {
				return fmt.Sprintf("tick %s: parents without a tree", at), nil
			}
			continue
		}
		nodes := tr.Nodes()
		rn := make([]rollup.Node, len(nodes))
		for i, n := range nodes {
			rn[i] = rollup.Node(n)
		}
		want, err := rollup.FullRecompute(rn, leaves[at])
		if err != nil {
			e.t.Fatalf("full recompute: %v", err)
		}
		for _, n := range nodes {
			if tr.IsLeaf(n.ID) {
				continue
			}
			w := want[n.ID]
			got, ok := parents[at][n.ID]
			switch {
			case w.Reported == 0 && (!ok || (got.Online == 0 && got.Reported == 0)):
			case !ok:
				return fmt.Sprintf("tick %s node %s: no document, want %+v", at, n.ID, w), nil
			case got.Online != w.Online || got.Reported != w.Reported || got.Expected != w.Expected || got.TreeVersion != v:
				return fmt.Sprintf("tick %s node %s: online=%d reported=%d expected=%d tree=%d, want %+v tree=%d",
					at, n.ID, got.Online, got.Reported, got.Expected, got.TreeVersion, w, v), nil
			}
		}
	}
	return "", parents
}

// tierMismatch compares the hourly and daily summaries of project with NaiveStats of the
// stored parents (those of their tick's tree), and returns the first difference.
func (e *env) tierMismatch(project string, parents map[time.Time]map[string]rollup.Parent) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type bucket struct {
		id, typ string
		start   time.Time
	}
	hourTicks := map[bucket][]rollup.TickTotals{}
	for at, ps := range parents {
		tr, _, _ := e.trees.TreeAt(ctx, project, at)
		for _, p := range ps {
			if n, ok := tr.Node(p.ID); !ok || n.Type != p.Type || tr.IsLeaf(p.ID) {
				continue
			}
			b := bucket{p.ID, p.Type, at.Truncate(time.Hour)}
			hourTicks[b] = append(hourTicks[b], rollup.TickTotals{Slot: int(at.Sub(b.start) / tick), Online: p.Online, Reported: p.Reported, Expected: p.Expected})
		}
	}
	want := map[store.Tier]map[bucket]rollup.Stats{store.Tier1h: {}, store.Tier1d: {}}
	dayTicks := map[bucket][]rollup.TickTotals{}
	for b, ts := range hourTicks {
		want[store.Tier1h][b] = rollup.NaiveStats(ts)
		d := bucket{b.id, b.typ, b.start.Truncate(24 * time.Hour)}
		for _, tt := range ts {
			tt.Slot += int(b.start.Sub(d.start) / tick)
			dayTicks[d] = append(dayTicks[d], tt)
		}
	}
	for b, ts := range dayTicks {
		want[store.Tier1d][b] = rollup.NaiveStats(ts)
	}
	for _, tier := range []store.Tier{store.Tier1h, store.Tier1d} {
		sums, err := store.NewSummaries(e.db, tier)
		if err != nil {
			e.t.Fatal(err)
		}
		got := map[bucket]rollup.Stats{}
		err = sums.Project(ctx, project, time.Time{}, time.Now().Add(24*time.Hour), func(k store.Key, s rollup.Summary, err error) error {
			if err != nil {
				return err
			}
			b := bucket{k.ID, k.Type, k.Tick}
			if _, dup := got[b]; dup {
				return fmt.Errorf("two %s summaries of %s at %s", tier, k.ID, k.Tick)
			}
			got[b] = s.Stats
			return nil
		})
		if err != nil {
			return err.Error()
		}
		for b, w := range want[tier] {
			if g := got[b]; g != w {
				return fmt.Sprintf("%s summary of %s at %s: %+v, want %+v", tier, b.id, b.start, g, w)
			}
		}
		for b, g := range got {
			if _, ok := want[tier][b]; !ok && g.Count() > 0 {
				return fmt.Sprintf("%s summary of %s at %s: %+v, want none", tier, b.id, b.start, g)
			}
		}
	}
	return ""
}

// waitCorrect polls until every parent of project matches the full recompute.
func (e *env) waitCorrect(project string) {
	e.t.Helper()
	deadline := testctx.Deadline(e.t)
	var last string
	for time.Now().Before(deadline) {
		if last = e.mismatch(project); last == "" {
			return
		}
		pollPause()
	}
	e.t.Fatalf("totals never became correct: %s", last)
}

// pollPause yields between two polls of a condition (a bounded wait on a timer, not a sleep
// standing in for a signal: every caller re-checks its condition with a deadline).
func pollPause() {
	t := time.NewTimer(5 * time.Millisecond)
	<-t.C
}

// parentDoc reads the parent document of id at tick (ok false if absent).
func (e *env) parentDoc(id, typ string, at time.Time) (rollup.Parent, bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := e.counts.FindOne(ctx, bson.D{
		{Key: store.FieldID, Value: id}, {Key: store.FieldType, Value: typ}, {Key: store.FieldTimestamp, Value: at},
	}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return rollup.Parent{}, false
	}
	if err != nil {
		e.t.Fatalf("find parent: %v", err)
	}
	p, err := store.DecodeParent(raw)
	if err != nil {
		e.t.Fatalf("parent doc: %v", err)
	}
	return p, true
}

func baseTick() time.Time {
	return tree.AlignTick(time.Now().UTC(), tick)
}
