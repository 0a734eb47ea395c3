package migrations

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/store"
)

// deleteBatch is the number of deletes sent in one unordered bulk write.
const deleteBatch = 1000

// ErrDuplicatesChanged means a document chosen for removal was modified by a writer during the
// migration, so it was left in place; rerun the migration to resolve its group again.
var ErrDuplicatesChanged = errors.New("duplicate documents changed during the migration; rerun it")

// duplicatesPipeline finds every (id, type, timestamp) group with more than one document and
// returns each with its documents newest first, in key order. The keys use $ifNull so that a
// missing field groups with null, as in the unique index.
func duplicatesPipeline() mongo.Pipeline {
	keyPart := func(f string) bson.E {
		return bson.E{Key: f, Value: bson.D{{Key: "$ifNull", Value: bson.A{"$" + f, nil}}}}
	}
	return mongo.Pipeline{
		{{Key: "$group", Value: bson.D{
			{Key: "_id", Value: bson.D{keyPart(store.FieldID), keyPart(store.FieldType), keyPart(store.FieldTimestamp)}},
			{Key: "n", Value: bson.D{{Key: "$sum", Value: int32(1)}}},
			{Key: "docs", Value: bson.D{{Key: "$push", Value: "$$ROOT"}}},
		}}},
		{{Key: "$match", Value: bson.D{{Key: "n", Value: bson.D{{Key: "$gt", Value: int32(1)}}}}}},
		{{Key: "$unwind", Value: "$docs"}},
		{{Key: "$sort", Value: bson.D{
			{Key: "_id", Value: int32(1)},
			{Key: "docs." + store.FieldVersion, Value: int32(-1)},
			{Key: "docs." + store.FieldWrittenAt, Value: int32(-1)},
			{Key: "docs._id", Value: int32(-1)},
		}}},
		{{Key: "$group", Value: bson.D{
			{Key: "_id", Value: "$_id"},
			{Key: "docs", Value: bson.D{{Key: "$push", Value: "$docs"}}},
		}}},
		{{Key: "$sort", Value: bson.D{{Key: "_id", Value: int32(1)}}}},
	}
}

// dupResult is one output document of duplicatesPipeline.
type dupResult struct {
	Key  bson.Raw   `bson:"_id"`
	Docs []bson.Raw `bson:"docs"`
}

// findDuplicates runs duplicatesPipeline and splits each group into the kept document and the
// ones to remove.
func findDuplicates(ctx context.Context, coll *mongo.Collection) ([]DuplicateGroup, error) {
	cur, err := coll.Aggregate(ctx, duplicatesPipeline(), options.Aggregate().SetAllowDiskUse(true))
	if err != nil {
		return nil, fmt.Errorf("find duplicates in %s: %w", coll.Name(), err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	var groups []DuplicateGroup
	for cur.Next(ctx) {
		var d dupResult
		if err := cur.Decode(&d); err != nil {
			return nil, fmt.Errorf("decode duplicate group: %w", err)
		}
		if len(d.Docs) < 2 {
			continue // cannot happen ($match n > 1); never index past the slice
		}
		groups = append(groups, DuplicateGroup{Key: d.Key, Kept: d.Docs[0], Removed: d.Docs[1:]})
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("find duplicates in %s: %w", coll.Name(), err)
	}
	return groups, nil
}

// guardFilter matches doc by _id only while its version and written_at are unchanged.
func guardFilter(doc bson.Raw) bson.D {
	f := bson.D{{Key: "_id", Value: doc.Lookup("_id")}}
	for _, name := range []string{store.FieldVersion, store.FieldWrittenAt} {
		if v, err := doc.LookupErr(name); err == nil {
			f = append(f, bson.E{Key: name, Value: bson.D{{Key: "$eq", Value: v}}})
		} else {
			f = append(f, bson.E{Key: name, Value: bson.D{{Key: "$exists", Value: false}}})
		}
	}
	return f
}

// removal is one document to delete and where it goes in the report.
type removal struct {
	group int
	doc   bson.Raw
}

// removeDuplicates deletes the Removed documents of groups (each only if unchanged) and returns
// the groups with Removed cut down to the documents that are gone. It returns
// ErrDuplicatesChanged when some could not be removed.
func removeDuplicates(ctx context.Context, coll *mongo.Collection, groups []DuplicateGroup) ([]DuplicateGroup, error) {
	var all []removal
	for i, g := range groups {
		for _, d := range g.Removed {
			all = append(all, removal{group: i, doc: d})
		}
	}
	out := make([]DuplicateGroup, len(groups))
	for i, g := range groups {
		out[i] = DuplicateGroup{Key: g.Key, Kept: g.Kept}
	}
	kept := 0
	for start := 0; start < len(all); start += deleteBatch {
		batch := all[start:min(start+deleteBatch, len(all))]
		gone, err := deleteBatchOf(ctx, coll, batch)
		if err != nil {
			return compact(out), err
		}
		for i, rm := range batch {
			if gone[i] {
				out[rm.group].Removed = append(out[rm.group].Removed, rm.doc)
			} else {
				kept++
			}
		}
	}
	if kept > 0 {
		return compact(out), fmt.Errorf("%d of %d documents not removed: %w", kept, len(all), ErrDuplicatesChanged)
	}
	return out, nil
}

// compact drops groups from which nothing was removed.
func compact(groups []DuplicateGroup) []DuplicateGroup {
	out := groups[:0]
	for _, g := range groups {
		if len(g.Removed) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// deleteBatchOf deletes one batch with guarded deletes and reports, per document, whether it
// is gone afterwards (when every delete matched, all are; otherwise it looks).
func deleteBatchOf(ctx context.Context, coll *mongo.Collection, batch []removal) ([]bool, error) {
	models := make([]mongo.WriteModel, len(batch))
	for i, rm := range batch {
		models[i] = mongo.NewDeleteOneModel().SetFilter(guardFilter(rm.doc))
	}
	res, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
	if err != nil {
		return nil, fmt.Errorf("delete duplicates: %w", err)
	}
	gone := make([]bool, len(batch))
	if int(res.DeletedCount) == len(batch) {
		for i := range gone {
			gone[i] = true
		}
		return gone, nil
	}
	ids := make(bson.A, len(batch))
	for i, rm := range batch {
		ids[i] = rm.doc.Lookup("_id")
	}
	cur, err := coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}},
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("check deleted duplicates: %w", err)
	}
	var left []bson.Raw
	if err := cur.All(ctx, &left); err != nil {
		return nil, fmt.Errorf("check deleted duplicates: %w", err)
	}
	for i, rm := range batch {
		id := rm.doc.Lookup("_id")
		gone[i] = true
		for _, l := range left {
			if l.Lookup("_id").Equal(id) {
				gone[i] = false
				break
			}
		}
	}
	return gone, nil
}
