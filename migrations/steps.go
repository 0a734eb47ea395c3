package migrations

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/tree/treedb"
)

// Step is one versioned, idempotent schema change. Up must be safe to run again after it
// failed or crashed half way, and must change nothing when r.DryRun is set (it reports into r
// what it would do instead).
type Step struct {
	// Version numbers the steps 1, 2, 3, ... in the order they apply.
	Version int
	// Name says what the step does, in a few words.
	Name string
	// Up applies the step to db.
	Up func(ctx context.Context, db *mongo.Database, r *Report) error
}

// Steps returns rollup's schema steps in version order.
func Steps() []Step {
	return []Step{
		{Version: 1, Name: "counts: resolve duplicate keys, unique index " + CountsKeyIndex, Up: countsUniqueIndex},
		{Version: 2, Name: "tokens: index " + TokensProjectIndex, Up: tokensProjectIndex},
		{Version: 3, Name: "projects: collection", Up: projectsCollection},
		{Version: 4, Name: "trees, tree_nodes: indexes of versioned trees", Up: treeIndexes},
		{Version: 5, Name: "counts: index " + CountsWrittenAtIndex + " (replay of a lost change-stream window)", Up: countsWrittenAtIndex},
		{Version: 6, Name: "counts: index " + CountsProjectTickIndex + " (a project's nodes at a tick)", Up: countsProjectTickIndex},
		{Version: 7, Name: "instances: TTL index " + InstancesBeatTTLIndex + " (instance ids expire a day after their last heartbeat)", Up: instancesTTL},
	}
}

// codeNamespaceExists is MongoDB's NamespaceExists error code.
const codeNamespaceExists = 48

// countsKeySpec is the key of CountsKeyIndex.
func countsKeySpec() bson.D {
	return bson.D{{Key: FieldID, Value: int32(1)}, {Key: FieldType, Value: int32(1)}, {Key: FieldTimestamp, Value: int32(1)}}
}

// countsUniqueIndex is step 1 (see the package comment).
func countsUniqueIndex(ctx context.Context, db *mongo.Database, r *Report) error {
	coll := db.Collection(CountsCollection)
	exists, err := hasCountsKeyIndex(ctx, coll)
	if err != nil {
		return err
	}
	if exists {
		return nil // the unique index already guarantees there are no duplicates
	}
	groups, err := findDuplicates(ctx, coll)
	if err != nil {
		return err
	}
	if r.DryRun {
		r.Duplicates = append(r.Duplicates, groups...)
		return nil
	}
	removed, err := removeDuplicates(ctx, coll, groups)
	r.Duplicates = append(r.Duplicates, removed...)
	if err != nil {
		return err
	}
	model := mongo.IndexModel{Keys: countsKeySpec(), Options: options.Index().SetName(CountsKeyIndex).SetUnique(true)}
	if _, err := coll.Indexes().CreateOne(ctx, model); err != nil {
		if mongo.IsDuplicateKeyError(err) {
			return fmt.Errorf("create index %s: duplicates were written during the migration; rerun it: %w", CountsKeyIndex, err)
		}
		return fmt.Errorf("create index %s: %w", CountsKeyIndex, err)
	}
	return nil
}

// IndexConflictError means an index named like one rollup needs exists with another definition.
type IndexConflictError struct {
	// Collection is the collection holding the index.
	Collection string
	// Name is the index name.
	Name string
	// Spec is the existing index's definition as listIndexes returned it.
	Spec bson.Raw
}

// Error names the index and tells the operator how to fix it.
func (e *IndexConflictError) Error() string {
	return fmt.Sprintf("index %s on %s exists with a different definition %s (want a plain unique index on exactly "+
		"{id: 1, type: 1, timestamp: 1}): drop it (db.%s.dropIndex(%q)) and rerun `rollup migrate up`",
		e.Name, e.Collection, e.Spec.String(), e.Collection, e.Name)
}

// Permanent marks the error as one that retrying cannot fix (retry.IsPermanent).
func (e *IndexConflictError) Permanent() bool { return true }

// SchemaError means the database lacks what the steps built although they are recorded as
// applied (someone dropped it): rollup must not write until an operator repairs it.
type SchemaError struct {
	// Missing names what is missing.
	Missing string
	// Fix tells the operator what to do.
	Fix string
}

// Error names what is missing and the fix.
func (e *SchemaError) Error() string { return e.Missing + ": " + e.Fix }

// Permanent marks the error as one that retrying cannot fix (retry.IsPermanent).
func (e *SchemaError) Permanent() bool { return true }

// CheckSchema checks what rollup's writes rely on once the steps are applied: the unique
// index CountsKeyIndex with its exact definition. A missing index is a *SchemaError, a
// different one an *IndexConflictError.
func CheckSchema(ctx context.Context, db *mongo.Database) error {
	ok, err := hasCountsKeyIndex(ctx, db.Collection(CountsCollection))
	if err != nil {
		return err
	}
	if !ok {
		return &SchemaError{
			Missing: fmt.Sprintf("the unique index %s on %s is missing although migration 1 is recorded as applied (was it dropped?); "+
				"without it concurrent upserts insert duplicate counts", CountsKeyIndex, CountsCollection),
			Fix: fmt.Sprintf("delete the record of step 1 (db.%s.deleteOne({_id: 1})) and run `rollup migrate up`, "+
				"which removes duplicates and rebuilds the index", MigrationsCollection),
		}
	}
	return nil
}

// hasCountsKeyIndex reports whether CountsKeyIndex exists with exactly the definition rollup
// relies on: unique on exactly {id: 1, type: 1, timestamp: 1}, not sparse, not partial and
// without a collation (either would weaken uniqueness).
func hasCountsKeyIndex(ctx context.Context, coll *mongo.Collection) (bool, error) {
	cur, err := coll.Indexes().List(ctx)
	if err != nil {
		return false, fmt.Errorf("list indexes of %s: %w", coll.Name(), err)
	}
	var specs []bson.Raw
	if err := cur.All(ctx, &specs); err != nil {
		return false, fmt.Errorf("list indexes of %s: %w", coll.Name(), err)
	}
	for _, spec := range specs {
		name, _ := spec.Lookup("name").StringValueOK()
		if name != CountsKeyIndex {
			continue
		}
		if !isCountsKeyIndex(spec) {
			return false, &IndexConflictError{Collection: coll.Name(), Name: name, Spec: spec}
		}
		return true, nil
	}
	return false, nil
}

// isCountsKeyIndex checks one listIndexes entry against the definition of CountsKeyIndex.
func isCountsKeyIndex(spec bson.Raw) bool {
	if u, ok := spec.Lookup("unique").BooleanOK(); !ok || !u {
		return false
	}
	if s, ok := spec.Lookup("sparse").BooleanOK(); ok && s {
		return false
	}
	for _, f := range []string{"partialFilterExpression", "collation"} {
		if _, err := spec.LookupErr(f); err == nil {
			return false
		}
	}
	key, ok := spec.Lookup("key").DocumentOK()
	if !ok {
		return false
	}
	elems, err := key.Elements()
	if err != nil {
		return false
	}
	want := countsKeySpec()
	if len(elems) != len(want) {
		return false
	}
	for i, e := range elems {
		if e.Key() != want[i].Key {
			return false
		}
		v := e.Value()
		if n, ok := v.AsInt64OK(); ok && n == 1 {
			continue
		}
		if f, ok := v.DoubleOK(); ok && f == 1 {
			continue
		}
		return false
	}
	return true
}

// tokensProjectIndex is step 2: the index tokens are listed by.
func tokensProjectIndex(ctx context.Context, db *mongo.Database, r *Report) error {
	if r.DryRun {
		return nil
	}
	model := mongo.IndexModel{Keys: bson.D{{Key: FieldProject, Value: int32(1)}}, Options: options.Index().SetName(TokensProjectIndex)}
	if _, err := db.Collection(TokensCollection).Indexes().CreateOne(ctx, model); err != nil {
		return fmt.Errorf("create index %s on %s: %w", TokensProjectIndex, TokensCollection, err)
	}
	return nil
}

// projectsCollection is step 3: the projects collection (its _id is the project name, so it
// needs no other index).
func projectsCollection(ctx context.Context, db *mongo.Database, r *Report) error {
	if r.DryRun {
		return nil
	}
	err := db.CreateCollection(ctx, ProjectsCollection)
	if se := mongo.ServerError(nil); errors.As(err, &se) && se.HasErrorCode(codeNamespaceExists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create collection %s: %w", ProjectsCollection, err)
	}
	return nil
}

// treeIndexes is step 4: the indexes the versioned tree store queries by.
func treeIndexes(ctx context.Context, db *mongo.Database, r *Report) error {
	if r.DryRun {
		return nil
	}
	for _, ix := range treedb.Indexes() {
		if _, err := db.Collection(ix.Collection).Indexes().CreateOne(ctx, ix.Model); err != nil {
			return fmt.Errorf("create index on %s: %w", ix.Collection, err)
		}
	}
	return nil
}

// countsWrittenAtIndex is step 5: leaves by write time, so the watcher can replay the window
// a lost change-stream history left uncovered without scanning every count.
func countsWrittenAtIndex(ctx context.Context, db *mongo.Database, r *Report) error {
	if r.DryRun {
		return nil
	}
	model := mongo.IndexModel{Keys: bson.D{{Key: FieldWrittenAt, Value: int32(1)}}, Options: options.Index().SetName(CountsWrittenAtIndex)}
	if _, err := db.Collection(CountsCollection).Indexes().CreateOne(ctx, model); err != nil {
		return fmt.Errorf("create index %s on %s: %w", CountsWrittenAtIndex, CountsCollection, err)
	}
	return nil
}

// countsProjectTickIndex is step 6: every count of a project at a tick (the read API's tree,
// verify and replay read by it).
func countsProjectTickIndex(ctx context.Context, db *mongo.Database, r *Report) error {
	if r.DryRun {
		return nil
	}
	model := mongo.IndexModel{Keys: bson.D{{Key: FieldProject, Value: int32(1)}, {Key: FieldTimestamp, Value: int32(1)}}, Options: options.Index().SetName(CountsProjectTickIndex)}
	if _, err := db.Collection(CountsCollection).Indexes().CreateOne(ctx, model); err != nil {
		return fmt.Errorf("create index %s on %s: %w", CountsProjectTickIndex, CountsCollection, err)
	}
	return nil
}
