package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TierDocs are one tier's documents: a collection and the filter that tells them from the
// other tier's documents sharing it (leaves and 5-minute parents share counts). Retention
// reads the oldest of a project's documents and deletes them in batches through it.
type TierDocs struct {
	coll  *mongo.Collection
	extra bson.E // zero: none
}

// NewTierDocs returns tier t's documents in db.
func NewTierDocs(db *mongo.Database, t Tier) TierDocs {
	switch t {
	case TierLeaves:
		return TierDocs{coll: db.Collection(CountsCollection), extra: bson.E{Key: FieldRollup, Value: bson.D{{Key: "$ne", Value: true}}}}
	case Tier5m:
		return TierDocs{coll: db.Collection(CountsCollection), extra: bson.E{Key: FieldRollup, Value: true}}
	case Tier1h:
		return TierDocs{coll: db.Collection(HourlyCollection)}
	}
	return TierDocs{coll: db.Collection(DailyCollection)}
}

// filter is project's documents with a timestamp in [from, to) (from zero: unbounded).
func (d TierDocs) filter(project string, from, to time.Time) bson.D {
	ts := bson.D{{Key: "$lt", Value: bson.NewDateTimeFromTime(to)}}
	if !from.IsZero() {
		ts = append(bson.D{{Key: "$gte", Value: bson.NewDateTimeFromTime(from)}}, ts...)
	}
	f := bson.D{{Key: FieldProject, Value: project}, {Key: FieldTimestamp, Value: ts}}
	if d.extra.Key != "" {
		f = append(f, d.extra)
	}
	return f
}

// Oldest returns the timestamp of project's oldest document in [from, to); ok is false when
// there is none. The {project, timestamp} index gives the order, so it reads one document.
func (d TierDocs) Oldest(ctx context.Context, project string, from, to time.Time) (time.Time, bool, error) {
	var doc struct {
		TS time.Time `bson:"timestamp"`
	}
	err := d.coll.FindOne(ctx, d.filter(project, from, to), options.FindOne().
		SetSort(bson.D{{Key: FieldTimestamp, Value: 1}}).
		SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: FieldTimestamp, Value: 1}})).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("find the oldest document of %s in %s: %w", project, d.coll.Name(), err)
	}
	return doc.TS.UTC(), true, nil
}

// At reports whether project has a document with timestamp exactly t.
func (d TierDocs) At(ctx context.Context, project string, t time.Time) (bool, error) {
	f := bson.D{{Key: FieldProject, Value: project}, {Key: FieldTimestamp, Value: bson.NewDateTimeFromTime(t)}}
	if d.extra.Key != "" {
		f = append(f, d.extra)
	}
	err := d.coll.FindOne(ctx, f, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find a document of %s at %s in %s: %w", project, t.Format(time.RFC3339), d.coll.Name(), err)
	}
	return true, nil
}

// Batch returns the _ids and the first and last timestamps of up to n of project's oldest
// documents in [from, to).
func (d TierDocs) Batch(ctx context.Context, project string, from, to time.Time, n int) (ids []any, first, last time.Time, _ error) {
	cur, err := d.coll.Find(ctx, d.filter(project, from, to), options.Find().
		SetSort(bson.D{{Key: FieldTimestamp, Value: 1}}).
		SetLimit(int64(n)).SetBatchSize(int32(min(n, 100_000))).
		SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: FieldTimestamp, Value: 1}}))
	if err != nil {
		return nil, first, last, fmt.Errorf("find expired documents of %s in %s: %w", project, d.coll.Name(), err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	ids = make([]any, 0, n)
	for cur.Next(ctx) {
		id := cur.Current.Lookup("_id")
		ids = append(ids, bson.RawValue{Type: id.Type, Value: slices.Clone(id.Value)})
		if dt, ok := cur.Current.Lookup(FieldTimestamp).DateTimeOK(); ok {
			last = time.UnixMilli(dt).UTC()
			if first.IsZero() {
				first = last
			}
		}
	}
	if err := cur.Err(); err != nil {
		return nil, first, last, fmt.Errorf("find expired documents of %s in %s: %w", project, d.coll.Name(), err)
	}
	return ids, first, last, nil
}

// Remove deletes the documents ids among project's documents with a timestamp in [first,
// last], a batch's span, all before the horizon (the filter repeats the bounds, so a
// document that is not expired is never deleted, and the store reads only the batch's span
// of the {project, timestamp} index, not every expired document left, whichever index it
// picks).
func (d TierDocs) Remove(ctx context.Context, project string, ids []any, first, last time.Time) (int64, error) {
	f := bson.D{{Key: FieldProject, Value: project}, {Key: FieldTimestamp, Value: bson.D{
		{Key: "$gte", Value: bson.NewDateTimeFromTime(first)}, {Key: "$lte", Value: bson.NewDateTimeFromTime(last)}}}}
	if d.extra.Key != "" {
		f = append(f, d.extra)
	}
	f = append(f, bson.E{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}})
	res, err := d.coll.DeleteMany(ctx, f)
	if err != nil {
		return 0, fmt.Errorf("delete expired documents of %s in %s: %w", project, d.coll.Name(), err)
	}
	return res.DeletedCount, nil
}

// Bucket returns the length of tier t's buckets: a tick (5 minutes) for leaves and 5-minute
// parents, an hour, a UTC day (BucketSpan, with leaves bucketed by tick).
func Bucket(t Tier) time.Duration {
	if t == TierLeaves {
		return SummaryTick
	}
	return BucketSpan(t)
}

// Built returns the tier built from t's documents (5m from leaves, 1h from 5m, 1d from 1h);
// ok is false for 1d, from which nothing is built.
func Built(t Tier) (Tier, bool) {
	switch t {
	case TierLeaves:
		return Tier5m, true
	case Tier5m:
		return Tier1h, true
	case Tier1h:
		return Tier1d, true
	}
	return "", false
}

// SourceOf returns the tier t is built from (the inverse of Built); ok is false for leaves.
func SourceOf(t Tier) (Tier, bool) {
	for _, s := range Tiers() {
		if b, ok := Built(s); ok && b == t {
			return s, true
		}
	}
	return "", false
}
