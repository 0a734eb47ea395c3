package store

import (
	"fmt"
	"math"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/rollup"
)

// ParentUpdate returns the update document that stores p absolutely: {$set: {every field}}
// with version = p.Rev and rollup: true. It has no $inc, so applying it twice is harmless; the
// writer guards it with a filter on the previous Rev. Children are in id order (deterministic
// bytes).
func ParentUpdate(p rollup.Parent, writtenAt time.Time) bson.D {
	return bson.D{{Key: "$set", Value: ParentFields(p, writtenAt)}}
}

// ParentFields is the document ParentUpdate sets: a whole parent document without _id.
func ParentFields(p rollup.Parent, writtenAt time.Time) bson.D {
	ids := make([]string, 0, len(p.Children))
	for id := range p.Children {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	children := make(bson.D, 0, len(ids))
	for _, id := range ids {
		st := p.Children[id]
		children = append(children, bson.E{Key: id, Value: bson.D{
			{Key: FieldType, Value: st.Type},
			{Key: FieldOnline, Value: st.Online},
			{Key: FieldVersion, Value: st.Version},
			{Key: FieldReported, Value: st.Reported},
			{Key: FieldExpected, Value: st.Expected},
		}})
	}
	return bson.D{
		{Key: FieldID, Value: p.ID},
		{Key: FieldType, Value: p.Type},
		{Key: FieldTimestamp, Value: bson.NewDateTimeFromTime(p.Timestamp)},
		{Key: FieldProject, Value: p.Project},
		{Key: FieldOnline, Value: p.Online},
		{Key: FieldVersion, Value: p.Rev},
		{Key: FieldChildren, Value: children},
		{Key: FieldReported, Value: p.Reported},
		{Key: FieldExpected, Value: p.Expected},
		{Key: FieldTreeVersion, Value: int64(p.TreeVersion)},
		{Key: FieldWrittenAt, Value: bson.NewDateTimeFromTime(writtenAt)},
		{Key: FieldRollup, Value: true},
	}
}

const docParent = "parent"

// parentFields are the fields every parent document has.
var parentFields = [...]string{
	FieldID, FieldType, FieldTimestamp, FieldProject, FieldOnline, FieldVersion, FieldChildren,
	FieldReported, FieldExpected, FieldTreeVersion, FieldRollup,
}

// DecodeParent decodes a parent or root document of the counts collection, as ParentUpdate
// writes it. It is strict: every field must be present with its type (strings, a
// DateTime timestamp, counts as Count reads them, rollup: true); _id, written_at and term are
// ignored; any other field, or a child with a missing or extra field, is an
// *InvalidDocError naming the field. A leaf document is therefore rejected.
func DecodeParent(doc bson.Raw) (rollup.Parent, error) {
	elems, err := doc.Elements()
	if err != nil {
		return rollup.Parent{}, &InvalidDocError{Doc: docParent, Reason: fmt.Sprintf("invalid BSON: %v", err)}
	}
	var p rollup.Parent
	seen := make(map[string]bool, len(elems))
	for _, e := range elems {
		key, v := e.Key(), e.Value()
		if seen[key] {
			return rollup.Parent{}, &InvalidDocError{Doc: docParent, Field: key, Reason: "duplicate field"}
		}
		seen[key] = true
		switch key {
		case fieldMongoID:
		case FieldWrittenAt:
			if v.Type != bson.TypeDateTime {
				return rollup.Parent{}, typeError(docParent, key, v, "date")
			}
		case FieldID:
			p.ID, err = stringField(docParent, key, v)
		case FieldType:
			p.Type, err = stringField(docParent, key, v)
		case FieldProject:
			p.Project, err = stringField(docParent, key, v)
		case FieldTimestamp:
			p.Timestamp, err = timeField(docParent, key, v)
		case FieldOnline:
			p.Online, err = countField(docParent, key, v)
		case FieldVersion:
			p.Rev, err = countField(docParent, key, v)
		case FieldReported:
			p.Reported, err = countField(docParent, key, v)
		case FieldExpected:
			p.Expected, err = countField(docParent, key, v)
		case FieldTreeVersion:
			var n int64
			n, err = countField(docParent, key, v)
			if err == nil && (n < 0 || n > math.MaxInt32) {
				err = &InvalidDocError{Doc: docParent, Field: key, Reason: fmt.Sprintf("out of range: %d", n)}
			}
			p.TreeVersion = int(n)
		case FieldRollup:
			if b, ok := v.BooleanOK(); !ok || !b {
				return rollup.Parent{}, &InvalidDocError{Doc: docParent, Field: key, Reason: "must be true"}
			}
		case FieldChildren:
			p.Children, err = childrenField(v)
		case FieldTerm:
			// The fencing term of the watcher lease that wrote the document; it guards writes
			// and is no part of the totals.
			_, err = countField(docParent, key, v)
		default:
			return rollup.Parent{}, &InvalidDocError{Doc: docParent, Field: key, Reason: "unknown field"}
		}
		if err != nil {
			return rollup.Parent{}, err
		}
	}
	for _, key := range parentFields {
		if !seen[key] {
			return rollup.Parent{}, &InvalidDocError{Doc: docParent, Field: key, Reason: "missing"}
		}
	}
	return p, nil
}

func childrenField(v bson.RawValue) (map[string]rollup.ChildState, error) {
	doc, ok := v.DocumentOK()
	if !ok {
		return nil, typeError(docParent, FieldChildren, v, "object")
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, &InvalidDocError{Doc: docParent, Field: FieldChildren, Reason: fmt.Sprintf("invalid BSON: %v", err)}
	}
	out := make(map[string]rollup.ChildState, len(elems))
	for _, e := range elems {
		id := e.Key()
		path := FieldChildren + "." + id
		if id == "" {
			return nil, &InvalidDocError{Doc: docParent, Field: path, Reason: "empty child id"}
		}
		if _, dup := out[id]; dup {
			return nil, &InvalidDocError{Doc: docParent, Field: path, Reason: "duplicate child"}
		}
		st, err := childField(path, e.Value())
		if err != nil {
			return nil, err
		}
		out[id] = st
	}
	return out, nil
}

// childFields are the fields of a children map entry, in ParentUpdate's order.
var childFields = [...]string{FieldType, FieldOnline, FieldVersion, FieldReported, FieldExpected}

func childField(path string, v bson.RawValue) (rollup.ChildState, error) {
	doc, ok := v.DocumentOK()
	if !ok {
		return rollup.ChildState{}, typeError(docParent, path, v, "object")
	}
	elems, err := doc.Elements()
	if err != nil {
		return rollup.ChildState{}, &InvalidDocError{Doc: docParent, Field: path, Reason: fmt.Sprintf("invalid BSON: %v", err)}
	}
	var st rollup.ChildState
	var seen [len(childFields)]bool
	for _, e := range elems {
		key, v := e.Key(), e.Value()
		f := path + "." + key
		var i int
		switch key {
		case FieldType:
			i = 0
			st.Type, err = stringField(docParent, f, v)
		case FieldOnline:
			i = 1
			st.Online, err = countField(docParent, f, v)
		case FieldVersion:
			i = 2
			st.Version, err = countField(docParent, f, v)
		case FieldReported:
			i = 3
			st.Reported, err = countField(docParent, f, v)
		case FieldExpected:
			i = 4
			st.Expected, err = countField(docParent, f, v)
		default:
			return rollup.ChildState{}, &InvalidDocError{Doc: docParent, Field: f, Reason: "unknown field"}
		}
		if err != nil {
			return rollup.ChildState{}, err
		}
		if seen[i] {
			return rollup.ChildState{}, &InvalidDocError{Doc: docParent, Field: f, Reason: "duplicate field"}
		}
		seen[i] = true
	}
	for i, key := range childFields {
		if !seen[i] {
			return rollup.ChildState{}, &InvalidDocError{Doc: docParent, Field: path + "." + key, Reason: "missing"}
		}
	}
	return st, nil
}

func stringField(kind, key string, v bson.RawValue) (string, error) {
	s, ok := v.StringValueOK()
	if !ok {
		return "", typeError(kind, key, v, "string")
	}
	return s, nil
}

func timeField(kind, key string, v bson.RawValue) (time.Time, error) {
	ms, ok := v.DateTimeOK()
	if !ok {
		return time.Time{}, typeError(kind, key, v, "date")
	}
	return time.UnixMilli(ms).UTC(), nil
}

func typeError(kind, key string, v bson.RawValue, want string) error {
	return &InvalidDocError{Doc: kind, Field: key, Reason: fmt.Sprintf("has %s, want %s", describe(v), want)}
}
