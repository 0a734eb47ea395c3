package totals_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
	"github.com/gameops/rollup/watcher"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const tick = tree.DefaultTick

// t0 is the tick the tests' numbers are read at; nowAt(t0) is a clock at which it is the last
// complete tick.
var t0 = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

// nowAt returns a time at which t is the last complete tick with the default grace.
func nowAt(t time.Time) time.Time { return t.Add(tick + 2*time.Minute + 30*time.Second) }

// pipeline is the real write path over the embedded server: a migrated database, the tree
// store, the bulk writer and the watcher that rolls leaves up into parent and root documents.
type pipeline struct {
	ctx    context.Context
	store  *embeddedtest.Store
	client *mongo.Client
	db     *mongo.Database
	trees  *treedb.Store
	writer *bulk.Writer
	w      *watcher.Watcher
	events int64 // leaf writes applied so far, which the watcher must have processed
}

func newPipeline(t *testing.T) *pipeline {
	t.Helper()
	srv := embeddedtest.Start(t)
	client := srv.Client(t)
	db := srv.Database(t, client)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(t))
	t.Cleanup(cancel)
	if _, err := migrations.New(db, zaptest.NewLogger(t)).Up(ctx, migrations.UpOptions{}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	trees := treedb.New(db)
	p := &pipeline{ctx: ctx, store: srv, client: client, db: db, trees: trees}
	p.writer = bulk.New(db.Collection(store.CountsCollection), bulk.Options{MaxDelay: time.Millisecond}, zaptest.NewLogger(t))
	p.w = watcher.New(db, treedb.NewCache(trees), watcher.Options{CheckpointInterval: 10 * time.Millisecond}, zaptest.NewLogger(t))
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- p.writer.Run(runCtx) }()
	go func() { done <- p.w.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		}
	})
	// Leaves written before the stream is open are rolled up by the watcher's first replay
	// and then delivered by the stream too, and Stats.Events counts both: report's wait
	// would end before the last report's rollups. So no leaf is written before then.
	testctx.WaitFor(t, "the watcher's stream to be open", func() bool {
		for _, s := range p.w.Progress().Streams {
			if !s.CheckpointSavedAt.IsZero() {
				return true
			}
		}
		return false
	})
	return p
}

// testTimeout is what is left of the test's deadline, or a generous default.
func testTimeout(t *testing.T) time.Duration {
	if d, ok := t.Deadline(); ok {
		return time.Until(d) - 5*time.Second
	}
	return 5 * time.Minute
}

// prefixed is tree.Generate with ids unique across projects (tree.Prefixed).
func prefixed(project string, groups, servers, processes int) []tree.Node {
	return tree.Prefixed(project, tree.Generate(project, groups, servers, processes))
}

// importTree imports nodes as project's tree effective from eff and returns the tree.
func (p *pipeline) importTree(t *testing.T, project string, nodes []tree.Node, eff time.Time) *tree.Tree {
	t.Helper()
	if _, err := p.trees.Import(p.ctx, project, nodes, eff); err != nil {
		t.Fatal(err)
	}
	tr, err := tree.Build(project, nodes)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// report writes leaf counts through the bulk writer (version v, which must grow for a
// rewrite to apply) and waits until the watcher has rolled them up.
func (p *pipeline) report(t *testing.T, project string, at time.Time, counts map[string]int64, tr *tree.Tree, v int64) {
	t.Helper()
	items := make([]bulk.Item, 0, len(counts))
	for id, online := range counts {
		nd, ok := tr.Node(id)
		if !ok {
			t.Fatalf("%s is not a node of %s", id, project)
		}
		items = append(items, bulk.Item{Key: bulk.Key{ID: id, Type: nd.Type, Timestamp: at}, Project: project, Online: online, Version: v})
	}
	res, err := p.writer.Submit(p.ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome != bulk.OutcomeApplied {
			t.Fatalf("item %d (%s): outcome %v %v", i, items[i].ID, r.Outcome, r.Err)
		}
	}
	p.events += int64(len(items))
	testctx.WaitFor(t, "the watcher to roll up every leaf", func() bool { return p.w.Stats().Events >= p.events })
}
