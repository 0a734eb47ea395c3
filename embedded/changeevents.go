package embedded

import (
	"bytes"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

// Change events: how an oplog entry appears in a change stream, with MongoDB 7.0's fields in
// its order: _id, operationType, clusterTime, collectionUUID (expanded), wallTime,
// fullDocument, ns, to (rename), documentKey, operationDescription (expanded),
// updateDescription, stateBeforeChange (modify), fullDocumentBeforeChange.

// knownStages are MongoDB 7.0's aggregation stage names. A change stream pipeline accepts a
// few of them; another known one is IllegalOperation, an unknown name 40324, as in mongod.
var knownStages = map[string]bool{
	"$addFields": true, "$bucket": true, "$bucketAuto": true, "$changeStream": true,
	"$changeStreamSplitLargeEvent": true, "$collStats": true, "$count": true, "$currentOp": true,
	"$densify": true, "$documents": true, "$facet": true, "$fill": true, "$geoNear": true,
	"$graphLookup": true, "$group": true, "$indexStats": true, "$limit": true,
	"$listLocalSessions": true, "$listSampledQueries": true, "$listSearchIndexes": true,
	"$listSessions": true, "$lookup": true, "$match": true, "$merge": true, "$out": true,
	"$planCacheStats": true, "$project": true, "$redact": true, "$replaceRoot": true,
	"$replaceWith": true, "$sample": true, "$search": true, "$searchMeta": true, "$set": true,
	"$setWindowFields": true, "$shardedDataDistribution": true, "$skip": true, "$sort": true,
	"$sortByCount": true, "$unionWith": true, "$unset": true, "$unwind": true, "$vectorSearch": true,
}

// checkStreamStage refuses a stage a change stream pipeline may not hold after $changeStream.
func checkStreamStage(st bson.D) error {
	if len(st) != 1 {
		return mongoerr.New(40323, "A pipeline stage specification object must contain exactly one field.")
	}
	name := st[0].Key
	switch {
	case !knownStages[name]:
		return mongoerr.New(40324, "Unrecognized pipeline stage name: '%s'", name)
	case name == "$changeStream":
		return mongoerr.New(40602, "$changeStream is only valid as the first stage in a pipeline.")
	}
	switch name {
	case "$match", "$project", "$addFields", "$set", "$unset", "$replaceRoot", "$replaceWith", "$redact":
		return nil
	case "$changeStreamSplitLargeEvent":
		return mongoerr.NotImplementedf("change stream stage $changeStreamSplitLargeEvent")
	}
	return mongoerr.New(mongoerr.IllegalOperation, "%s is not permitted in a $changeStream pipeline", name)
}

func invalidateEvent(e *storage.Entry) bson.D {
	return bson.D{
		{Key: "_id", Value: encodeToken(e.TS, tokenInvalidate)},
		{Key: "operationType", Value: "invalidate"},
		{Key: "clusterTime", Value: e.TS},
		{Key: "wallTime", Value: bson.NewDateTimeFromTime(e.Wall)},
	}
}

// expandedOnly are the event types a stream shows only with showExpandedEvents.
func expandedOnly(op string) bool {
	switch op {
	case storage.OpCreate, storage.OpCreateIndexes, storage.OpDropIndexes, storage.OpCollMod:
		return true
	}
	return false
}

// eventFor renders an oplog entry as a change event; ok is false for entries that are not
// events of this stream. It fails when the stream requires a pre- or post-image the entry
// does not have.
func (s *Server) eventFor(cs *changeStream, e *storage.Entry) (ev bson.D, ok bool, err error) {
	switch e.Op {
	case storage.OpInsert, storage.OpUpdate, storage.OpReplace, storage.OpDelete,
		storage.OpDrop, storage.OpDropDatabase, storage.OpRename:
	default:
		if !cs.expanded || !expandedOnly(e.Op) {
			return nil, false, nil
		}
	}
	// One allocation for the fields an event can have: 8 classic ones, 3 expanded ones and
	// fullDocumentBeforeChange.
	size := 8
	if cs.expanded {
		size += 3
	}
	if cs.beforeChange != "" {
		size++
	}
	ev = append(make(bson.D, 0, size),
		bson.E{Key: "_id", Value: encodeToken(e.TS, tokenEvent)},
		bson.E{Key: "operationType", Value: operationType(e.Op)},
		bson.E{Key: "clusterTime", Value: e.TS},
	)
	if cs.expanded && e.Op != storage.OpDropDatabase {
		ev = append(ev, bson.E{Key: "collectionUUID", Value: e.UUID})
	}
	ev = append(ev, bson.E{Key: "wallTime", Value: bson.NewDateTimeFromTime(e.Wall)})
	if full, has, err := s.fullDocument(cs, e); err != nil {
		return nil, false, err
	} else if has {
		ev = append(ev, bson.E{Key: "fullDocument", Value: full})
	}
	if e.Op == storage.OpDropDatabase {
		ev = append(ev, bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: e.DB}}})
	} else {
		ev = append(ev, bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: e.DB}, {Key: "coll", Value: e.Coll}}})
	}
	switch e.Op {
	case storage.OpInsert, storage.OpUpdate, storage.OpReplace, storage.OpDelete:
		ev = append(ev, bson.E{Key: "documentKey", Value: e.DocKey})
	case storage.OpRename:
		ev = append(ev, bson.E{Key: "to", Value: nsDoc(e.Rename.To)})
	}
	if cs.expanded {
		if desc := operationDescription(e); desc != nil {
			ev = append(ev, bson.E{Key: "operationDescription", Value: desc})
		}
	}
	if e.Op == storage.OpUpdate {
		ev = append(ev, bson.E{Key: "updateDescription", Value: updateDescription(e, cs.expanded)})
	}
	if e.Op == storage.OpCollMod && e.Options != nil {
		old := append(bson.D{{Key: "uuid", Value: e.UUID}}, optionsDoc(e.Options.Old)...)
		ev = append(ev, bson.E{Key: "stateBeforeChange", Value: bson.D{{Key: "collectionOptions", Value: old}}})
	}
	if cs.beforeChange != "" {
		switch e.Op {
		case storage.OpUpdate, storage.OpReplace, storage.OpDelete:
			if e.Pre == nil && cs.beforeChange == "required" {
				return nil, false, mongoerr.New(mongoerr.NoMatchingDocument,
					"Change stream was configured to require a pre-image for all update, delete and replace events, but the pre-image was not found for event: %s", bsonval.Format(ev))
			}
			var pre any
			if e.Pre != nil {
				pre = e.Pre
			}
			ev = append(ev, bson.E{Key: "fullDocumentBeforeChange", Value: pre})
		}
	}
	return ev, true, nil
}

// operationType names an oplog operation as change events do.
func operationType(op string) string {
	switch op {
	case storage.OpCollMod:
		return "modify"
	}
	return op
}

// fullDocument returns an event's fullDocument field, if it has one: the document of an
// insert or replace; for an update, the current document (updateLookup) or the post-image,
// which exists only when the collection had changeStreamPreAndPostImages enabled at the
// time of the write (whenAvailable: null without it; required: an error).
func (s *Server) fullDocument(cs *changeStream, e *storage.Entry) (any, bool, error) {
	switch e.Op {
	case storage.OpInsert, storage.OpReplace:
		return e.Doc, true, nil
	case storage.OpUpdate:
	default:
		return nil, false, nil
	}
	switch cs.fullDocument {
	case "updateLookup":
		var cur any
		s.engine.Read(func(rd *storage.Reader) {
			d, ok := rd.Get(e.DB, e.Coll, e.DocKey[0].Value)
			switch {
			case !ok:
			case e.Doc != nil && bytes.Equal(d.Raw, e.DocRaw()):
				// The document is still the one this update wrote (the common case: the
				// stream follows the writes closely): its post-image, already decoded, is it.
				cur = e.Doc
			default:
				cur = d.D()
			}
		})
		return cur, true, nil
	case "whenAvailable", "required":
		if e.Pre != nil {
			return e.Doc, true, nil
		}
		if cs.fullDocument == "required" {
			return nil, false, mongoerr.New(mongoerr.NoMatchingDocument,
				"Change stream was configured to require a post-image for all update events, but the post-image was not found for event: %s.%s %s at %v",
				e.DB, e.Coll, bsonval.Format(e.DocKey), e.TS)
		}
		return nil, true, nil
	}
	return nil, false, nil
}

func nsDoc(ns storage.Namespace) bson.D {
	return bson.D{{Key: "db", Value: ns.DB}, {Key: "coll", Value: ns.Coll}}
}

// indexDescription is an index as create/dropIndexes events describe it.
func indexDescription(spec *storage.IndexSpec) bson.D {
	d := bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: spec.Key}, {Key: "name", Value: spec.Name}}
	if spec.Unique {
		d = append(d, bson.E{Key: "unique", Value: true})
	}
	return d
}

// operationDescription is an expanded event's description of a DDL operation.
func operationDescription(e *storage.Entry) bson.D {
	switch e.Op {
	case storage.OpCreate:
		var d bson.D
		if e.Options != nil {
			d = append(d, optionsDoc(e.Options.New)...)
		}
		return append(d, bson.E{Key: "idIndex", Value: bson.D{
			{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "name", Value: "_id_"},
		}})
	case storage.OpCreateIndexes, storage.OpDropIndexes:
		if e.Index == nil {
			return bson.D{}
		}
		return bson.D{{Key: "indexes", Value: bson.A{indexDescription(e.Index)}}}
	case storage.OpCollMod:
		if e.Options == nil {
			return bson.D{}
		}
		return bson.D{{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: e.Options.New.PreAndPostImages}}}}
	case storage.OpRename:
		d := bson.D{{Key: "to", Value: nsDoc(e.Rename.To)}}
		if e.Rename.DropTarget.Data != nil {
			d = append(d, bson.E{Key: "dropTarget", Value: e.Rename.DropTarget})
		}
		return d
	}
	return nil
}

// updateDescription renders an update's description; with showExpandedEvents it adds
// disambiguatedPaths, which spells out each changed path holding a numeric field name (one
// that reads like an array index) or a field name with a dot, array indices as integers.
func updateDescription(e *storage.Entry, expanded bool) bson.D {
	updated, removed, truncated := bson.D{}, bson.A{}, bson.A{}
	var dotted bson.D
	if e.Update != nil {
		if e.Update.UpdatedFields != nil {
			updated = e.Update.UpdatedFields
		}
		for _, f := range e.Update.RemovedFields {
			removed = append(removed, f)
		}
		for _, ta := range e.Update.TruncatedArrays {
			truncated = append(truncated, bson.D{{Key: "field", Value: ta.Field}, {Key: "newSize", Value: ta.NewSize}})
		}
		dotted = e.Update.DottedPaths
	}
	desc := bson.D{{Key: "updatedFields", Value: updated}, {Key: "removedFields", Value: removed}, {Key: "truncatedArrays", Value: truncated}}
	if !expanded {
		return desc
	}
	paths := bson.D{}
	add := func(path string) {
		if parts, ok := bsonval.Get(dotted, path); ok {
			paths = append(paths, bson.E{Key: path, Value: parts})
			return
		}
		if parts, ambiguous := disambiguate(e.Doc, path); ambiguous {
			paths = append(paths, bson.E{Key: path, Value: parts})
		}
	}
	for _, f := range updated {
		add(f.Key)
	}
	for _, f := range removed {
		add(f.(string))
	}
	if e.Update != nil {
		for _, ta := range e.Update.TruncatedArrays {
			add(ta.Field)
		}
	}
	return append(desc, bson.E{Key: "disambiguatedPaths", Value: paths})
}

// disambiguate splits a dotted path of doc into its components, array indices as int32
// (found by walking doc), and reports whether the path is ambiguous: a component after the
// first that is a field name made of digits, as mongod's change stream diff parser decides.
func disambiguate(doc bson.D, path string) (bson.A, bool) {
	parts := strings.Split(path, ".")
	out := make(bson.A, len(parts))
	ambiguous := false
	var cur any = doc
	for i, p := range parts {
		if arr, ok := cur.(bson.A); ok {
			if n, err := strconv.Atoi(p); err == nil && n >= 0 && isStrictNumeric(p) {
				out[i] = int32(n)
				cur = nil
				if n < len(arr) {
					cur = arr[n]
				}
				continue
			}
		}
		out[i] = p
		if i > 0 && isStrictNumeric(p) {
			ambiguous = true
		}
		if d, ok := cur.(bson.D); ok {
			cur, _ = bsonval.Get(d, p)
		} else {
			cur = nil
		}
	}
	return out, ambiguous
}

// isStrictNumeric reports a path component made only of digits, without a leading zero
// unless it is "0" (mongod's FieldRef::isNumericPathComponentStrict).
func isStrictNumeric(p string) bool {
	if p == "" || (len(p) > 1 && p[0] == '0') {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	return true
}
