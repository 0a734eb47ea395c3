package totals_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded/blackpipe"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/metrics/totals"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// BenchmarkRefresh measures one refresh (what every Interval costs the store) for 100
// projects of 10 groups each, every group exported, with their root documents at the tick
// and a day of leaves and parents around it, through a proxy that counts the commands.
//
//	go test -run '^$' -bench Refresh -benchtime 200x ./metrics/totals/
func BenchmarkRefresh(b *testing.B) {
	const projects, groups = 100, 10
	srv := embeddedtest.Start(b)
	direct := srv.Client(b)
	db := srv.Database(b, direct)
	ctx := context.Background()
	if _, err := migrations.New(db, zap.NewNop()).Up(ctx, migrations.UpOptions{}); err != nil {
		b.Fatal(err)
	}
	trees := treedb.New(db)
	var models []mongo.WriteModel
	for i := range projects {
		name := fmt.Sprintf("bench%03d", i)
		nodes := prefixed(name, groups, 2, 5)
		if _, err := trees.Import(ctx, name, nodes, t0.Add(-24*time.Hour)); err != nil {
			b.Fatal(err)
		}
		tr, err := tree.Build(name, nodes)
		if err != nil {
			b.Fatal(err)
		}
		// A day of ticks of every parent (leaves are not read; parents are what the index
		// must skip), the root's children complete.
		for at := t0.Add(-24 * time.Hour); !at.After(t0.Add(tick)); at = at.Add(tick) {
			root := tr.Root()
			p := rollup.Parent{ID: root.ID, Type: root.Type, Project: name, Timestamp: at, Rev: 1, TreeVersion: 1,
				Children: map[string]rollup.ChildState{}}
			for _, g := range tr.Children(root.ID) {
				leaves := int64(tr.LeafCount(g.ID))
				p.Children[g.ID] = rollup.ChildState{Type: g.Type, Online: 3 * leaves, Version: 1, Reported: leaves, Expected: leaves}
				p.Online, p.Reported, p.Expected = p.Online+3*leaves, p.Reported+leaves, p.Expected+leaves
			}
			models = append(models, mongo.NewUpdateOneModel().SetUpsert(true).SetFilter(bson.D{
				{Key: store.FieldID, Value: root.ID}, {Key: store.FieldType, Value: root.Type}, {Key: store.FieldTimestamp, Value: at},
			}).SetUpdate(store.ParentUpdate(p, at)))
		}
	}
	if _, err := db.Collection(store.CountsCollection).BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
		b.Fatal(err)
	}

	proxy := blackpipe.New(options.Client().ApplyURI(srv.URI).Hosts[0], zap.NewNop())
	if err := proxy.Listen("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- proxy.Run(pctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	via := &embeddedtest.Store{URI: fmt.Sprintf("mongodb://%s/?directConnection=true", proxy.Addr())}
	r := totals.New(via.Client(b).Database(db.Name()), totals.Options{
		GroupProjects: []string{totals.AllProjects}, Now: func() time.Time { return nowAt(t0) },
	}, zap.NewNop())
	if err := r.Refresh(ctx); err != nil { // loads the trees once
		b.Fatal(err)
	}
	if s := r.Snapshot(); len(s.Projects) != projects || len(s.Projects[0].Groups) != groups || s.Projects[0].Reported != 100 {
		b.Fatalf("snapshot: %d projects, first %+v", len(s.Projects), s.Projects[0])
	}
	proxy.ResetStats()
	b.ResetTimer()
	for range b.N {
		if err := r.Refresh(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	st := proxy.Stats()
	cmds := 0
	for name, n := range st.Commands {
		if name != "hello" && name != "isMaster" && name != "ismaster" {
			cmds += n
		}
	}
	b.ReportMetric(float64(cmds)/float64(b.N), "cmds/op")
	b.ReportMetric(float64(st.BytesDown)/float64(b.N), "bytes_down/op")
}
