package retention_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/retention"
	"github.com/gameops/rollup/store"
)

// day is 24 hours.
const day = 24 * time.Hour

// t0 is the simulated "now" of most tests.
var t0 = time.Date(2026, 6, 8, 0, 0, 0, 0, time.UTC)

// limits are the tests' limits: a one-hour late window, so that short periods are valid.
var limits = retention.Limits{LateWindow: time.Hour}

// short is a policy valid under limits: leaves 6h, 5m 12h, 1h 3d, 1d 5d.
func short() retention.Override {
	return retention.Override{
		store.TierLeaves: retention.Period(6 * time.Hour), store.Tier5m: retention.Period(12 * time.Hour),
		store.Tier1h: retention.Period(3 * day), store.Tier1d: retention.Period(5 * day),
	}
}

// env is a store with rollup's schema, the summary collections' index, and a context.
type env struct {
	store *embeddedtest.Store
	c     *mongo.Client
	db    *mongo.Database
	ctx   context.Context
}

func newEnv(t *testing.T) env {
	t.Helper()
	s := embeddedtest.Start(t)
	c := s.Client(t)
	db := s.Database(t, c)
	ctx := testctx.Context(t)
	if _, err := migrations.New(db, zaptest.NewLogger(t)).Up(ctx, migrations.UpOptions{}); err != nil {
		t.Fatal(err)
	}
	// The tiers' summary collections and their {project, timestamp} index (the tiers work
	// builds them; their documents have the shape the #14 contract gives).
	for _, coll := range []string{store.HourlyCollection, store.DailyCollection} {
		if _, err := db.Collection(coll).Indexes().CreateOne(ctx, mongo.IndexModel{
			Keys: bson.D{{Key: store.FieldProject, Value: 1}, {Key: store.FieldTimestamp, Value: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	return env{store: s, c: c, db: db, ctx: ctx}
}

// shape is how many documents a project has per bucket of each tier.
type shape struct {
	leaves, parents int // per tick; summaries: one per parent per hour and per day
	// countsFrom, when set, is where leaves and parents start; the summaries still span the
	// whole seed (a week of every tick is 30,000 documents for 3 projects, most of them read
	// and deleted again by every check).
	countsFrom time.Time
}

// seed writes project's documents of every tier over [from, to): leaves and parents at every
// tick, hourly summaries at every hour, daily ones at every UTC day (except the buckets skip
// names), and creates the project.
func (e env) seed(t *testing.T, project string, from, to time.Time, sh shape, skip ...time.Time) {
	t.Helper()
	var counts, hourly, daily []any
	for tick := from; tick.Before(to); tick = tick.Add(5 * time.Minute) {
		withCounts := !tick.Before(sh.countsFrom)
		for i := range sh.leaves {
			if withCounts {
				counts = append(counts, bson.D{{Key: "id", Value: fmt.Sprintf("%s-l%d", project, i)}, {Key: "type", Value: "process"},
					{Key: "timestamp", Value: tick}, {Key: "project", Value: project}, {Key: "online", Value: int64(i)},
					{Key: "version", Value: tick.UnixNano()}, {Key: "written_at", Value: tick}})
			}
		}
		for i := range sh.parents {
			id := fmt.Sprintf("%s-p%d", project, i)
			if withCounts {
				counts = append(counts, parentDoc(project, id, tick))
			}
			if tick.Equal(tick.Truncate(time.Hour)) && !slices.ContainsFunc(skip, tick.Equal) {
				hourly = append(hourly, summary(project, id, tick))
			}
			if tick.Equal(tick.Truncate(day)) && !slices.ContainsFunc(skip, tick.Equal) {
				daily = append(daily, summary(project, id, tick))
			}
		}
	}
	for coll, docs := range map[string][]any{store.CountsCollection: counts, store.HourlyCollection: hourly, store.DailyCollection: daily} {
		if len(docs) > 0 {
			if _, err := e.db.Collection(coll).InsertMany(e.ctx, docs); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.project(t, project)
}

// parentDoc is a parent's counts document at tick.
func parentDoc(project, id string, tick time.Time) bson.D {
	return bson.D{{Key: "id", Value: id}, {Key: "type", Value: "server"},
		{Key: "timestamp", Value: tick}, {Key: "project", Value: project}, {Key: "online", Value: int64(0)},
		{Key: "version", Value: int64(1)}, {Key: "children", Value: bson.D{}}, {Key: "reported", Value: int64(0)},
		{Key: "expected", Value: int64(0)}, {Key: "tree_version", Value: 1}, {Key: "written_at", Value: tick},
		{Key: "rollup", Value: true}}
}

// project creates project's document (projects are made with their first token).
func (e env) project(t *testing.T, project string) {
	t.Helper()
	if _, err := e.db.Collection(store.ProjectsCollection).UpdateOne(e.ctx, bson.D{{Key: "_id", Value: project}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "created_at", Value: t0}}}}, optionsUpsert()); err != nil {
		t.Fatal(err)
	}
}

// summary is an hourly or daily summary document as the #14 contract shapes it.
func summary(project, id string, bucket time.Time) bson.D {
	return bson.D{{Key: "id", Value: id}, {Key: "type", Value: "server"}, {Key: "project", Value: project},
		{Key: "timestamp", Value: bucket}, {Key: "max", Value: int64(0)}, {Key: "written_at", Value: bucket}}
}

// stored returns, by tier, the timestamps of project's documents (one per document, sorted).
func (e env) stored(t *testing.T, project string) map[store.Tier][]time.Time {
	t.Helper()
	out := map[store.Tier][]time.Time{}
	read := func(tier store.Tier, coll string, filter bson.D) {
		cur, err := e.db.Collection(coll).Find(e.ctx, append(bson.D{{Key: "project", Value: project}}, filter...))
		if err != nil {
			t.Fatal(err)
		}
		var docs []struct {
			TS time.Time `bson:"timestamp"`
		}
		if err := cur.All(e.ctx, &docs); err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			out[tier] = append(out[tier], d.TS.UTC())
		}
		slices.SortFunc(out[tier], time.Time.Compare)
	}
	read(store.TierLeaves, store.CountsCollection, bson.D{{Key: "rollup", Value: bson.D{{Key: "$ne", Value: true}}}})
	read(store.Tier5m, store.CountsCollection, bson.D{{Key: "rollup", Value: true}})
	read(store.Tier1h, store.HourlyCollection, nil)
	read(store.Tier1d, store.DailyCollection, nil)
	return out
}

// keptFrom returns the timestamps of ts at or after from.
func keptFrom(ts []time.Time, from time.Time) []time.Time {
	var out []time.Time
	for _, x := range ts {
		if !x.Before(from) {
			out = append(out, x)
		}
	}
	return out
}

func optionsUpsert() *options.UpdateOneOptionsBuilder { return options.UpdateOne().SetUpsert(true) }
