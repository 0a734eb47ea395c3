package store

import (
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Node is what a reader of totals needs of a counts document, leaf or parent: its key, its
// online total and how many leaves under it reported of how many the tree expects. A leaf
// reports itself: 1 of 1.
type Node struct {
	ID, Type string
	// Project is the document's project.
	Project  string
	Tick     time.Time
	Online   int64
	Reported int64
	Expected int64
	// Parent is set on parent and root documents.
	Parent bool
}

// NodeProjection is the projection of the fields DecodeNode reads.
var NodeProjection = bson.D{
	{Key: fieldMongoID, Value: 0},
	{Key: FieldID, Value: 1},
	{Key: FieldType, Value: 1},
	{Key: FieldProject, Value: 1},
	{Key: FieldTimestamp, Value: 1},
	{Key: FieldOnline, Value: 1},
	{Key: FieldReported, Value: 1},
	{Key: FieldExpected, Value: 1},
	{Key: FieldRollup, Value: 1},
}

// DecodeNode reads a counts document (whole, or projected by NodeProjection) for its totals.
// It is lighter than DecodeParent (children are not read) but reads every number the same way
// (Count); a field of another type is an *InvalidDocError. Fields it does not use are
// ignored.
func DecodeNode(raw bson.Raw) (Node, error) {
	var d Node
	var hasRep, hasExp bool
	elems, err := raw.Elements()
	if err != nil {
		return d, &InvalidDocError{Doc: "counts", Reason: fmt.Sprintf("invalid BSON: %v", err)}
	}
	const kind = docLeaf // corrected below for a parent's error
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case FieldID:
			d.ID, err = stringField(kind, FieldID, v)
		case FieldType:
			d.Type, err = stringField(kind, FieldType, v)
		case FieldProject:
			d.Project, err = stringField(kind, FieldProject, v)
		case FieldTimestamp:
			d.Tick, err = timeField(kind, FieldTimestamp, v)
		case FieldOnline:
			d.Online, err = countField(kind, FieldOnline, v)
		case FieldReported:
			d.Reported, err = countField(kind, FieldReported, v)
			hasRep = true
		case FieldExpected:
			d.Expected, err = countField(kind, FieldExpected, v)
			hasExp = true
		case FieldRollup:
			var ok bool
			if d.Parent, ok = v.BooleanOK(); !ok {
				err = typeError(kind, FieldRollup, v, "bool")
			}
		}
		if err != nil {
			var ie *InvalidDocError
			if errors.As(err, &ie) && IsParent(raw) {
				ie.Doc = docParent
			}
			return d, err
		}
	}
	if !hasRep || !hasExp {
		d.Reported, d.Expected = 1, 1
	}
	return d, nil
}
