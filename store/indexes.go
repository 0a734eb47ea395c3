package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Index names of the indexes rollup builds (package migrations builds them; the trees'
// indexes are tree/treedb's, named by MongoDB's default rule).
const (
	// CountsKeyIndex is the unique index on exactly {id: 1, type: 1, timestamp: 1}: without
	// it, concurrent upserts insert duplicate counts.
	CountsKeyIndex = "id_1_type_1_timestamp_1"
	// CountsWrittenAtIndex is the index on counts.written_at (replay of a lost change-stream
	// window).
	CountsWrittenAtIndex = "written_at_1"
	// CountsProjectTickIndex is the index on counts {project: 1, timestamp: 1} (a project's
	// documents at a tick).
	CountsProjectTickIndex = "project_1_timestamp_1"
	// TokensProjectIndex is the index on tokens.project.
	TokensProjectIndex = "project_1"
	// SummaryKeyIndex is the unique index on exactly {id: 1, type: 1, timestamp: 1} of each
	// summaries collection (rollups_1h, rollups_1d): one summary per node and bucket.
	SummaryKeyIndex = "id_1_type_1_timestamp_1"
	// SummaryProjectTickIndex is the index on {project: 1, timestamp: 1} of each summaries
	// collection (replay, verify and retention read a project's buckets by time).
	SummaryProjectTickIndex = "project_1_timestamp_1"
)

// Index is an index rollup relies on.
type Index struct {
	// Collection holds the index; Name is its name.
	Collection, Name string
	// Keys is the index key, in order.
	Keys bson.D
	// Unique marks a unique index.
	Unique bool
	// Purpose says what needs the index, for messages.
	Purpose string
}

// Model is the index as createIndexes takes it.
func (ix Index) Model() mongo.IndexModel {
	o := options.Index().SetName(ix.Name)
	if ix.Unique {
		o.SetUnique(true)
	}
	return mongo.IndexModel{Keys: ix.Keys, Options: o}
}

// CountsKey is the key of CountsKeyIndex.
func CountsKey() bson.D {
	return bson.D{{Key: FieldID, Value: int32(1)}, {Key: FieldType, Value: int32(1)}, {Key: FieldTimestamp, Value: int32(1)}}
}

// Indexes lists every index of store's collections rollup relies on; the trees' are
// tree/treedb's (treedb.Indexes), and package migrations holds the whole catalog.
func Indexes() []Index {
	out := []Index{
		{Collection: CountsCollection, Name: CountsKeyIndex, Keys: CountsKey(), Unique: true,
			Purpose: "one document per (id, type, timestamp): without it concurrent upserts insert duplicate counts"},
		{Collection: CountsCollection, Name: CountsWrittenAtIndex, Keys: bson.D{{Key: FieldWrittenAt, Value: int32(1)}},
			Purpose: "the replay of a lost change-stream window reads leaves by write time"},
		{Collection: CountsCollection, Name: CountsProjectTickIndex, Keys: bson.D{{Key: FieldProject, Value: int32(1)}, {Key: FieldTimestamp, Value: int32(1)}},
			Purpose: "the read API, verify and replay read a project's documents by tick"},
		{Collection: TokensCollection, Name: TokensProjectIndex, Keys: bson.D{{Key: FieldProject, Value: int32(1)}},
			Purpose: "tokens are listed by project"},
		{Collection: EventsCollection, Name: EventsProjectAtIndex, Keys: bson.D{{Key: FieldEventProject, Value: int32(1)}, {Key: FieldEventAt, Value: int32(1)}},
			Purpose: "the annotations of a project (and of every project) are read by time"},
	}
	for _, coll := range []string{HourlyCollection, DailyCollection} {
		out = append(out,
			Index{Collection: coll, Name: SummaryKeyIndex, Keys: CountsKey(), Unique: true,
				Purpose: "one summary per (id, type, bucket): without it concurrent upserts insert duplicate summaries"},
			Index{Collection: coll, Name: SummaryProjectTickIndex, Keys: bson.D{{Key: FieldProject, Value: int32(1)}, {Key: FieldTimestamp, Value: int32(1)}},
				Purpose: "replay, verify and retention read a project's summaries by time"})
	}
	return out
}

// IndexNamed returns the index of Indexes named name on coll.
func IndexNamed(coll, name string) (Index, bool) {
	for _, ix := range Indexes() {
		if ix.Collection == coll && ix.Name == name {
			return ix, true
		}
	}
	return Index{}, false
}

// DefaultIndexName is the name MongoDB gives an index created without one: each key and its
// value joined by "_".
func DefaultIndexName(keys bson.D) string {
	parts := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		parts = append(parts, k.Key, fmt.Sprint(k.Value))
	}
	return strings.Join(parts, "_")
}

// Drift is a difference between an index rollup relies on and the database.
type Drift struct {
	// Index is the index as rollup wants it.
	Index Index
	// Missing: no index of that name (nor an equivalent one) exists. Otherwise an index of
	// that name exists with another definition, Found.
	Missing bool
	Found   bson.Raw
}

// String says what is wrong, for an operator.
func (d Drift) String() string {
	if d.Missing {
		return fmt.Sprintf("index %s on %s is missing (%s)", d.Index.Name, d.Index.Collection, d.Index.Purpose)
	}
	return fmt.Sprintf("index %s on %s has another definition, %s; want %s", d.Index.Name, d.Index.Collection, d.Found.String(), d.Index.describe())
}

// describe renders the definition rollup wants.
func (ix Index) describe() string {
	parts := make([]string, len(ix.Keys))
	for i, k := range ix.Keys {
		parts[i] = fmt.Sprintf("%s: %v", k.Key, k.Value)
	}
	s := "{" + strings.Join(parts, ", ") + "}"
	if ix.Unique {
		s += " unique"
	}
	return s + " (not sparse, not partial, no collation)"
}

// CheckIndexes compares every index of catalog with the database and returns the drift, in
// the order of catalog (nil when everything is as rollup wants it). An index rollup wants that
// exists with the same definition under another name counts as present.
func CheckIndexes(ctx context.Context, db *mongo.Database, catalog []Index) ([]Drift, error) {
	specs := map[string][]bson.Raw{}
	var out []Drift
	for _, ix := range catalog {
		have, ok := specs[ix.Collection]
		if !ok {
			var err error
			if have, err = listIndexes(ctx, db.Collection(ix.Collection)); err != nil {
				return nil, err
			}
			specs[ix.Collection] = have
		}
		if d := ix.drift(have); d != nil {
			out = append(out, *d)
		}
	}
	return out, nil
}

// CheckIndex is CheckIndexes for one index: nil when it is as rollup wants it.
func CheckIndex(ctx context.Context, db *mongo.Database, ix Index) (*Drift, error) {
	have, err := listIndexes(ctx, db.Collection(ix.Collection))
	if err != nil {
		return nil, err
	}
	return ix.drift(have), nil
}

// drift compares ix with a collection's listIndexes entries.
func (ix Index) drift(specs []bson.Raw) *Drift {
	for _, spec := range specs {
		if name, _ := spec.Lookup("name").StringValueOK(); name == ix.Name {
			if ix.Matches(spec) {
				return nil
			}
			return &Drift{Index: ix, Found: spec}
		}
	}
	for _, spec := range specs {
		if ix.Matches(spec) {
			return nil // the same index under another name
		}
	}
	return &Drift{Index: ix, Missing: true}
}

// codeNamespaceNotFound is MongoDB's NamespaceNotFound error code (listIndexes of a
// collection that does not exist).
const codeNamespaceNotFound = 26

// listIndexes returns a collection's index definitions (none when it does not exist).
func listIndexes(ctx context.Context, coll *mongo.Collection) ([]bson.Raw, error) {
	cur, err := coll.Indexes().List(ctx)
	if se := mongo.ServerError(nil); errors.As(err, &se) && se.HasErrorCode(codeNamespaceNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list indexes of %s: %w", coll.Name(), err)
	}
	var specs []bson.Raw
	if err := cur.All(ctx, &specs); err != nil {
		return nil, fmt.Errorf("list indexes of %s: %w", coll.Name(), err)
	}
	return specs, nil
}

// Matches checks one listIndexes entry against ix's definition: the same key in the same
// order, unique exactly when ix is, not sparse, not partial and without a collation (each
// would weaken what rollup relies on).
func (ix Index) Matches(spec bson.Raw) bool {
	if u, _ := spec.Lookup("unique").BooleanOK(); u != ix.Unique {
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
	if err != nil || len(elems) != len(ix.Keys) {
		return false
	}
	for i, e := range elems {
		want, ok := keyDirection(ix.Keys[i].Value)
		if e.Key() != ix.Keys[i].Key || !ok {
			return false
		}
		if n, ok := Count(e.Value()); !ok || n != want {
			return false
		}
	}
	return true
}

// keyDirection reads an index key's direction as a Go value (1 or -1).
func keyDirection(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}
