package embedded

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/query"
	"github.com/gameops/rollup/embedded/storage"
)

// A change stream decodes every oplog entry of its namespace into an event and runs its
// stages on it, even the events its first $match drops. When that $match reads only
// operationType, ns and top-level fields of fullDocument (rollup's watcher drops its own
// parent writes with fullDocument.rollup), a probe runs the match first on an event of just
// those fields, read from the entry's encoding; an event the probe drops is skipped without
// decoding its document or its update description. An event the probe keeps is built and
// filtered as always, so the probe never changes what a stream shows: it is a cheaper
// evaluation of the same filter on the same values. When every stage of the stream is such a
// $match and the event is built raw (changeraw.go), each stage's probe decides the stage and
// the event is not filtered again.

// streamProbe is a change stream's pre-filter of insert, update, replace and delete events.
type streamProbe struct {
	filter *query.Filter
	fields []string // top-level fields of fullDocument the filter reads
	lookup bool     // updates carry the current document (fullDocument: updateLookup)

	// Scratch of match (a stream's batches run one at a time): the event and its ns value,
	// kept while the namespace stays the same.
	ev           bson.D
	ns           any
	nsDB, nsColl string
}

// newStreamProbe returns the probe of a stream whose first stage after $changeStream is
// stage, or nil when it cannot have one: the stage is not a $match, the filter reads other
// fields (or whole documents), uses $expr or another top-level operator, or the stream's
// fullDocument option shows post-images (whenAvailable, required).
func newStreamProbe(stage bson.D, fullDocument string) *streamProbe {
	if len(stage) != 1 || stage[0].Key != "$match" {
		return nil
	}
	switch fullDocument {
	case "", "default", "updateLookup":
	default:
		return nil
	}
	spec, ok := stage[0].Value.(bson.D)
	if !ok {
		return nil
	}
	paths, ok := filterPaths(spec, nil)
	if !ok {
		return nil
	}
	p := &streamProbe{lookup: fullDocument == "updateLookup"}
	seen := map[string]bool{}
	for _, path := range paths {
		first, rest, _ := strings.Cut(path, ".")
		switch {
		case path == "operationType", first == "ns":
		case first == "fullDocument" && rest != "":
			f, _, _ := strings.Cut(rest, ".")
			if !seen[f] {
				seen[f] = true
				p.fields = append(p.fields, f)
			}
		default:
			return nil
		}
	}
	f, err := query.CompileFilter(spec)
	if err != nil {
		return nil
	}
	p.filter = f
	return p
}

// filterPaths appends the field paths a query filter reads; ok is false for a filter whose
// reads cannot be listed so ($expr, $where, $text, a malformed logical operator...).
func filterPaths(f bson.D, paths []string) ([]string, bool) {
	for _, e := range f {
		switch e.Key {
		case "$and", "$or", "$nor":
			arr, ok := e.Value.(bson.A)
			if !ok {
				return nil, false
			}
			for _, x := range arr {
				d, ok := x.(bson.D)
				if !ok {
					return nil, false
				}
				if paths, ok = filterPaths(d, paths); !ok {
					return nil, false
				}
			}
		case "$comment":
		default:
			if strings.HasPrefix(e.Key, "$") {
				return nil, false
			}
			// Operators under a field ($elemMatch, $not...) read paths relative to it: its
			// top-level field covers them.
			paths = append(paths, e.Key)
		}
	}
	return paths, true
}

// probeEvent reports whether the stream may show the entry: false only for a document event
// of the stream's namespaces that its first $match drops.
func (s *Server) probeEvent(cs *changeStream, re storage.RawEntry) bool {
	op := re.Op()
	switch op {
	case storage.OpInsert, storage.OpUpdate, storage.OpReplace, storage.OpDelete:
	default:
		return true
	}
	db, coll := re.DB(), re.Coll()
	if !cs.nsInScope(db, coll) {
		return true // out of scope: the stream skips it anyway
	}
	// The fullDocument the event would carry (see fullDocument): the post-image of an insert
	// or a replace, the current document of an update with updateLookup (null when it is
	// gone), none otherwise.
	var src bson.Raw
	has := false
	switch op {
	case storage.OpInsert, storage.OpReplace:
		src, has = re.Doc(), true
	case storage.OpUpdate:
		if cs.probe.lookup {
			has = true
			post := re.Doc()
			if len(post) == 0 {
				return true
			}
			idv, err := bsoncore.Document(post).IndexErr(0)
			if err != nil {
				return true
			}
			if src, err = s.lookup(db, coll, idv.Value()); err != nil {
				return true
			}
		}
	}
	keep, sure := cs.probe.match(op, db, coll, src, has)
	return keep || !sure
}

// lookup returns the encoding of the stored document of db.coll with the _id id (nil when
// there is none). Stored encodings are never modified, so it stays valid after the read.
func (s *Server) lookup(db, coll string, id bsoncore.Value) (bson.Raw, error) {
	x, err := bsonval.DecodeValue(id)
	if err != nil {
		return nil, err
	}
	var src bson.Raw
	s.engine.Read(func(rd *storage.Reader) {
		if d, ok := rd.Get(db, coll, x); ok {
			src = d.Raw
		}
	})
	return src, nil
}

// match runs the probe's filter on the event of operation op on db.coll of those fields: its
// fullDocument is src's (has: the event has one; a nil src is null, the document is gone).
// sure is false when the evaluation failed: the full event's evaluation reports it.
func (p *streamProbe) match(op, db, coll string, src bson.Raw, has bool) (keep, sure bool) {
	if p.nsDB != db || p.nsColl != coll || p.ns == nil {
		p.nsDB, p.nsColl = db, coll
		p.ns = bson.D{{Key: "db", Value: db}, {Key: "coll", Value: coll}}
	}
	ev := append(p.ev[:0],
		bson.E{Key: "operationType", Value: operationTypeValue(op)},
		bson.E{Key: "ns", Value: p.ns},
	)
	if has {
		var doc any // null: the document is gone
		if src != nil {
			fields := make(bson.D, 0, len(p.fields))
			for _, f := range p.fields {
				v, err := bsoncore.Document(src).LookupErr(f)
				if err != nil {
					continue
				}
				x, err := bsonval.DecodeValue(v)
				if err != nil {
					return false, false
				}
				fields = append(fields, bson.E{Key: f, Value: x})
			}
			doc = fields
		}
		ev = append(ev, bson.E{Key: "fullDocument", Value: doc})
	}
	p.ev = ev
	ok, err := p.filter.Match(ev)
	if err != nil {
		return false, false
	}
	return ok, true
}

// operationTypeValue is operationType(op) as a value of a decoded event, without an
// allocation for the document operations.
func operationTypeValue(op string) any {
	switch op {
	case storage.OpInsert:
		return storage.OpInsert
	case storage.OpUpdate:
		return storage.OpUpdate
	case storage.OpReplace:
		return storage.OpReplace
	case storage.OpDelete:
		return storage.OpDelete
	}
	return operationType(op)
}
