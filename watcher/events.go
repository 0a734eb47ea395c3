package watcher

import (
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/migrations"
)

// fieldRollup marks parent and root documents (written only by the watcher and replay).
const fieldRollup = "rollup"

// leaf is one leaf count as read from a change event's fullDocument or from the collection.
type leaf struct {
	Project string
	ID      string
	Type    string
	Tick    time.Time
	Online  int64
	Version int64
}

// leafFilter is the $match of the change stream: leaf writes (insert, update, replace of a
// document that is not a rollup) plus the events that end a stream (so invalidate reaches us).
func leafFilter() mongo.Pipeline {
	return mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "$or", Value: bson.A{
		bson.D{
			{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"insert", "update", "replace"}}}},
			{Key: "fullDocument." + fieldRollup, Value: bson.D{{Key: "$ne", Value: true}}},
		},
		bson.D{{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"invalidate", "drop", "rename", "dropDatabase"}}}}},
	}}}}}}
}

// decodeLeaf reads a leaf document. It fails on documents that lack a leaf field or carry one
// with the wrong type (they are counted as invalid, never guessed at).
func decodeLeaf(doc bson.Raw) (leaf, error) {
	var l leaf
	var ok bool
	str := func(name string, dst *string) error {
		v, err := doc.LookupErr(name)
		if err != nil {
			return fmt.Errorf("missing %s", name)
		}
		if *dst, ok = v.StringValueOK(); !ok || *dst == "" {
			return fmt.Errorf("%s is %s, want a non-empty string", name, v.Type)
		}
		return nil
	}
	num := func(name string, dst *int64) error {
		v, err := doc.LookupErr(name)
		if err != nil {
			return fmt.Errorf("missing %s", name)
		}
		if *dst, ok = v.AsInt64OK(); !ok || v.Type == bson.TypeDouble {
			return fmt.Errorf("%s is %s, want an integer", name, v.Type)
		}
		return nil
	}
	for _, f := range []error{
		str(migrations.FieldProject, &l.Project),
		str(migrations.FieldID, &l.ID),
		str(migrations.FieldType, &l.Type),
		num(migrations.FieldOnline, &l.Online),
		num(migrations.FieldVersion, &l.Version),
	} {
		if f != nil {
			return leaf{}, f
		}
	}
	v, err := doc.LookupErr(migrations.FieldTimestamp)
	if err != nil {
		return leaf{}, fmt.Errorf("missing %s", migrations.FieldTimestamp)
	}
	dt, ok := v.DateTimeOK()
	if !ok {
		return leaf{}, fmt.Errorf("%s is %s, want a date", migrations.FieldTimestamp, v.Type)
	}
	l.Tick = time.UnixMilli(dt).UTC()
	return l, nil
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
