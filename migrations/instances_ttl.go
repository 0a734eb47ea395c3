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

// instancesTTL is step 7: the TTL index InstancesBeatTTLIndex on instances.beat_at. An index
// on {beat_at: 1} that already has an expiry (an operator changed it with collMod) is kept as
// it is; any other index in the way is an *IndexConflictError.
func instancesTTL(ctx context.Context, db *mongo.Database, r *Report) error {
	if r.DryRun {
		return nil
	}
	coll := db.Collection(store.InstancesCollection)
	model := mongo.IndexModel{
		Keys:    bson.D{{Key: "beat_at", Value: int32(1)}},
		Options: options.Index().SetName(InstancesBeatTTLIndex).SetExpireAfterSeconds(int32(InstanceTTL / time.Second)),
	}
	_, err := coll.Indexes().CreateOne(ctx, model)
	if se := mongo.ServerError(nil); errors.As(err, &se) &&
		(se.HasErrorCode(codeIndexOptionsConflict) || se.HasErrorCode(codeIndexKeySpecsConflict)) {
		return keptTTLIndex(ctx, coll, err)
	}
	if err != nil {
		return fmt.Errorf("create index %s on %s: %w", InstancesBeatTTLIndex, store.InstancesCollection, err)
	}
	return nil
}

// keptTTLIndex accepts an existing TTL index on exactly {beat_at: 1}; otherwise it returns an
// *IndexConflictError for the index in the way (or the creation error cerr).
func keptTTLIndex(ctx context.Context, coll *mongo.Collection, cerr error) error {
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
		onBeatAt := len(elems) == 1 && elems[0].Key() == "beat_at"
		if name != InstancesBeatTTLIndex && !onBeatAt {
			continue
		}
		if _, err := spec.LookupErr("expireAfterSeconds"); err == nil && onBeatAt {
			return nil
		}
		return &instancesIndexError{name: name, spec: spec}
	}
	return fmt.Errorf("create index %s on %s: %w", InstancesBeatTTLIndex, coll.Name(), cerr)
}

// instancesIndexError means an index stands in the way of InstancesBeatTTLIndex.
type instancesIndexError struct {
	name string
	spec bson.Raw
}

// Error names the index and tells the operator how to fix it.
func (e *instancesIndexError) Error() string {
	return fmt.Sprintf("index %s on %s exists as %s (want a TTL index on exactly {beat_at: 1}, expireAfterSeconds %d): "+
		"drop it (db.%s.dropIndex(%q)) and rerun `rollup migrate up`",
		e.name, store.InstancesCollection, e.spec.String(), int(InstanceTTL/time.Second), store.InstancesCollection, e.name)
}

// Permanent marks the error as one that retrying cannot fix (retry.IsPermanent).
func (e *instancesIndexError) Permanent() bool { return true }
