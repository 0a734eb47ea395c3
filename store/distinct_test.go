package store

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/embeddedtest"
)

// TestDistinctErrors: a distinct that fails (here its connection is closed, as when the store
// stops) reports the command's error — a network error the retry logic retries — and not
// the driver's "error decoding key arr" that DistinctResult.Decode alone returns (found by
// the soak). An answer after the fault decodes normally.
func TestDistinctErrors(t *testing.T) {
	srv := embeddedtest.Start(t)
	const app = "store-distinct-errors"
	c := srv.Client(t, options.Client().SetAppName(app).SetRetryReads(false))
	db := srv.Database(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	if _, err := db.Collection(CountsCollection).InsertOne(ctx, bson.D{{Key: FieldID, Value: "a"}, {Key: FieldProject, Value: "p"}, {Key: FieldTimestamp, Value: tick}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection(ProjectsCollection).InsertOne(ctx, bson.D{{Key: fieldMongoID, Value: "p"}}); err != nil {
		t.Fatal(err)
	}
	srv.FailPoint(t, c, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: bson.D{{Key: "times", Value: int32(2)}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"distinct"}}, {Key: "closeConnection", Value: true}, {Key: "appName", Value: app}}}})
	counts := NewCounts(db)
	if _, err := counts.Ticks(ctx, "p", tick, tick.Add(time.Hour)); !mongo.IsNetworkError(err) {
		t.Errorf("Ticks during the fault = %v, want a network error", err)
	}
	if _, err := Projects(ctx, db); !mongo.IsNetworkError(err) {
		t.Errorf("Projects during the fault = %v, want a network error", err)
	}
	ticks, err := counts.Ticks(ctx, "p", tick, tick.Add(time.Hour))
	if err != nil || len(ticks) != 1 || !ticks[0].Equal(tick) {
		t.Errorf("Ticks after the fault = %v, %v; want [%v]", ticks, err, tick)
	}
	if ps, err := Projects(ctx, db); err != nil || len(ps) != 1 || ps[0] != "p" {
		t.Errorf("Projects after the fault = %v, %v", ps, err)
	}
}
