package embedded

import (
	"encoding/binary"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/storage"
)

// Raw change events. The decoded path (eventFor, apply, then encoding) decodes every oplog
// entry, builds the event as a bson.D and encodes it again: most of a batch's cost on rollup's
// traffic, where every event is a leaf's insert or update. For the streams most clients open
// (no showExpandedEvents, no fullDocumentBeforeChange, fullDocument default or updateLookup,
// and no stages after $changeStream but $match stages a probe evaluates exactly, see
// changeprobe.go: rollup's watcher, with or without its projects: partition), the event of an
// insert, update, replace or delete is appended as BSON straight from the entry's encoding:
// the documents (post-image, current document, document key, updated fields) are copied as
// they are stored. Anything else, or an entry it cannot read, takes the decoded path, so both
// paths give the same bytes (TestRawChangeEventsMatchDecoded).

// rawEventsFor reports whether cs's document events can be built raw, and returns the probes
// that then decide its stages post (those after $changeStream): every stage must be a $match
// with a probe, whose verdict is the stage's (it reads the same values), but the last, which
// may be an inclusion $project the raw path applies (see rawProjection).
func rawEventsFor(cs *changeStream, post []bson.D) ([]*streamProbe, *rawProjection, bool) {
	if cs.expanded || cs.beforeChange != "" {
		return nil, nil, false
	}
	switch cs.fullDocument {
	case "default", "updateLookup":
	default:
		return nil, nil, false
	}
	var proj *rawProjection
	if n := len(post); n > 0 {
		if proj = newRawProjection(post[n-1]); proj != nil {
			post = post[:n-1]
		}
	}
	probes := make([]*streamProbe, 0, len(post))
	for i, st := range post {
		p := newStreamProbe(st, cs.fullDocument)
		if i == 0 && cs.probe != nil {
			p = cs.probe
		}
		if p == nil {
			return nil, nil, false
		}
		probes = append(probes, p)
	}
	return probes, proj, true
}

// rawEntry is what a document event is built from, read from the entry's encoding in one
// pass without decoding it. The byte slices point into the oplog.
type rawEntry struct {
	op       string // storage.OpInsert, OpUpdate, OpReplace or OpDelete
	db, coll []byte
	wall     int64
	hasWall  bool
	d, k, u  []byte // post-image, document key (entries without d), update description
}

// parseRawEntry reads an entry of a document operation; ok is false for another operation
// or an entry it cannot read (the decoded path handles both).
func parseRawEntry(raw []byte) (e rawEntry, ok bool) {
	valid := true
	err := bsonval.EachElement(raw, func(key []byte, v bsoncore.Value) bool {
		var ok bool
		switch {
		case string(key) == "op":
			var s []byte
			if s, ok = stringBytes(v); !ok {
				break
			}
			switch {
			case string(s) == storage.OpInsert:
				e.op = storage.OpInsert
			case string(s) == storage.OpUpdate:
				e.op = storage.OpUpdate
			case string(s) == storage.OpReplace:
				e.op = storage.OpReplace
			case string(s) == storage.OpDelete:
				e.op = storage.OpDelete
			default:
				ok = false
			}
		case string(key) == "db":
			e.db, ok = stringBytes(v)
		case string(key) == "c":
			e.coll, ok = stringBytes(v)
		case string(key) == "w":
			e.wall, ok = v.DateTimeOK()
			e.hasWall = ok
		case string(key) == "d", string(key) == "k", string(key) == "u":
			var d bsoncore.Document
			if d, ok = v.DocumentOK(); !ok {
				break
			}
			switch key[0] {
			case 'd':
				e.d = d
			case 'k':
				e.k = d
			default:
				e.u = d
			}
		default:
			ok = true
		}
		valid = ok
		return ok
	})
	if err != nil || !valid {
		return e, false
	}
	return e, e.op != "" && len(e.db) > 0 && e.hasWall
}

// stringBytes returns a BSON string's bytes (without the terminating NUL), not copied.
func stringBytes(v bsoncore.Value) ([]byte, bool) {
	if v.Type != bsoncore.TypeString || len(v.Data) < 5 {
		return nil, false
	}
	n := int(int32(binary.LittleEndian.Uint32(v.Data)))
	if n < 1 || n > len(v.Data)-4 || v.Data[4+n-1] != 0 {
		return nil, false
	}
	return v.Data[4 : 4+n-1], true
}

// firstElement returns the encoding of a document's first element and its value.
func firstElement(doc []byte) ([]byte, bsoncore.Value, bool) {
	if len(doc) < 7 {
		return nil, bsoncore.Value{}, false
	}
	t := bsoncore.Type(doc[4])
	_, rest, ok := bsoncore.ReadKeyBytes(doc[5:])
	if !ok {
		return nil, bsoncore.Value{}, false
	}
	v, rest, ok := bsoncore.ReadValue(rest, t)
	if !ok {
		return nil, bsoncore.Value{}, false
	}
	return doc[4 : len(doc)-len(rest)], v, true
}

// rawOutcome is what the raw path made of an entry.
type rawOutcome int

const (
	rawFallback rawOutcome = iota // build it on the decoded path
	rawSkipped                    // not an event of this stream
	rawFiltered                   // an event the stream's $match drops
	rawShown                      // an event, appended
)

// rawDocEvent appends the event of a document operation's entry to dst, for a stream whose
// document events are built raw (cs.raw), and reports what it did; on rawShown the event is
// dst[len(dst):] of the returned slice. The stages are decided by the stream's probes.
func (s *Server) rawDocEvent(dst []byte, cs *changeStream, re storage.RawEntry) ([]byte, rawOutcome) {
	e, ok := parseRawEntry(re.Bytes())
	if !ok {
		return dst, rawFallback
	}
	var db, coll string
	if cs.scope == scopeCollection {
		if string(e.db) != cs.db || string(e.coll) != cs.coll || !cs.nsInScope(cs.db, cs.coll) {
			return dst, rawSkipped
		}
		db, coll = cs.db, cs.coll
	} else {
		db, coll = string(e.db), string(e.coll)
		if !cs.nsInScope(db, coll) {
			return dst, rawSkipped
		}
	}
	// The document key: the entry's, else the post-image's first field (_id), as decoding
	// the entry sets it.
	var keyElem []byte
	var id bsoncore.Value
	switch {
	case e.k != nil:
		if _, id, ok = firstElement(e.k); !ok {
			return dst, rawFallback
		}
	case e.d != nil:
		if keyElem, id, ok = firstElement(e.d); !ok {
			return dst, rawFallback
		}
	default:
		return dst, rawFallback
	}
	// fullDocument, as fullDocument renders it.
	var full bson.Raw
	hasFull := false
	switch e.op {
	case storage.OpInsert, storage.OpReplace:
		if e.d == nil {
			return dst, rawFallback
		}
		full, hasFull = e.d, true
	case storage.OpUpdate:
		if cs.fullDocument == "updateLookup" {
			var err error
			if full, err = s.lookup(db, coll, id); err != nil {
				return dst, rawFallback
			}
			hasFull = true
		}
	}
	for _, p := range cs.rawProbes {
		keep, sure := p.match(e.op, db, coll, full, hasFull)
		switch {
		case !sure:
			return dst, rawFallback
		case !keep:
			return dst, rawFiltered
		}
	}
	// The event's fields in their order, those the projection (nil: none) keeps.
	proj := cs.rawProject
	start := len(dst)
	idx, dst := bsoncore.ReserveLength(dst)
	dst = appendTokenElement(dst, "_id", re.TS, tokenEvent)
	if proj.keeps("operationType") {
		dst = bsoncore.AppendStringElement(dst, "operationType", e.op)
	}
	if proj.keeps("clusterTime") {
		dst = bsoncore.AppendTimestampElement(dst, "clusterTime", re.TS.T, re.TS.I)
	}
	if proj.keeps("wallTime") {
		dst = bsoncore.AppendDateTimeElement(dst, "wallTime", e.wall)
	}
	if hasFull {
		if dst, ok = proj.appendFullDocument(dst, full); !ok {
			return dst[:start], rawFallback
		}
	}
	if proj.keeps("ns") {
		dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, "ns")
		nidx, d2 := bsoncore.ReserveLength(dst)
		d2 = appendStringBytesElement(d2, "db", e.db)
		d2 = appendStringBytesElement(d2, "coll", e.coll)
		dst = endDocument(d2, nidx)
	}
	if proj.keeps("documentKey") {
		if e.k != nil {
			dst = bsoncore.AppendDocumentElement(dst, "documentKey", e.k)
		} else {
			dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, "documentKey")
			kidx, d2 := bsoncore.ReserveLength(dst)
			dst = endDocument(append(d2, keyElem...), kidx)
		}
	}
	if e.op == storage.OpUpdate && proj.keeps("updateDescription") {
		if dst, ok = appendRawUpdateDescription(dst, e.u); !ok {
			return dst[:start], rawFallback
		}
	}
	return endDocument(dst, idx), rawShown
}

// appendRawUpdateDescription appends an update event's updateDescription (see
// updateDescription, without showExpandedEvents) from the entry's encoded description u
// (nil: none): {uf, rf, ta} in the log form.
func appendRawUpdateDescription(dst, u []byte) ([]byte, bool) {
	var uf, rf, ta []byte
	if u != nil {
		doc := bsoncore.Document(u)
		if v, err := doc.LookupErr("uf"); err == nil {
			uf, _ = v.DocumentOK() // another type: none, as decoding it
		}
		if v, err := doc.LookupErr("rf"); err == nil {
			rf, _ = v.ArrayOK()
		}
		if v, err := doc.LookupErr("ta"); err == nil {
			ta, _ = v.ArrayOK()
		}
	}
	dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, "updateDescription")
	idx, dst := bsoncore.ReserveLength(dst)
	if uf != nil {
		dst = bsoncore.AppendDocumentElement(dst, "updatedFields", uf)
	} else {
		dst = bsoncore.AppendDocumentElement(dst, "updatedFields", emptyDoc)
	}
	var keyBuf [20]byte
	// removedFields: the names that are strings, renumbered.
	ridx, dst := bsoncore.AppendArrayElementStart(dst, "removedFields")
	if rf != nil {
		vals, err := bsoncore.Array(rf).Values()
		if err != nil {
			return dst, false
		}
		n := 0
		for _, v := range vals {
			if s, ok := stringBytes(v); ok {
				dst = appendStringBytesElement(dst, string(appendIndex(keyBuf[:0], n)), s)
				n++
			}
		}
	}
	dst, _ = bsoncore.AppendArrayEnd(dst, ridx)
	// truncatedArrays: {f, n} in the log, {field, newSize} in the event.
	tidx, dst := bsoncore.AppendArrayElementStart(dst, "truncatedArrays")
	if ta != nil {
		vals, err := bsoncore.Array(ta).Values()
		if err != nil {
			return dst, false
		}
		for i, v := range vals {
			var field []byte
			var size int32
			if d, ok := v.DocumentOK(); ok {
				if fv, err := bsoncore.Document(d).LookupErr("f"); err == nil {
					field, _ = stringBytes(fv)
				}
				if nv, err := bsoncore.Document(d).LookupErr("n"); err == nil {
					size, _ = nv.Int32OK()
				}
			}
			dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, string(appendIndex(keyBuf[:0], i)))
			eidx, d2 := bsoncore.ReserveLength(dst)
			d2 = appendStringBytesElement(d2, "field", field)
			d2 = bsoncore.AppendInt32Element(d2, "newSize", size)
			dst = endDocument(d2, eidx)
		}
	}
	dst, _ = bsoncore.AppendArrayEnd(dst, tidx)
	return endDocument(dst, idx), true
}

var emptyDoc = []byte{5, 0, 0, 0, 0}

// endDocument terminates the document whose length is reserved at idx.
func endDocument(dst []byte, idx int32) []byte {
	dst = append(dst, 0)
	return bsoncore.UpdateLength(dst, idx, int32(len(dst)-int(idx)))
}

// appendStringBytesElement appends a string element whose value is s.
func appendStringBytesElement(dst []byte, key string, s []byte) []byte {
	dst = bsoncore.AppendHeader(dst, bsoncore.TypeString, key)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)+1))
	dst = append(dst, s...)
	return append(dst, 0)
}

// appendIndex appends the decimal form of an array index.
func appendIndex(b []byte, n int) []byte {
	if n >= 10 {
		b = appendIndex(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

const upperHex = "0123456789ABCDEF"

// appendTokenElement appends the resume token encodeToken returns, {_data: hex}, as an
// element, without formatting it through fmt.
func appendTokenElement(dst []byte, key string, ts storage.OpTime, kind byte) []byte {
	dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, key)
	idx, dst := bsoncore.ReserveLength(dst)
	dst = bsoncore.AppendHeader(dst, bsoncore.TypeString, "_data")
	dst = binary.LittleEndian.AppendUint32(dst, 21)
	dst = append(dst, '8', '2')
	for _, x := range [2]uint32{ts.T, ts.I} {
		for shift := 28; shift >= 0; shift -= 4 {
			dst = append(dst, upperHex[x>>uint(shift)&15])
		}
	}
	dst = append(dst, upperHex[kind>>4], upperHex[kind&15], 0)
	return endDocument(dst, idx)
}
