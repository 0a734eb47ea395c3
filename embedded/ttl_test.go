package embedded_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/embedded/embeddedtest"
)

// ttlEnv starts a store whose TTL monitor runs every 100 ms (a real MongoDB is asked for
// ttlMonitorSleepSecs 1, its minimum).
func ttlEnv(t *testing.T) env {
	t.Helper()
	store := embeddedtest.Start(t, embeddedtest.Options{Configure: func(c *embedded.Config) {
		c.TTLMonitorInterval = 100 * time.Millisecond
	}})
	c := store.Client(t, quickMonitor())
	e := env{store: store, c: c, db: store.Database(t, c), ctx: ctxFor(t)}
	if store.Real() {
		_ = c.Database("admin").RunCommand(e.ctx, bson.D{{Key: "setParameter", Value: 1}, {Key: "ttlMonitorSleepSecs", Value: 1}}).Err()
	}
	return e
}

// waitForIDs polls coll until its _ids are exactly want (sorted), failing at the deadline.
func waitForIDs(t *testing.T, e env, coll *mongo.Collection, want []string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var got []string
	for ; time.Now().Before(deadline); <-tick.C {
		got = got[:0]
		cur, err := coll.Find(e.ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		var docs []struct {
			ID string `bson:"_id"`
		}
		if err := cur.All(e.ctx, &docs); err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			got = append(got, d.ID)
		}
		if slices.Equal(got, want) {
			return
		}
	}
	t.Fatalf("documents %v, want %v", got, want)
}

func TestTTLIndex(t *testing.T) {
	e := ttlEnv(t)
	coll := e.db.Collection("sessions")
	name, err := coll.Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(3600)})
	if err != nil {
		t.Fatal(err)
	}
	// listIndexes shows the option.
	cur, err := coll.Indexes().List(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var specs []bson.D
	if err := cur.All(e.ctx, &specs); err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || get(specs[1], "name") != name || get(specs[1], "expireAfterSeconds") != int32(3600) {
		t.Fatalf("listIndexes = %v", specs)
	}

	cs, err := coll.Watch(e.ctx, mongo.Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close(e.ctx) }()
	now := time.Now()
	old, fresh := bson.NewDateTimeFromTime(now.Add(-2*time.Hour)), bson.NewDateTimeFromTime(now.Add(-time.Minute))
	if _, err := coll.InsertMany(e.ctx, []any{
		bson.D{{Key: "_id", Value: "old"}, {Key: "at", Value: old}},
		bson.D{{Key: "_id", Value: "fresh"}, {Key: "at", Value: fresh}},
		bson.D{{Key: "_id", Value: "array-with-old"}, {Key: "at", Value: bson.A{fresh, old}}},
		bson.D{{Key: "_id", Value: "not-a-date"}, {Key: "at", Value: "2001-01-01"}},
		bson.D{{Key: "_id", Value: "no-field"}},
	}); err != nil {
		t.Fatal(err)
	}
	waitForIDs(t, e, coll, []string{"fresh", "no-field", "not-a-date"})

	// The deletions are ordinary delete events.
	var deleted []string
	for len(deleted) < 2 {
		ev := nextEvent(e.ctx, t, cs)
		if ev.OperationType == "delete" {
			deleted = append(deleted, ev.DocumentKey["_id"].(string))
		}
	}
	slices.Sort(deleted)
	if !slices.Equal(deleted, []string{"array-with-old", "old"}) {
		t.Fatalf("delete events for %v", deleted)
	}

	// collMod shortens expireAfterSeconds: "fresh" (a minute old) now expires.
	var reply bson.D
	err = e.db.RunCommand(e.ctx, bson.D{{Key: "collMod", Value: "sessions"}, {Key: "index", Value: bson.D{
		{Key: "keyPattern", Value: bson.D{{Key: "at", Value: 1}}}, {Key: "expireAfterSeconds", Value: 10},
	}}}).Decode(&reply)
	if err != nil || get(reply, "expireAfterSeconds_old") != int32(3600) || get(reply, "expireAfterSeconds_new") != int32(10) {
		t.Fatalf("collMod = %v, %v", reply, err)
	}
	waitForIDs(t, e, coll, []string{"no-field", "not-a-date"})
}

func TestTTLIndexErrors(t *testing.T) {
	e := newEnv(t)
	coll := e.db.Collection("c")
	tests := []struct {
		name string
		spec bson.D
		code int32
	}{
		{"compound", bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}}, {Key: "name", Value: "ab"}, {Key: "expireAfterSeconds", Value: 1}}, 67},
		{"not a number", bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a"}, {Key: "expireAfterSeconds", Value: "1"}}, 67},
		{"negative", bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a"}, {Key: "expireAfterSeconds", Value: -1}}, 72},
		{"too large", bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a"}, {Key: "expireAfterSeconds", Value: int64(1) << 40}}, 72},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := e.db.RunCommand(e.ctx, bson.D{{Key: "createIndexes", Value: "c"}, {Key: "indexes", Value: bson.A{tc.spec}}}).Err()
			if errCode(err) != tc.code {
				t.Fatalf("createIndexes %v: %v, want code %d", tc.spec, err, tc.code)
			}
		})
	}
	if _, err := coll.Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(5)}); err != nil {
		t.Fatal(err)
	}
	// The same key and name with another expireAfterSeconds conflicts.
	_, err := coll.Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "a", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(6)})
	if errCode(err) != 85 {
		t.Fatalf("conflicting TTL index: %v, want IndexOptionsConflict", err)
	}
	for _, tc := range []struct {
		name  string
		index bson.D
		code  int32
	}{
		{"unknown index", bson.D{{Key: "keyPattern", Value: bson.D{{Key: "zz", Value: 1}}}, {Key: "expireAfterSeconds", Value: 1}}, 27},
		{"not a TTL index", bson.D{{Key: "name", Value: "_id_"}, {Key: "expireAfterSeconds", Value: 1}}, 72},
		{"name and key pattern", bson.D{{Key: "name", Value: "a_1"}, {Key: "keyPattern", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "expireAfterSeconds", Value: 1}}, 72},
		{"negative", bson.D{{Key: "name", Value: "a_1"}, {Key: "expireAfterSeconds", Value: -5}}, 72},
	} {
		err := e.db.RunCommand(e.ctx, bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: tc.index}}).Err()
		if errCode(err) != tc.code {
			t.Errorf("collMod %s: %v, want code %d", tc.name, err, tc.code)
		}
	}
}

// TestTTLDurable checks that TTL deletions are durable writes: gone after a restart, with the
// index (and a collMod of it) still in place and still expiring documents.
func TestTTLDurable(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("restarts the embedded server")
	}
	dir := t.TempDir()
	start := func() (*mongo.Collection, func()) {
		srv, err := embedded.New(embedded.Config{Listen: "127.0.0.1:0", DataDir: dir, TTLMonitorInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx) }()
		c, disc := connect(t, srv.URI())
		return c.Database("d").Collection("c"), func() {
			disc()
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		}
	}
	e := env{ctx: ctxFor(t)}
	coll, stop := start()
	if _, err := coll.Indexes().CreateOne(e.ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(3600)}); err != nil {
		t.Fatal(err)
	}
	old := bson.NewDateTimeFromTime(time.Now().Add(-2 * time.Hour))
	recent := bson.NewDateTimeFromTime(time.Now().Add(-time.Minute))
	if _, err := coll.InsertMany(e.ctx, []any{
		bson.D{{Key: "_id", Value: "a"}, {Key: "at", Value: old}},
		bson.D{{Key: "_id", Value: "b"}, {Key: "at", Value: recent}},
	}); err != nil {
		t.Fatal(err)
	}
	waitForIDs(t, e, coll, []string{"b"})
	if err := coll.Database().RunCommand(e.ctx, bson.D{{Key: "collMod", Value: "c"}, {Key: "index", Value: bson.D{
		{Key: "name", Value: "at_1"}, {Key: "expireAfterSeconds", Value: 7200},
	}}}).Err(); err != nil {
		t.Fatal(err)
	}
	stop()

	coll, stop = start()
	defer stop()
	waitForIDs(t, e, coll, []string{"b"})
	var spec bson.D
	cur, err := coll.Indexes().List(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for cur.Next(e.ctx) {
		if err := cur.Decode(&spec); err != nil {
			t.Fatal(err)
		}
	}
	if get(spec, "expireAfterSeconds") != int32(7200) {
		t.Fatalf("index after restart = %v", spec)
	}
	// The monitor runs again after the restart.
	if _, err := coll.InsertOne(e.ctx, bson.D{{Key: "_id", Value: "c"}, {Key: "at", Value: bson.NewDateTimeFromTime(time.Now().Add(-3 * time.Hour))}}); err != nil {
		t.Fatal(err)
	}
	waitForIDs(t, e, coll, []string{"b"})
}
