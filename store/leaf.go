package store

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Leaf is a leaf document of the counts collection: one node's count at one tick.
type Leaf struct {
	Project string
	ID      string
	Type    string
	Tick    time.Time
	Online  int64
	// Version is the agent's observation time in unix nanoseconds: a newer one wins.
	Version int64
}

const docLeaf = "leaf"

// DecodeLeaf reads a leaf document. It needs non-empty string project, id and type, a
// DateTime timestamp and counts (see Count) online and version; other fields are ignored. A
// document that lacks one, carries one with another type, or is a parent (rollup: true) is
// an *InvalidDocError naming the field: such documents are skipped and counted, never guessed
// at.
func DecodeLeaf(doc bson.Raw) (Leaf, error) {
	var l Leaf
	str := func(name string, dst *string) error {
		v, err := doc.LookupErr(name)
		if err != nil {
			return &InvalidDocError{Doc: docLeaf, Field: name, Reason: "missing"}
		}
		s, ok := v.StringValueOK()
		if !ok {
			return typeError(docLeaf, name, v, "a non-empty string")
		}
		if s == "" {
			return &InvalidDocError{Doc: docLeaf, Field: name, Reason: "empty"}
		}
		*dst = s
		return nil
	}
	num := func(name string, dst *int64) error {
		v, err := doc.LookupErr(name)
		if err != nil {
			return &InvalidDocError{Doc: docLeaf, Field: name, Reason: "missing"}
		}
		*dst, err = countField(docLeaf, name, v)
		return err
	}
	if IsParent(doc) {
		return Leaf{}, &InvalidDocError{Doc: docLeaf, Field: FieldRollup, Reason: "a parent document (rollup: true)"}
	}
	for _, err := range []error{
		str(FieldProject, &l.Project),
		str(FieldID, &l.ID),
		str(FieldType, &l.Type),
		num(FieldOnline, &l.Online),
		num(FieldVersion, &l.Version),
	} {
		if err != nil {
			return Leaf{}, err
		}
	}
	v, err := doc.LookupErr(FieldTimestamp)
	if err != nil {
		return Leaf{}, &InvalidDocError{Doc: docLeaf, Field: FieldTimestamp, Reason: "missing"}
	}
	if l.Tick, err = timeField(docLeaf, FieldTimestamp, v); err != nil {
		return Leaf{}, err
	}
	return l, nil
}

// IsParent reports whether a counts document is a parent or root document (rollup: true).
func IsParent(doc bson.Raw) bool {
	b, ok := doc.Lookup(FieldRollup).BooleanOK()
	return ok && b
}

// LeafWrite is one leaf value an agent submitted, as ingest stores it.
type LeafWrite struct {
	ID, Type string
	Tick     time.Time
	Project  string
	Online   int64
	// Version is the observation time in unix nanoseconds.
	Version      int64
	SubmissionID string
}

// AppendLeafUpsert appends to buf the filter and the update of the guarded upsert that stores
// w, and returns both (views into the returned buffer) with it. The filter is exactly the key
// plus the project, version < w.Version and "not a parent": re-sending it is idempotent, an
// older or equal observation never overwrites a newer one, and a leaf never overwrites another
// project's document or a parent (the upsert then fails on the unique index). The update is an
// absolute $set of online, version, project, submission_id and written_at, never $inc.
//
// The documents are encoded straight into buf, not as bson.D for the driver to encode by
// reflection: ingest writes millions of them. The bytes equal those of LeafFilter and
// LeafUpdate.
func AppendLeafUpsert(buf []byte, w LeafWrite, writtenAt time.Time) (filter, update bson.Raw, _ []byte) {
	start := len(buf)
	buf = appendLeafFilter(buf, w)
	mid := len(buf)
	buf = appendLeafUpdate(buf, w, writtenAt)
	// Full slice expressions: a later append to buf must never write into these documents.
	return bson.Raw(buf[start:mid:mid]), bson.Raw(buf[mid:len(buf):len(buf)]), buf
}

func appendLeafFilter(buf []byte, w LeafWrite) []byte {
	idx, buf := bsoncore.AppendDocumentStart(buf)
	buf = bsoncore.AppendStringElement(buf, FieldID, w.ID)
	buf = bsoncore.AppendStringElement(buf, FieldType, w.Type)
	buf = bsoncore.AppendDateTimeElement(buf, FieldTimestamp, w.Tick.UnixMilli())
	buf = bsoncore.AppendStringElement(buf, FieldProject, w.Project)
	var sub int32
	sub, buf = bsoncore.AppendDocumentElementStart(buf, FieldVersion)
	buf = bsoncore.AppendInt64Element(buf, "$lt", w.Version)
	buf, _ = bsoncore.AppendDocumentEnd(buf, sub)
	sub, buf = bsoncore.AppendDocumentElementStart(buf, FieldRollup)
	buf = bsoncore.AppendBooleanElement(buf, "$ne", true)
	buf, _ = bsoncore.AppendDocumentEnd(buf, sub)
	buf, _ = bsoncore.AppendDocumentEnd(buf, idx)
	return buf
}

func appendLeafUpdate(buf []byte, w LeafWrite, writtenAt time.Time) []byte {
	idx, buf := bsoncore.AppendDocumentStart(buf)
	var set int32
	set, buf = bsoncore.AppendDocumentElementStart(buf, "$set")
	buf = bsoncore.AppendInt64Element(buf, FieldOnline, w.Online)
	buf = bsoncore.AppendInt64Element(buf, FieldVersion, w.Version)
	buf = bsoncore.AppendStringElement(buf, FieldProject, w.Project)
	buf = bsoncore.AppendStringElement(buf, FieldSubmissionID, w.SubmissionID)
	buf = bsoncore.AppendDateTimeElement(buf, FieldWrittenAt, writtenAt.UnixMilli())
	buf, _ = bsoncore.AppendDocumentEnd(buf, set)
	buf, _ = bsoncore.AppendDocumentEnd(buf, idx)
	return buf
}

// LeafFilter is the filter of AppendLeafUpsert as a bson.D (the readable form; tests compare
// the two encodings).
func LeafFilter(w LeafWrite) bson.D {
	return bson.D{
		{Key: FieldID, Value: w.ID},
		{Key: FieldType, Value: w.Type},
		{Key: FieldTimestamp, Value: bson.NewDateTimeFromTime(w.Tick)},
		{Key: FieldProject, Value: w.Project},
		{Key: FieldVersion, Value: bson.D{{Key: "$lt", Value: w.Version}}},
		{Key: FieldRollup, Value: bson.D{{Key: "$ne", Value: true}}},
	}
}

// LeafUpdate is the update of AppendLeafUpsert as a bson.D.
func LeafUpdate(w LeafWrite, writtenAt time.Time) bson.D {
	return bson.D{{Key: "$set", Value: bson.D{
		{Key: FieldOnline, Value: w.Online},
		{Key: FieldVersion, Value: w.Version},
		{Key: FieldProject, Value: w.Project},
		{Key: FieldSubmissionID, Value: w.SubmissionID},
		{Key: FieldWrittenAt, Value: bson.NewDateTimeFromTime(writtenAt)},
	}}}
}

// Key is the unique key of a counts document: (id, type, timestamp).
type Key struct {
	ID   string
	Type string
	Tick time.Time
}

// KeyOf returns the unique key of a counts document; ok is false when a key field is missing
// or has another type.
func KeyOf(doc bson.Raw) (Key, bool) {
	id, ok1 := doc.Lookup(FieldID).StringValueOK()
	typ, ok2 := doc.Lookup(FieldType).StringValueOK()
	ms, ok3 := doc.Lookup(FieldTimestamp).DateTimeOK()
	return Key{id, typ, time.UnixMilli(ms).UTC()}, ok1 && ok2 && ok3
}

// KeyFilter is the equality filter on a key (the unique index's fields).
func KeyFilter(k Key) bson.D {
	return bson.D{{Key: FieldID, Value: k.ID}, {Key: FieldType, Value: k.Type}, {Key: FieldTimestamp, Value: k.Tick}}
}
