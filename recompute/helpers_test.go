package recompute

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb/treedbtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const tick = tree.DefaultTick

func baseTick() time.Time { return tree.AlignTick(time.Now().UTC(), tick) }

// env is a migrated database on an embedded store and a tree source.
type env struct {
	t      testing.TB
	ctx    context.Context
	db     *mongo.Database
	counts *mongo.Collection
	trees  *treedbtest.Trees
	store  *embeddedtest.Store
	client *mongo.Client
}

func newEnv(t testing.TB) *env {
	t.Helper()
	srv := embeddedtest.Start(t)
	client := srv.Client(t)
	db := srv.Database(t, client)
	ctx := testctx.Context(t)
	if _, err := migrations.New(db, zap.NewNop()).Up(ctx, migrations.UpOptions{}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return &env{t: t, ctx: ctx, db: db, counts: db.Collection(store.CountsCollection), trees: &treedbtest.Trees{}, store: srv, client: client}
}

// fill writes every leaf of tr at tick with online = seed*1000+i and version v, as ingest
// writes leaves.
func (e *env) fill(project string, tr *tree.Tree, at time.Time, seed, v int64) {
	e.t.Helper()
	var models []mongo.WriteModel
	for i, l := range tr.Leaves() {
		w := store.LeafWrite{ID: l.ID, Type: l.Type, Tick: at, Project: project, Online: seed*1000 + int64(i), Version: v,
			SubmissionID: fmt.Sprintf("s-%s-%d", l.ID, v)}
		models = append(models, mongo.NewUpdateOneModel().SetFilter(store.LeafFilter(w)).SetUpdate(store.LeafUpdate(w, time.Now())).SetUpsert(true))
	}
	if _, err := e.counts.BulkWrite(e.ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
		e.t.Fatalf("write leaves: %v", err)
	}
}

// mismatch checks every tick of project in [from, to) with rollup.Check over the tree of the
// tick and returns the first violation ("" if none).
func (e *env) mismatch(project string, from, to time.Time) string {
	e.t.Helper()
	counts := store.NewCounts(e.db)
	ticks, err := counts.Ticks(e.ctx, project, from, to)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, at := range ticks {
		d, err := counts.TickDocs(e.ctx, project, at)
		if err != nil {
			e.t.Fatal(err)
		}
		tr, v, _ := e.trees.TreeAt(e.ctx, project, at)
		if tr != nil {
			for _, n := range tr.Nodes() {
				d.Nodes = append(d.Nodes, rollup.Node(n))
			}
			d.TreeVersion = v
		}
		r, err := rollup.Check(d)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(r.Violations) > 0 {
			return r.Violations[0].String()
		}
	}
	return ""
}

// parentDoc reads the parent document of id at tick (ok false if absent).
func (e *env) parentDoc(id, typ string, at time.Time) (rollup.Parent, bool) {
	e.t.Helper()
	raw, err := e.counts.FindOne(e.ctx, store.KeyFilter(store.Key{ID: id, Type: typ, Tick: at})).Raw()
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

// storeParent writes p as its document (upsert on its key).
func (e *env) storeParent(p rollup.Parent) {
	e.t.Helper()
	if _, err := e.counts.UpdateOne(e.ctx, store.KeyFilter(store.Key{ID: p.ID, Type: p.Type, Tick: p.Timestamp}),
		store.ParentUpdate(p, time.Now()), options.UpdateOne().SetUpsert(true)); err != nil {
		e.t.Fatal(err)
	}
}
