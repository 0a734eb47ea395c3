package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/aggregate"
	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/query"
	"github.com/gameops/rollup/embedded/storage"
)

// writeOutput writes an aggregation's results to the collection its final $out or $merge
// stage names, in one engine write, and returns the write's optime.
func (s *Server) writeOutput(ctx context.Context, db string, out *aggregate.Output, docs []bson.D) (bson.Timestamp, error) {
	if out.DB != "" {
		db = out.DB
	}
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		if out.Stage == "$out" {
			for i, d := range docs {
				var err error
				if docs[i], err = withID(d); err != nil {
					return err
				}
			}
			return w.ReplaceContents(db, out.Coll, docs)
		}
		return mergeInto(w, db, out, docs)
	})
	if err != nil {
		return op, toMongoErr(err)
	}
	return op, nil
}

// mergeInto is $merge: each result is matched to a target document by the On fields and
// then merged, replacing, kept, inserted, discarded or refused per WhenMatched and
// WhenNotMatched. A result without _id gets one only when it is inserted (so merging on
// other fields keeps the target's _id). As in MongoDB, results written before an error stay
// written.
func mergeInto(w *storage.Writer, db string, out *aggregate.Output, docs []bson.D) error {
	byID := len(out.On) == 1 && out.On[0] == "_id"
	if !byID {
		if err := checkMergeOn(w, db, out); err != nil {
			return err
		}
	}
	for _, d := range docs {
		target, err := mergeTarget(w, db, out, d, byID)
		if err != nil {
			return err
		}
		switch {
		case target == nil && out.WhenNotMatched == "insert", target != nil && out.WhenMatched == "fail":
			// whenMatched "fail" is an insert: a duplicate key is the answer to a match.
			nd, err := withID(d)
			if err != nil {
				return err
			}
			if _, err := w.Insert(db, out.Coll, nd); err != nil {
				return err
			}
		case target == nil && out.WhenNotMatched == "fail":
			return mongoerr.New(13113, "$merge could not find a matching document in the target collection for at least one document in the source collection")
		case target == nil, out.WhenMatched == "keepExisting":
		case out.WhenMatched == "replace":
			nd, err := query.Replace(target.full(), d)
			if err != nil {
				return err
			}
			if !query.StrictEqual(nd, target.full()) {
				if _, err := w.Replace(db, out.Coll, target.doc, nd, nil); err != nil {
					return err
				}
			}
		default: // merge: as mongod, the update {$set: result} (so the change event lists each changed field whole)
			upd, err := query.CompileUpdate(bson.D{{Key: "$set", Value: d}})
			if err != nil {
				return err
			}
			nd, desc, changed, err := upd.Apply(target.full(), false)
			if err != nil {
				return err
			}
			if changed {
				if _, err := w.Replace(db, out.Coll, target.doc, nd, storageDesc(upd, desc)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkMergeOn requires a unique index whose key fields are exactly the On fields, as MongoDB
// does to know that a result matches at most one target document.
func checkMergeOn(w *storage.Writer, db string, out *aggregate.Output) error {
	info, _ := w.Collection(db, out.Coll)
	for _, ix := range info.Indexes {
		if !ix.Unique || len(ix.Key) != len(out.On) {
			continue
		}
		all := true
		for _, k := range ix.Key {
			found := false
			for _, f := range out.On {
				found = found || f == k.Key
			}
			all = all && found
		}
		if all {
			return nil
		}
	}
	return mongoerr.New(51183, "Cannot find index to verify that join fields will be unique")
}

// mergeTarget returns the target document a result matches on the On fields, or nil.
func mergeTarget(w *storage.Writer, db string, out *aggregate.Output, d bson.D, byID bool) (*matched, error) {
	if byID {
		id, ok := bsonval.Get(d, "_id")
		if !ok {
			return nil, nil
		}
		t, ok := w.Get(db, out.Coll, id)
		if !ok {
			return nil, nil
		}
		return &matched{doc: t, d: t.D()}, nil
	}
	q := make(bson.D, 0, len(out.On))
	for _, f := range out.On {
		v, ok := bsonval.Lookup(d, f)
		if _, isArr := v.(bson.A); !ok || v == nil || isArr {
			return nil, mongoerr.New(51132, "$merge write error: 'on' field '%s' cannot be missing, null or an array. Full document: %s", f, bsonval.Format(d))
		}
		q = append(q, bson.E{Key: f, Value: bson.D{{Key: "$eq", Value: v}}})
	}
	f, err := query.CompileFilter(q)
	if err != nil {
		return nil, err
	}
	targets, err := findMatching(&w.Reader, db, out.Coll, q, f, 1)
	if err != nil || len(targets) == 0 {
		return nil, err
	}
	return &targets[0], nil
}
