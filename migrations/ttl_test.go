package migrations

import (
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/retry"
	"github.com/gameops/rollup/store"
)

// TestInstancesTTL: step 7 builds a TTL index on instances.beat_at; the store's TTL monitor
// then deletes the document of an instance whose last heartbeat is older than InstanceTTL and
// keeps the others (on the embedded server, whose TTL monitor runs every 50ms here).
func TestInstancesTTL(t *testing.T) {
	ctx := testCtx(t)
	srv := embeddedtest.Start(t, embeddedtest.Options{Configure: func(c *embedded.Config) { c.TTLMonitorInterval = 50 * time.Millisecond }})
	db := srv.Database(t, srv.Client(t))
	if _, err := New(db, zaptest.NewLogger(t)).Up(ctx, UpOptions{}); err != nil {
		t.Fatalf("up: %v", err)
	}
	spec, ok := indexSpecs(ctx, t, db.Collection(store.InstancesCollection))[InstancesBeatTTLIndex]
	if !ok {
		t.Fatalf("no index %s", InstancesBeatTTLIndex)
	}
	if n, ok := spec.Lookup("expireAfterSeconds").AsInt64OK(); !ok || n != int64(InstanceTTL/time.Second) {
		t.Fatalf("index %s: %s", InstancesBeatTTLIndex, spec)
	}
	if srv.Real() {
		return // a real mongod's TTL monitor runs once a minute
	}
	now := time.Now()
	coll := db.Collection(store.InstancesCollection)
	if _, err := coll.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: "gone"}, {Key: "beat_at", Value: now.Add(-InstanceTTL - time.Minute)}, {Key: "stopped", Value: false}},
		bson.D{{Key: "_id", Value: "stopped-yesterday"}, {Key: "beat_at", Value: now.Add(-InstanceTTL + time.Hour)}, {Key: "stopped", Value: true}},
		bson.D{{Key: "_id", Value: "live"}, {Key: "beat_at", Value: now}, {Key: "stopped", Value: false}},
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		docs := allDocs(ctx, t, coll)
		ids := make([]string, len(docs))
		for i, d := range docs {
			ids[i] = d.Lookup("_id").StringValue()
		}
		if len(ids) == 2 && ids[0] == "live" && ids[1] == "stopped-yesterday" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instances after 30s: %v, want [live stopped-yesterday]", ids)
		}
		time.Sleep(20 * time.Millisecond) // polling the store with a deadline
	}
}

// TestInstancesTTLExisting: an operator's TTL index on {beat_at: 1} with another expiry is
// kept; a plain index on beat_at stands in the way: a permanent error naming the fix.
func TestInstancesTTLExisting(t *testing.T) {
	ctx := testCtx(t)
	for _, c := range []struct {
		name    string
		index   mongo.IndexModel
		wantErr bool
	}{
		{"operator's expiry", mongo.IndexModel{Keys: bson.D{{Key: "beat_at", Value: 1}},
			Options: options.Index().SetName("mine").SetExpireAfterSeconds(3600)}, false},
		{"our name, our expiry", mongo.IndexModel{Keys: bson.D{{Key: "beat_at", Value: 1}},
			Options: options.Index().SetName(InstancesBeatTTLIndex).SetExpireAfterSeconds(int32(InstanceTTL / time.Second))}, false},
		{"no expiry", mongo.IndexModel{Keys: bson.D{{Key: "beat_at", Value: 1}}, Options: options.Index().SetName("beat")}, true},
		{"our name, another key", mongo.IndexModel{Keys: bson.D{{Key: "host", Value: 1}}, Options: options.Index().SetName(InstancesBeatTTLIndex)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			if _, err := db.Collection(store.InstancesCollection).Indexes().CreateOne(ctx, c.index); err != nil {
				t.Fatal(err)
			}
			err := instancesTTL(ctx, db, &Report{})
			if c.wantErr {
				var ie *ttlIndexError
				if !errors.As(err, &ie) || !retry.IsPermanent(err) {
					t.Fatalf("err %v, want a permanent *ttlIndexError", err)
				}
				t.Logf("error: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestEventsIndexes: step 11 builds the annotations query's index on events {project, at}
// (part of the Catalog, so the drift check watches it) and the TTL index on events.end; the
// store's TTL monitor then deletes an event that ended more than store.EventsTTL ago and
// keeps the others.
func TestEventsIndexes(t *testing.T) {
	ctx := testCtx(t)
	srv := embeddedtest.Start(t, embeddedtest.Options{Configure: func(c *embedded.Config) { c.TTLMonitorInterval = 50 * time.Millisecond }})
	db := srv.Database(t, srv.Client(t))
	if _, err := New(db, zaptest.NewLogger(t)).Up(ctx, UpOptions{}); err != nil {
		t.Fatalf("up: %v", err)
	}
	specs := indexSpecs(ctx, t, db.Collection(store.EventsCollection))
	if key := specs[store.EventsProjectAtIndex].Lookup("key").String(); key != `{"project": {"$numberInt":"1"},"at": {"$numberInt":"1"}}` {
		t.Errorf("index %s: key %s (all: %v)", store.EventsProjectAtIndex, key, specs)
	}
	ttl := specs[store.EventsEndTTLIndex]
	if n, ok := ttl.Lookup("expireAfterSeconds").AsInt64OK(); !ok || n != 400*86400 {
		t.Fatalf("index %s: %s", store.EventsEndTTLIndex, ttl)
	}
	if drift, err := store.CheckIndexes(ctx, db, Catalog()); err != nil || len(drift) != 0 {
		t.Fatalf("drift after up: %v, %v", drift, err)
	}
	if srv.Real() {
		return // a real mongod's TTL monitor runs once a minute
	}
	now := time.Now().UTC()
	ev := store.NewEvents(db)
	for _, e := range []store.Event{
		{Kind: store.EventOutage, At: now.Add(-store.EventsTTL - 2*time.Hour), End: now.Add(-store.EventsTTL - time.Hour), Title: "expired"},
		{Kind: store.EventOutage, At: now.Add(-store.EventsTTL - time.Hour), End: now.Add(-store.EventsTTL + time.Hour), Title: "kept"},
	} {
		if err := ev.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		docs := allDocs(ctx, t, db.Collection(store.EventsCollection))
		if len(docs) == 1 && docs[0].Lookup("title").StringValue() == "kept" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events after 30s: %v, want only the one that ended less than %v ago", docs, store.EventsTTL)
		}
		time.Sleep(20 * time.Millisecond) // polling the store with a deadline
	}
}
