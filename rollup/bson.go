package rollup

import (
	"fmt"
	"math"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/migrations"
)

// Field names that only parent and root documents of the counts collection have. The shared
// ones (id, type, timestamp, project, online, version, written_at) are in package migrations.
const (
	// FieldChildren is the embedded document {<childID>: {type, online, version, reported, expected}}.
	FieldChildren = "children"
	// FieldReported is the number of leaves under the node that reported (int64).
	FieldReported = "reported"
	// FieldExpected is the number of leaves under the node in the tree (int64).
	FieldExpected = "expected"
	// FieldTreeVersion is the tree version the document was computed with (int64).
	FieldTreeVersion = "tree_version"
	// FieldTerm is the lease term of the watcher that last wrote a parent (fencing).
	FieldTerm = "term"
	// FieldRollup is true on every parent and root document, absent on leaves.
	FieldRollup = "rollup"
	// fieldMongoID is the document's _id, ignored by ParentFromDoc.
	fieldMongoID = "_id"
)

// Update returns the update document that stores p absolutely: {$set: {every field}} with
// version = p.Rev and rollup: true. It has no $inc, so applying it twice is harmless; the caller
// guards it with a filter on the previous Rev. Children are in id order (deterministic bytes).
func (p Parent) Update(writtenAt time.Time) bson.D {
	ids := make([]string, 0, len(p.Children))
	for id := range p.Children {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	children := make(bson.D, 0, len(ids))
	for _, id := range ids {
		st := p.Children[id]
		children = append(children, bson.E{Key: id, Value: bson.D{
			{Key: migrations.FieldType, Value: st.Type},
			{Key: migrations.FieldOnline, Value: st.Online},
			{Key: migrations.FieldVersion, Value: st.Version},
			{Key: FieldReported, Value: st.Reported},
			{Key: FieldExpected, Value: st.Expected},
		}})
	}
	return bson.D{{Key: "$set", Value: bson.D{
		{Key: migrations.FieldID, Value: p.ID},
		{Key: migrations.FieldType, Value: p.Type},
		{Key: migrations.FieldTimestamp, Value: bson.NewDateTimeFromTime(p.Timestamp)},
		{Key: migrations.FieldProject, Value: p.Project},
		{Key: migrations.FieldOnline, Value: p.Online},
		{Key: migrations.FieldVersion, Value: p.Rev},
		{Key: FieldChildren, Value: children},
		{Key: FieldReported, Value: p.Reported},
		{Key: FieldExpected, Value: p.Expected},
		{Key: FieldTreeVersion, Value: int64(p.TreeVersion)},
		{Key: migrations.FieldWrittenAt, Value: bson.NewDateTimeFromTime(writtenAt)},
		{Key: FieldRollup, Value: true},
	}}}
}

// DocError says why a document is not a valid parent document.
type DocError struct {
	// Field is the dotted path of the offending field ("" for the document itself).
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *DocError) Error() string {
	if e.Field == "" {
		return "parent document: " + e.Reason
	}
	return "parent document: " + e.Field + ": " + e.Reason
}

// ParentFromDoc decodes a parent or root document of the counts collection, as written by
// Update. It is strict: every field must be present with its type (strings, a DateTime
// timestamp, int64 or int32 numbers, rollup: true); _id and written_at are ignored; any other
// field, or a child with a missing or extra field, is an error (*DocError) naming the field.
// A leaf document is therefore rejected.
func ParentFromDoc(doc bson.Raw) (Parent, error) {
	elems, err := doc.Elements()
	if err != nil {
		return Parent{}, &DocError{Reason: fmt.Sprintf("invalid BSON: %v", err)}
	}
	var p Parent
	seen := make(map[string]bool, len(elems))
	for _, e := range elems {
		key, v := e.Key(), e.Value()
		if seen[key] {
			return Parent{}, &DocError{Field: key, Reason: "duplicate field"}
		}
		seen[key] = true
		switch key {
		case fieldMongoID:
		case migrations.FieldWrittenAt:
			if v.Type != bson.TypeDateTime {
				return Parent{}, typeError(key, v, "date")
			}
		case migrations.FieldID:
			p.ID, err = stringField(key, v)
		case migrations.FieldType:
			p.Type, err = stringField(key, v)
		case migrations.FieldProject:
			p.Project, err = stringField(key, v)
		case migrations.FieldTimestamp:
			ms, ok := v.DateTimeOK()
			if !ok {
				return Parent{}, typeError(key, v, "date")
			}
			p.Timestamp = time.UnixMilli(ms).UTC()
		case migrations.FieldOnline:
			p.Online, err = intField(key, v)
		case migrations.FieldVersion:
			p.Rev, err = intField(key, v)
		case FieldReported:
			p.Reported, err = intField(key, v)
		case FieldExpected:
			p.Expected, err = intField(key, v)
		case FieldTreeVersion:
			var n int64
			n, err = intField(key, v)
			if err == nil && (n < 0 || n > math.MaxInt32) {
				err = &DocError{Field: key, Reason: fmt.Sprintf("out of range: %d", n)}
			}
			p.TreeVersion = int(n)
		case FieldRollup:
			if b, ok := v.BooleanOK(); !ok || !b {
				return Parent{}, &DocError{Field: key, Reason: "must be true"}
			}
		case FieldChildren:
			p.Children, err = childrenField(v)
		case FieldTerm:
			// The fencing term of the watcher lease that wrote the document (package watcher);
			// it guards writes and is no part of the totals.
			_, err = intField(key, v)
		default:
			return Parent{}, &DocError{Field: key, Reason: "unknown field"}
		}
		if err != nil {
			return Parent{}, err
		}
	}
	for _, key := range [...]string{
		migrations.FieldID, migrations.FieldType, migrations.FieldTimestamp, migrations.FieldProject,
		migrations.FieldOnline, migrations.FieldVersion, FieldChildren, FieldReported, FieldExpected,
		FieldTreeVersion, FieldRollup,
	} {
		if !seen[key] {
			return Parent{}, &DocError{Field: key, Reason: "missing"}
		}
	}
	return p, nil
}

func childrenField(v bson.RawValue) (map[string]ChildState, error) {
	doc, ok := v.DocumentOK()
	if !ok {
		return nil, typeError(FieldChildren, v, "object")
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, &DocError{Field: FieldChildren, Reason: fmt.Sprintf("invalid BSON: %v", err)}
	}
	out := make(map[string]ChildState, len(elems))
	for _, e := range elems {
		id := e.Key()
		path := FieldChildren + "." + id
		if id == "" {
			return nil, &DocError{Field: path, Reason: "empty child id"}
		}
		if _, dup := out[id]; dup {
			return nil, &DocError{Field: path, Reason: "duplicate child"}
		}
		st, err := childField(path, e.Value())
		if err != nil {
			return nil, err
		}
		out[id] = st
	}
	return out, nil
}

func childField(path string, v bson.RawValue) (ChildState, error) {
	doc, ok := v.DocumentOK()
	if !ok {
		return ChildState{}, typeError(path, v, "object")
	}
	elems, err := doc.Elements()
	if err != nil {
		return ChildState{}, &DocError{Field: path, Reason: fmt.Sprintf("invalid BSON: %v", err)}
	}
	var st ChildState
	var seen [5]bool
	for _, e := range elems {
		key, v := e.Key(), e.Value()
		f := path + "." + key
		var i int
		switch key {
		case migrations.FieldType:
			i = 0
			st.Type, err = stringField(f, v)
		case migrations.FieldOnline:
			i = 1
			st.Online, err = intField(f, v)
		case migrations.FieldVersion:
			i = 2
			st.Version, err = intField(f, v)
		case FieldReported:
			i = 3
			st.Reported, err = intField(f, v)
		case FieldExpected:
			i = 4
			st.Expected, err = intField(f, v)
		default:
			return ChildState{}, &DocError{Field: f, Reason: "unknown field"}
		}
		if err != nil {
			return ChildState{}, err
		}
		if seen[i] {
			return ChildState{}, &DocError{Field: f, Reason: "duplicate field"}
		}
		seen[i] = true
	}
	for i, key := range [...]string{migrations.FieldType, migrations.FieldOnline, migrations.FieldVersion, FieldReported, FieldExpected} {
		if !seen[i] {
			return ChildState{}, &DocError{Field: path + "." + key, Reason: "missing"}
		}
	}
	return st, nil
}

func stringField(key string, v bson.RawValue) (string, error) {
	s, ok := v.StringValueOK()
	if !ok {
		return "", typeError(key, v, "string")
	}
	return s, nil
}

func intField(key string, v bson.RawValue) (int64, error) {
	switch v.Type {
	case bson.TypeInt64:
		return v.Int64(), nil
	case bson.TypeInt32:
		return int64(v.Int32()), nil
	default:
		return 0, typeError(key, v, "long")
	}
}

func typeError(key string, v bson.RawValue, want string) error {
	return &DocError{Field: key, Reason: fmt.Sprintf("has type %s, want %s", typeName(v.Type), want)}
}

// typeName is the $type alias of t, as MongoDB names it in messages.
func typeName(t bson.Type) string {
	switch t {
	case bson.TypeDouble:
		return "double"
	case bson.TypeString:
		return "string"
	case bson.TypeEmbeddedDocument:
		return "object"
	case bson.TypeArray:
		return "array"
	case bson.TypeBinary:
		return "binData"
	case bson.TypeObjectID:
		return "objectId"
	case bson.TypeBoolean:
		return "bool"
	case bson.TypeDateTime:
		return "date"
	case bson.TypeNull:
		return "null"
	case bson.TypeInt32:
		return "int"
	case bson.TypeTimestamp:
		return "timestamp"
	case bson.TypeInt64:
		return "long"
	case bson.TypeDecimal128:
		return "decimal"
	default:
		return fmt.Sprintf("BSON type 0x%02x", byte(t))
	}
}
