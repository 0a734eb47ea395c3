package migrations

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/store"
)

// The instances collection holds one document per instance id of the watcher's leases
// ({_id, incarnation, host, pid, started_at, beat, beat_at, stopped}; package lease writes
// it). Without expiry it keeps a document for every id ever used — one per pod when ids
// derive from pod names. Step 7 makes a document expire InstanceTTL after its last heartbeat
// (beat_at): a live instance beats every second, so only instances gone for that long lose
// their document, and one that comes back claims its id anew.
const (
	// InstancesBeatTTLIndex is the TTL index on instances.beat_at.
	InstancesBeatTTLIndex = "beat_at_ttl"
	// InstanceTTL is how long after its last heartbeat an instance document expires.
	InstanceTTL = 24 * time.Hour
)

// MongoDB's error codes for an index whose name or key exists with other options.
const (
	codeIndexOptionsConflict  = 85
	codeIndexKeySpecsConflict = 86
)

// instancesTTL is step 7: the TTL index InstancesBeatTTLIndex on instances.beat_at.
var instancesTTL = ttlStep(store.InstancesCollection, "beat_at", InstancesBeatTTLIndex, InstanceTTL)

// ttlStep is a step that builds the TTL index name on coll.field with expiry ttl. An index on
// {field: 1} that already has an expiry (an operator changed it with collMod) is kept as it
// is; any other index in the way is a permanent *ttlIndexError naming the fix.
func ttlStep(coll, field, name string, ttl time.Duration) func(context.Context, *mongo.Database, *Report) error {
	want := ttlIndex{coll: coll, field: field, name: name, ttl: ttl}
	return func(ctx context.Context, db *mongo.Database, r *Report) error {
		if r.DryRun {
			return nil
		}
		c := db.Collection(coll)
		model := mongo.IndexModel{
			Keys:    bson.D{{Key: field, Value: int32(1)}},
			Options: options.Index().SetName(name).SetExpireAfterSeconds(int32(ttl / time.Second)),
		}
		_, err := c.Indexes().CreateOne(ctx, model)
		if se := mongo.ServerError(nil); errors.As(err, &se) &&
			(se.HasErrorCode(codeIndexOptionsConflict) || se.HasErrorCode(codeIndexKeySpecsConflict)) {
			return want.kept(ctx, c, err)
		}
		if err != nil {
			return fmt.Errorf("create index %s on %s: %w", name, coll, err)
		}
		return nil
	}
}

// ttlIndex is a TTL index a step wants.
type ttlIndex struct {
	coll, field, name string
	ttl               time.Duration
}

// kept accepts an existing TTL index on exactly {field: 1}; otherwise it returns a
// *ttlIndexError for the index in the way (or the creation error cerr).
func (x ttlIndex) kept(ctx context.Context, coll *mongo.Collection, cerr error) error {
	cur, err := coll.Indexes().List(ctx)
	if err != nil {
		return fmt.Errorf("list indexes of %s: %w", coll.Name(), err)
	}
	var specs []bson.Raw
	if err := cur.All(ctx, &specs); err != nil {
		return fmt.Errorf("list indexes of %s: %w", coll.Name(), err)
	}
	for _, spec := range specs {
		name, _ := spec.Lookup("name").StringValueOK()
		key, _ := spec.Lookup("key").DocumentOK()
		elems, _ := key.Elements()
		onField := len(elems) == 1 && elems[0].Key() == x.field
		if name != x.name && !onField {
			continue
		}
		if _, err := spec.LookupErr("expireAfterSeconds"); err == nil && onField {
			return nil
		}
		return &ttlIndexError{want: x, name: name, spec: spec}
	}
	return fmt.Errorf("create index %s on %s: %w", x.name, coll.Name(), cerr)
}

// ttlIndexError means an index stands in the way of a TTL index.
type ttlIndexError struct {
	want ttlIndex
	name string
	spec bson.Raw
}

// Error names the index and tells the operator how to fix it.
func (e *ttlIndexError) Error() string {
	w := e.want
	return fmt.Sprintf("index %s on %s exists as %s (want a TTL index on exactly {%s: 1}, expireAfterSeconds %d): "+
		"drop it (db.%s.dropIndex(%q)) and rerun `rollup migrate up`",
		e.name, w.coll, e.spec.String(), w.field, int(w.ttl/time.Second), w.coll, e.name)
}

// Permanent marks the error as one that retrying cannot fix (retry.IsPermanent).
func (e *ttlIndexError) Permanent() bool { return true }
