package store

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/rollup"
)

// Summaries is the collection of one tier's summaries (rollups_1h or rollups_1d) and the
// queries rollup runs on it.
type Summaries struct {
	tier Tier
	coll *mongo.Collection
}

// NewSummaries returns tier t's summaries collection of db (t is Tier1h or Tier1d) with opts
// (write and read concerns are the caller's choice).
func NewSummaries(db *mongo.Database, t Tier, opts ...options.Lister[options.CollectionOptions]) (Summaries, error) {
	name, ok := SummaryCollection(t)
	if !ok {
		return Summaries{}, fmt.Errorf("tier %q has no summaries (want %s or %s)", t, Tier1h, Tier1d)
	}
	return Summaries{tier: t, coll: db.Collection(name, opts...)}, nil
}

// Tier is the collection's tier.
func (s Summaries) Tier() Tier { return s.tier }

// Collection is the underlying collection (for writes and tests).
func (s Summaries) Collection() *mongo.Collection { return s.coll }

// ByKeys reads the summaries stored under keys (Key.Tick is the bucket start) with one find
// on the unique index; keys without a document are absent.
func (s Summaries) ByKeys(ctx context.Context, keys []Key) (map[Key]bson.Raw, error) {
	return byKeys(ctx, s.coll, keys)
}

// In calls fn with the summaries of projects of buckets starting in [from, to) whose id is one
// of ids and whose type is one of types (a superset of the caller's keys, through the unique
// index), decoded, or with the decoding error. It stops at fn's first error and returns it.
func (s Summaries) In(ctx context.Context, projects, ids, types []string, from, to time.Time, fn func(Key, rollup.Summary, error) error) error {
	return s.find(ctx, bson.D{
		{Key: FieldID, Value: bson.D{{Key: "$in", Value: ids}}},
		{Key: FieldType, Value: bson.D{{Key: "$in", Value: types}}},
		{Key: FieldTimestamp, Value: bson.D{{Key: "$gte", Value: from}, {Key: "$lt", Value: to}}},
		projectsFilter(projects),
	}, nil, fn)
}

// Project calls fn with every summary of project whose bucket starts in [from, to), through
// the {project, timestamp} index, as In does.
func (s Summaries) Project(ctx context.Context, project string, from, to time.Time, fn func(Key, rollup.Summary, error) error) error {
	return s.find(ctx, bson.D{
		{Key: FieldProject, Value: project},
		{Key: FieldTimestamp, Value: bson.D{{Key: "$gte", Value: from}, {Key: "$lt", Value: to}}},
	}, nil, fn)
}

// NodeRange calls fn with project's summaries of node (id, typ) whose bucket starts in
// [from, to), in time order, through the unique index's range (the read API). A document
// that does not decode ends the read with its *InvalidDocError.
func (s Summaries) NodeRange(ctx context.Context, project, id, typ string, from, to time.Time, fn func(rollup.Summary)) error {
	return s.find(ctx, nodeRangeFilter(project, id, typ, from, to), bson.D{{Key: FieldTimestamp, Value: 1}},
		func(_ Key, sum rollup.Summary, err error) error {
			if err != nil {
				return err
			}
			fn(sum)
			return nil
		})
}

// Starts returns the distinct bucket starts of project's summaries in [from, to), ascending
// (the {project, timestamp} index).
func (s Summaries) Starts(ctx context.Context, project string, from, to time.Time) ([]time.Time, error) {
	return distinctTicks(ctx, s.coll, project, from, to)
}

func (s Summaries) find(ctx context.Context, filter, sort bson.D, fn func(Key, rollup.Summary, error) error) error {
	o := options.Find().SetBatchSize(10_000)
	if sort != nil {
		o.SetSort(sort)
	}
	cur, err := s.coll.Find(ctx, filter, o)
	if err != nil {
		return fmt.Errorf("find %s: %w", s.coll.Name(), err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	for cur.Next(ctx) {
		k, _ := KeyOf(cur.Current)
		sum, err := DecodeSummary(s.tier, cur.Current)
		if err := fn(k, sum, err); err != nil {
			return err
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("read %s: %w", s.coll.Name(), err)
	}
	return nil
}
