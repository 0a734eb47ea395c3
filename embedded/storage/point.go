package storage

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// IndexSet is a collection's indexes as they were at one moment (Reader.IndexSet), for work
// done outside the engine's lock: planning a statement's lookup (Point) and computing a
// prepared document's index keys (Prepare). What is computed from it is used inside a Write
// only if the collection is still the same one, under the same name, with the same indexes
// (collection.gen); otherwise the caller's full path runs. So the work moves out of the
// exclusive section without changing any result: plans and index keys are pure functions of
// the filter or the document and of the index specifications.
type IndexSet struct {
	c       *collection // nil: no such collection (then nothing is planned)
	gen     uint64
	db      string // the namespace c had, and its UUID, for Prepare's oplog entries
	coll    string
	uuid    bson.Binary
	indexes []*index // a copy: the collection's list is replaced, never modified in place
	conds   []cond   // Point's scratch space
}

// IndexSet returns the indexes of db.coll now (an empty set when the collection does not
// exist). It does not need to be taken in the Write that uses it: that is its point.
func (r *Reader) IndexSet(db, coll string) *IndexSet {
	c := r.e.st.coll(db, coll)
	if c == nil {
		return &IndexSet{}
	}
	return &IndexSet{c: c, gen: c.gen, db: c.db, coll: c.name, uuid: c.uuid, indexes: slices.Clone(c.indexes)}
}

// current reports whether c is the collection s was taken from, under the same name, with
// the same indexes.
func (s *IndexSet) current(c *collection) bool {
	return s != nil && s.c != nil && c == s.c && c.gen == s.gen && c.db == s.db && c.name == s.coll
}

// PointLookup is a statement's lookup planned outside the lock: its filter's plan is one
// full key of a unique index, so the documents a Find of that filter returns are exactly the
// one stored under the key, if any (Reader.LookupPoint).
type PointLookup struct {
	set *IndexSet
	ix  *index
	key []byte
}

// Point plans filter against the set as Reader.Find would and reports whether the plan is a
// single full key of a unique index. It takes no lock; it is not safe for concurrent use (the
// set's scratch space).
func (s *IndexSet) Point(filter bson.D) (PointLookup, bool) {
	if s == nil || s.c == nil {
		return PointLookup{}, false
	}
	p := planOver(s.indexes, filter, &s.conds)
	if p.ix == nil || !p.exact || len(p.ranges) != 1 {
		return PointLookup{}, false
	}
	return PointLookup{set: s, ix: p.ix, key: p.ranges[0].lo}, true
}

// LookupPoint is Find of the filter pl was planned from, in one index lookup: it returns the
// document stored under pl's key (nil when none), with ok true, when db.coll is still the
// collection pl's set was taken from, with the same indexes. Find would then visit exactly
// that document: the plan is a function of the filter and the indexes alone, and a full key
// of a unique index holds at most one document. With ok false nothing was looked up: the
// caller must use Find.
func (r *Reader) LookupPoint(db, coll string, pl PointLookup) (doc *Doc, ok bool) {
	c := r.e.st.coll(db, coll)
	if !pl.set.current(c) {
		return nil, false
	}
	e, found := pl.ix.tree.Get(entry{key: pl.key})
	if !found {
		return nil, true
	}
	return e.doc, true
}

// Prepare is PrepareDoc that also computes the document's keys for the set's secondary
// indexes, so that InsertPrepared only checks the unique ones and adds the entries, and
// encodes the insert's oplog entry but for its time (its OpTime and wall clock are taken
// under the lock, patchEntryTimes), so that the insert only copies it into the oplog. A key
// that does not compute (parallel arrays) is left to the insert, which gives its error.
func (s *IndexSet) Prepare(doc bson.D) (*PreparedDoc, error) {
	p, err := PrepareDoc(doc)
	if err != nil || s == nil || s.c == nil {
		return p, err
	}
	p.set = s
	p.ent = appendEntry(getEntryBuf(len(p.d.Raw)+len(s.db)+len(s.coll)+64),
		&Entry{Op: OpInsert, DB: s.db, Coll: s.coll, UUID: s.uuid, raw: p.d.Raw})
	if len(s.indexes) < 2 {
		return p, nil
	}
	dk := docKeys{keys: make([][][]byte, len(s.indexes)-1), multi: make([]bool, len(s.indexes)-1)}
	for i, ix := range s.indexes[1:] {
		ks, multi, err := ix.indexKeys(p.d, p.dec)
		if err != nil {
			return p, nil
		}
		dk.keys[i], dk.multi[i] = ks, multi
	}
	p.keys = &dk
	return p, nil
}
