package watcher

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/store"
)

// leafFilter is the $match of the change stream: leaf writes (insert, update, replace of a
// document that is not a rollup) plus the events that end a stream (so invalidate reaches us).
func leafFilter() mongo.Pipeline {
	return mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "$or", Value: bson.A{
		bson.D{
			{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"insert", "update", "replace"}}}},
			{Key: "fullDocument." + store.FieldRollup, Value: bson.D{{Key: "$ne", Value: true}}},
		},
		bson.D{{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"invalidate", "drop", "rename", "dropDatabase"}}}}},
	}}}}}}
}

// leafProjection is the last stage of the change stream: only the fields of an event the
// watcher reads (decodeEvent: the operation, its times, and the leaf fields DecodeLeaf reads
// from fullDocument), so the stream does not carry whole documents, their namespace, key and
// update description: about half of the bytes of a leaf's event, and less for the store to
// send and the driver to decode. The event's _id (the resume token) is always kept.
func leafProjection() bson.D {
	keep := bson.D{{Key: "operationType", Value: 1}, {Key: "clusterTime", Value: 1}, {Key: "wallTime", Value: 1}}
	for _, f := range []string{store.FieldProject, store.FieldID, store.FieldType, store.FieldTimestamp,
		store.FieldOnline, store.FieldVersion, store.FieldRollup} {
		keep = append(keep, bson.E{Key: "fullDocument." + f, Value: 1})
	}
	return bson.D{{Key: "$project", Value: keep}}
}

// event is the part of a change event the watcher uses.
type event struct {
	op   string
	wall time.Time
	doc  bson.Raw // fullDocument, nil when absent (deleted before the lookup)
}

func decodeEvent(raw bson.Raw) event {
	var e event
	if v, err := raw.LookupErr("operationType"); err == nil {
		e.op, _ = v.StringValueOK()
	}
	if v, err := raw.LookupErr("wallTime"); err == nil {
		if ms, ok := v.DateTimeOK(); ok {
			e.wall = time.UnixMilli(ms).UTC()
		}
	}
	if e.wall.IsZero() {
		if v, err := raw.LookupErr("clusterTime"); err == nil {
			if t, _, ok := v.TimestampOK(); ok {
				e.wall = time.Unix(int64(t), 0).UTC()
			}
		}
	}
	if v, err := raw.LookupErr("fullDocument"); err == nil {
		e.doc, _ = v.DocumentOK()
	}
	return e
}
