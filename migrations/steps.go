package migrations

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/store"
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
	// Indexes are the indexes the step builds, as "collection.name" (store.Indexes): when
	// one drifts, Up runs the step again to repair it.
	Indexes []string
}

// Steps returns rollup's schema steps in version order. Every step that builds an index
// builds it through ensureIndex, so running an applied step again repairs its index (drift).
func Steps() []Step {
	return []Step{
		{Version: 1, Name: "counts: resolve duplicate keys, unique index " + store.CountsKeyIndex, Up: countsUniqueIndex,
			Indexes: []string{store.CountsCollection + "." + store.CountsKeyIndex}},
		{Version: 2, Name: "tokens: index " + store.TokensProjectIndex, Up: indexStep(store.TokensCollection, store.TokensProjectIndex),
			Indexes: []string{store.TokensCollection + "." + store.TokensProjectIndex}},
		{Version: 3, Name: "projects: collection", Up: projectsCollection},
		{Version: 4, Name: "trees, tree_nodes: indexes of versioned trees", Up: treeIndexes, Indexes: treeIndexNames()},
		{Version: 5, Name: "counts: index " + store.CountsWrittenAtIndex + " (replay of a lost change-stream window)",
			Up:      indexStep(store.CountsCollection, store.CountsWrittenAtIndex),
			Indexes: []string{store.CountsCollection + "." + store.CountsWrittenAtIndex}},
		{Version: 6, Name: "counts: index " + store.CountsProjectTickIndex + " (a project's nodes at a tick)",
			Up:      indexStep(store.CountsCollection, store.CountsProjectTickIndex),
			Indexes: []string{store.CountsCollection + "." + store.CountsProjectTickIndex}},
		{Version: 7, Name: "instances: TTL index " + InstancesBeatTTLIndex + " (instance ids expire a day after their last heartbeat)", Up: instancesTTL},
		summaryStep(8, store.HourlyCollection, "hourly"),
		summaryStep(9, store.DailyCollection, "daily"),
		{Version: 10, Name: "tree_nodes: index " + treedb.NodesIDIndex + " (a tree import's ids against other projects' trees)",
			Up:      indexStep(treedb.NodesCollection, treedb.NodesIDIndex),
			Indexes: []string{treedb.NodesCollection + "." + treedb.NodesIDIndex}},
		{Version: 11, Name: "events: index " + store.EventsProjectAtIndex + " (annotations by time) and TTL index " + store.EventsEndTTLIndex +
			" (an event expires 400 days after its end)", Up: eventsIndexes,
			Indexes: []string{store.EventsCollection + "." + store.EventsProjectAtIndex}},
	}
}

// eventsIndexes is step 11: the events collection's index for the annotations query and its
// TTL index (store.EventsTTL after an event's end).
func eventsIndexes(ctx context.Context, db *mongo.Database, r *Report) error {
	if err := indexStep(store.EventsCollection, store.EventsProjectAtIndex)(ctx, db, r); err != nil {
		return err
	}
	return ttlStep(store.EventsCollection, store.FieldEventEnd, store.EventsEndTTLIndex, store.EventsTTL)(ctx, db, r)
}

// summaryStep builds the indexes of a summaries collection: the unique key (duplicates,
// which only a dropped index lets in, are resolved first, keeping the newest) and
// {project, timestamp}.
func summaryStep(version int, coll, what string) Step {
	return Step{
		Version: version,
		Name:    fmt.Sprintf("%s: %s summaries, unique index %s and index %s", coll, what, store.SummaryKeyIndex, store.SummaryProjectTickIndex),
		Up: func(ctx context.Context, db *mongo.Database, r *Report) error {
			if err := summaryUniqueIndex(ctx, db, coll, r); err != nil {
				return err
			}
			return indexStep(coll, store.SummaryProjectTickIndex)(ctx, db, r)
		},
		Indexes: []string{coll + "." + store.SummaryKeyIndex, coll + "." + store.SummaryProjectTickIndex},
	}
}

// summaryUniqueIndex is countsUniqueIndex for a summaries collection: the removed documents
// are only counted in the report (summaries are derived; a replay rebuilds them).
func summaryUniqueIndex(ctx context.Context, db *mongo.Database, coll string, r *Report) error {
	ix := mustIndex(coll, store.SummaryKeyIndex)
	build, err := ensureIndex(ctx, db, ix, r)
	if err != nil || !build {
		return err
	}
	c := db.Collection(coll)
	groups, err := findDuplicates(ctx, c)
	if err != nil {
		return err
	}
	if !r.DryRun && len(groups) > 0 {
		groups, err = removeDuplicates(ctx, c, groups)
	}
	for _, g := range groups {
		if r.SummaryDuplicates == nil {
			r.SummaryDuplicates = map[string]int{}
		}
		r.SummaryDuplicates[coll] += len(g.Removed)
	}
	if err != nil || r.DryRun {
		return err
	}
	err = createIndex(ctx, db, ix)
	if mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("create index %s on %s: duplicates were written during the migration; rerun it: %w", store.SummaryKeyIndex, coll, err)
	}
	return err
}

// codeNamespaceExists is MongoDB's NamespaceExists error code.
const codeNamespaceExists = 48

// Catalog is every index rollup relies on: store's collections' (store.Indexes) and the
// trees' (treedb.Indexes). The steps build them and the drift check compares them.
func Catalog() []store.Index {
	return append(store.Indexes(), treedb.Indexes()...)
}

// mustIndex returns the index of the Catalog named name on coll.
func mustIndex(coll, name string) store.Index {
	for _, ix := range Catalog() {
		if ix.Collection == coll && ix.Name == name {
			return ix
		}
	}
	panic(fmt.Sprintf("migrations: index %s.%s is not in the Catalog", coll, name))
}

// ensureIndex makes ix exist as store defines it: nothing when it does, created when it is
// missing, dropped and created again when an index of its name has another definition (the
// drop is recorded in r). With r.DryRun it only records what it would do. It reports whether
// the index must still be built (dry run) or was built.
func ensureIndex(ctx context.Context, db *mongo.Database, ix store.Index, r *Report) (bool, error) {
	d, err := store.CheckIndex(ctx, db, ix)
	if err != nil || d == nil {
		return false, err
	}
	if !d.Missing {
		r.Dropped = append(r.Dropped, DroppedIndex{Collection: ix.Collection, Name: ix.Name, Spec: d.Found})
		if !r.DryRun {
			if err := db.Collection(ix.Collection).Indexes().DropOne(ctx, ix.Name); err != nil {
				return false, fmt.Errorf("drop index %s on %s (it has another definition): %w", ix.Name, ix.Collection, err)
			}
		}
	}
	return true, nil
}

// createIndex builds ix.
func createIndex(ctx context.Context, db *mongo.Database, ix store.Index) error {
	if _, err := db.Collection(ix.Collection).Indexes().CreateOne(ctx, ix.Model()); err != nil {
		return fmt.Errorf("create index %s on %s: %w", ix.Name, ix.Collection, err)
	}
	return nil
}

// indexStep is a step that builds one index of store's catalog.
func indexStep(coll, name string) func(context.Context, *mongo.Database, *Report) error {
	ix := mustIndex(coll, name)
	return func(ctx context.Context, db *mongo.Database, r *Report) error {
		build, err := ensureIndex(ctx, db, ix, r)
		if err != nil || !build || r.DryRun {
			return err
		}
		return createIndex(ctx, db, ix)
	}
}

// countsUniqueIndex is step 1 (see the package comment): resolve the duplicate keys, keeping
// the newest document of each, then build the unique index. An index of its name with
// another definition is dropped first.
func countsUniqueIndex(ctx context.Context, db *mongo.Database, r *Report) error {
	ix := mustIndex(store.CountsCollection, store.CountsKeyIndex)
	coll := db.Collection(store.CountsCollection)
	build, err := ensureIndex(ctx, db, ix, r)
	if err != nil || !build {
		return err // the unique index already guarantees there are no duplicates
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
	err = createIndex(ctx, db, ix)
	if mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("create index %s: duplicates were written during the migration; rerun it: %w", store.CountsKeyIndex, err)
	}
	return err
}

// IndexConflictError means an index named like one rollup needs exists with another
// definition.
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
		"{id: 1, type: 1, timestamp: 1}): run `rollup migrate up`, which drops it, removes duplicate counts and rebuilds it",
		e.Name, e.Collection, e.Spec.String())
}

// Permanent marks the error as one that retrying cannot fix (retry.IsPermanent).
func (e *IndexConflictError) Permanent() bool { return true }

// SchemaError means the database lacks what the steps built although they are recorded as
// applied (someone dropped it): rollup must not write until it is repaired.
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
// index store.CountsKeyIndex with its exact definition. A missing index is a *SchemaError, a
// different one an *IndexConflictError; `rollup migrate up` repairs both.
func CheckSchema(ctx context.Context, db *mongo.Database) error {
	d, err := store.CheckIndex(ctx, db, mustIndex(store.CountsCollection, store.CountsKeyIndex))
	switch {
	case err != nil:
		return err
	case d == nil:
		return nil
	case !d.Missing:
		return &IndexConflictError{Collection: store.CountsCollection, Name: store.CountsKeyIndex, Spec: d.Found}
	}
	return &SchemaError{
		Missing: fmt.Sprintf("the unique index %s on %s is missing although migration 1 is recorded as applied (was it dropped?); "+
			"without it concurrent upserts insert duplicate counts", store.CountsKeyIndex, store.CountsCollection),
		Fix: "run `rollup migrate up`, which removes duplicate counts (keeping the newest) and rebuilds the index",
	}
}

// projectsCollection is step 3: the projects collection (its _id is the project name, so it
// needs no other index).
func projectsCollection(ctx context.Context, db *mongo.Database, r *Report) error {
	if r.DryRun {
		return nil
	}
	err := db.CreateCollection(ctx, store.ProjectsCollection)
	if se := mongo.ServerError(nil); errors.As(err, &se) && se.HasErrorCode(codeNamespaceExists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create collection %s: %w", store.ProjectsCollection, err)
	}
	return nil
}

// treeIndexNames are the indexes step 4 builds, as "collection.name": tree/treedb's, but for
// treedb.NodesIDIndex, which step 10 builds.
func treeIndexNames() []string {
	var out []string
	for _, ix := range treeStepIndexes() {
		out = append(out, ix.Collection+"."+ix.Name)
	}
	return out
}

// treeStepIndexes are the indexes of step 4 (see treeIndexNames).
func treeStepIndexes() []store.Index {
	var out []store.Index
	for _, ix := range treedb.Indexes() {
		switch {
		case ix.Collection == treedb.NodesCollection && ix.Name == treedb.NodesIDIndex:
		case ix.Collection == treedb.TreesCollection || ix.Collection == treedb.NodesCollection:
			out = append(out, ix)
		}
	}
	return out
}

// treeIndexes is step 4: the indexes the versioned tree store queries by.
func treeIndexes(ctx context.Context, db *mongo.Database, r *Report) error {
	for _, ix := range treeStepIndexes() {
		if err := indexStep(ix.Collection, ix.Name)(ctx, db, r); err != nil {
			return err
		}
	}
	return nil
}
