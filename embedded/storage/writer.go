package storage

import (
	"slices"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Writer gives exclusive access during Engine.Write: the Reader methods plus mutations.
// Mutations create databases and collections implicitly, as MongoDB does.
type Writer struct {
	Reader
	rec    []byte // the Write's encoded entries (a framed log record with a data directory)
	n      int    // mutations made
	logged int    // mutations whose entries are in the log's pending records (Yield)
	last   OpTime
}

// Yield lets the writers and readers waiting for the engine in between two mutations of one
// Write, as mongod yields its locks between the statements of a write command: it hands the
// mutations made so far to the log (they are published as a Write's are, without waiting for
// durability, which Write's return still waits for), releases the exclusive lock, runs
// between (without the lock; nil for none) and takes the lock back. Another Write or Read may
// then run before the next mutation, so fn must hold nothing it read across a Yield. It
// fails, with the lock taken back, when the engine was closed or its log failed meanwhile:
// fn should then stop writing and return.
func (w *Writer) Yield(between func()) error {
	if err := w.check(); err != nil {
		return err
	}
	e := w.e
	w.logRecord()
	logged := e.wal != nil // e.wal changes under the lock (compaction)
	e.mu.Unlock()
	e.oplog.flush()
	if !logged && w.n > 0 {
		e.publish(w.last)
	}
	if between != nil {
		between()
	}
	e.mu.Lock()
	w.rec = e.scratch[:0]
	if e.wal != nil {
		w.rec = beginRecord(w.rec)
	}
	if e.closed {
		return ErrClosed
	}
	return e.failure()
}

// logRecord appends the entries of the mutations made since the last call to the log's
// pending records (with a data directory) and gives the record's buffer back to the engine.
// Under the exclusive lock.
func (w *Writer) logRecord() {
	e := w.e
	if e.wal != nil && w.n > w.logged {
		w.rec = finishRecord(w.rec)
		e.cmu.Lock()
		e.pending = append(e.pending, w.rec...)
		e.pendingTS = w.last
		e.cmu.Unlock()
	}
	w.logged = w.n
	if cap(w.rec) <= 1<<20 {
		e.scratch = w.rec[:0]
	}
}

// Mutations returns the number of mutations made so far in this Write.
func (w *Writer) Mutations() int { return w.n }

func keyOfID(id any) []byte { return bsonval.KeyOf(id) }

func (w *Writer) check() error {
	if w.iter > 0 {
		return mongoerr.New(mongoerr.InternalError, "storage: mutation inside a Find callback")
	}
	return nil
}

// commit logs a mutation that has been applied: it takes the next OpTime, appends the entry
// to the oplog and to the Write's log record.
func (w *Writer) commit(ent Entry, c *collection) {
	e := w.e
	now := e.now()
	ent.TS = e.nextTS(now)
	ent.Wall = now
	if c != nil {
		ent.UUID = c.uuid
	}
	start := len(w.rec)
	w.rec = appendEntry(w.rec, &ent)
	e.lastTS = ent.TS
	e.oplog.append(w.rec[start:], ent.TS, now, now)
	w.last = ent.TS
	w.n++
}

// commitEncoded is commit of an entry encoded before the Write (IndexSet.Prepare): only its
// OpTime and wall clock are written into it (the caller gives it up), it is copied into the
// Write's log record with a data directory, and queued for the oplog, which copies it after
// the exclusive lock is released (oplog.appendLater).
func (w *Writer) commitEncoded(enc []byte) {
	e := w.e
	now := e.now()
	ts := e.nextTS(now)
	patchEntryTimes(enc, ts, now)
	if e.wal != nil {
		w.rec = append(w.rec, enc...)
	}
	e.lastTS = ts
	e.oplog.appendLater(enc, ts, now)
	w.last = ts
	w.n++
}

func docKey(dec bson.D) bson.D { return bson.D{dec[0]} }

// ensureColl returns the collection, creating it (and logging "create") when missing.
func (w *Writer) ensureColl(db, coll string) (*collection, error) {
	if c := w.e.st.coll(db, coll); c != nil {
		return c, nil
	}
	if err := validateNamespace(db, coll); err != nil {
		return nil, err
	}
	c := w.e.st.createColl(db, coll, newUUID())
	w.commit(Entry{Op: OpCreate, DB: db, Coll: coll}, c)
	return c, nil
}

func validateNamespace(db, coll string) error {
	if db == "" {
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid database name: ''")
	}
	for i := 0; i < len(db); i++ {
		switch db[i] {
		case '/', '\\', '.', ' ', '"', '$', 0:
			return mongoerr.New(mongoerr.InvalidNamespace, "Invalid database name: '%s'", db)
		}
	}
	if coll == "" {
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid namespace specified '%s.'", db)
	}
	for i := 0; i < len(coll); i++ {
		if coll[i] == '$' || coll[i] == 0 {
			return mongoerr.New(mongoerr.InvalidNamespace, "Invalid collection name: %s", coll)
		}
	}
	return nil
}

// CreateCollection creates a collection; created is false when it already exists.
func (w *Writer) CreateCollection(db, coll string) (created bool, err error) {
	if err := w.check(); err != nil {
		return false, err
	}
	if w.e.st.coll(db, coll) != nil {
		return false, nil
	}
	if _, err := w.ensureColl(db, coll); err != nil {
		return false, err
	}
	return true, nil
}

// DropCollection drops a collection; existed is false when there was none.
func (w *Writer) DropCollection(db, coll string) (existed bool, err error) {
	if err := w.check(); err != nil {
		return false, err
	}
	c := w.e.st.coll(db, coll)
	if c == nil {
		return false, nil
	}
	w.e.st.dropColl(db, coll)
	w.commit(Entry{Op: OpDrop, DB: db, Coll: coll}, c)
	return true, nil
}

// DropDatabase drops every collection of a database ("drop" entries, then "dropDatabase").
// Dropping a database that does not exist does nothing.
func (w *Writer) DropDatabase(db string) error {
	if err := w.check(); err != nil {
		return err
	}
	cs := w.e.st.sortedColls(db)
	if len(cs) == 0 {
		return nil
	}
	for _, c := range cs {
		w.e.st.dropColl(db, c.name)
		w.commit(Entry{Op: OpDrop, DB: db, Coll: c.name}, c)
	}
	w.commit(Entry{Op: OpDropDatabase, DB: db}, nil)
	return nil
}

// CreateIndex creates an index (and the collection when missing). It is idempotent for an
// identical spec (created false). The same name with another key is IndexKeySpecsConflict
// (86); the same key with another name or options is IndexOptionsConflict (85); a unique
// index over existing duplicates is a *DupKeyError and the index is not created.
func (w *Writer) CreateIndex(db, coll string, spec IndexSpec) (created bool, err error) {
	if err := w.check(); err != nil {
		return false, err
	}
	spec = cloneSpec(spec)
	if err := validateIndexSpec(&spec); err != nil {
		return false, err
	}
	if err := validateNamespace(db, coll); err != nil {
		return false, err
	}
	if c := w.e.st.coll(db, coll); c != nil {
		exists, err := checkIndexConflict(c, spec)
		if exists || err != nil {
			return false, err
		}
	}
	if spec.Name == idIndexName {
		// {_id: 1} named _id_ always exists once the collection does.
		_, err := w.ensureColl(db, coll)
		return false, err
	}
	ix := newIndex(spec)
	c := w.e.st.coll(db, coll)
	if c != nil {
		if err := c.buildIndex(ix); err != nil {
			return false, err
		}
	}
	if c, err = w.ensureColl(db, coll); err != nil {
		return false, err
	}
	c.setIndexes(append(c.indexes, ix))
	sp := cloneSpec(spec)
	w.commit(Entry{Op: OpCreateIndexes, DB: db, Coll: coll, Index: &sp}, c)
	return true, nil
}

func specString(s IndexSpec) string {
	d := bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: s.Key}, {Key: "name", Value: s.Name}}
	if s.Unique {
		d = append(d, bson.E{Key: "unique", Value: true})
	}
	if s.TTL {
		d = append(d, bson.E{Key: "expireAfterSeconds", Value: s.ExpireAfterSeconds})
	}
	return bsonval.Format(d)
}

// sameOptions reports whether two specs have the same index options.
func sameOptions(a, b IndexSpec) bool {
	return a.Unique == b.Unique && a.TTL == b.TTL && a.ExpireAfterSeconds == b.ExpireAfterSeconds
}

// checkIndexConflict reports whether an identical index exists, or the conflict error.
func checkIndexConflict(c *collection, spec IndexSpec) (exists bool, err error) {
	for _, ix := range c.indexes {
		ex := ix.spec
		sameKey := sameKeyPattern(ex.Key, spec.Key)
		switch {
		case ix.isID && sameKey && ex.Name == spec.Name:
			// The _id index: uniqueness is implied, whatever the request says.
			return true, nil
		case ex.Name == spec.Name && sameKey && sameOptions(ex, spec):
			return true, nil
		case ex.Name == spec.Name && sameKey:
			return false, mongoerr.New(mongoerr.IndexOptionsConflict,
				"An equivalent index already exists with the same name but different options. Requested index: %s, existing index: %s",
				specString(spec), specString(ex))
		case ex.Name == spec.Name:
			return false, mongoerr.New(mongoerr.IndexKeySpecsConflict,
				"An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: %s, existing index: %s",
				specString(spec), specString(ex))
		case sameKey && sameOptions(ex, spec):
			return false, mongoerr.New(mongoerr.IndexOptionsConflict,
				"Index already exists with a different name: %s", ex.Name)
		case sameKey:
			return false, mongoerr.New(mongoerr.IndexOptionsConflict,
				"An existing index has the same key pattern but different options. Requested index: %s, existing index: %s",
				specString(spec), specString(ex))
		}
	}
	return false, nil
}

// DropIndex drops an index by name. "_id_" cannot be dropped (InvalidOptions 72), an unknown
// name is IndexNotFound (27), a missing collection NamespaceNotFound (26).
func (w *Writer) DropIndex(db, coll, name string) error {
	if err := w.check(); err != nil {
		return err
	}
	c := w.e.st.coll(db, coll)
	if c == nil {
		return mongoerr.New(mongoerr.NamespaceNotFound, "ns not found %s.%s", db, coll)
	}
	if name == idIndexName {
		return mongoerr.New(mongoerr.InvalidOptions, "cannot drop _id index")
	}
	i, ix := c.index(name)
	if ix == nil {
		return mongoerr.New(mongoerr.IndexNotFound, "index not found with name [%s]", name)
	}
	c.setIndexes(slices.Delete(slices.Clone(c.indexes), i, i+1))
	sp := cloneSpec(ix.spec)
	w.commit(Entry{Op: OpDropIndexes, DB: db, Coll: coll, Index: &sp}, c)
	return nil
}

// DropIndexes drops every index but _id_ (one "dropIndexes" entry each).
func (w *Writer) DropIndexes(db, coll string) error {
	if err := w.check(); err != nil {
		return err
	}
	c := w.e.st.coll(db, coll)
	if c == nil {
		return mongoerr.New(mongoerr.NamespaceNotFound, "ns not found %s.%s", db, coll)
	}
	for len(c.indexes) > 1 {
		ix := c.indexes[len(c.indexes)-1]
		c.setIndexes(slices.Clone(c.indexes[:len(c.indexes)-1]))
		sp := cloneSpec(ix.spec)
		w.commit(Entry{Op: OpDropIndexes, DB: db, Coll: coll, Index: &sp}, c)
	}
	return nil
}

// Insert stores a new document. doc must have _id (it is moved first if it is not). A
// duplicate _id or unique key is a *DupKeyError and changes nothing. Insert takes ownership
// of doc: the caller must not modify it (or values inside it) afterwards.
func (w *Writer) Insert(db, coll string, doc bson.D) (*Doc, error) {
	if err := w.check(); err != nil {
		return nil, err
	}
	d, dec, err := newDoc(doc, 256)
	if err != nil {
		return nil, err
	}
	if err := w.insertDoc(db, coll, d, dec); err != nil {
		return nil, err
	}
	return d, nil
}

// PreparedDoc is a document validated and encoded for storage before a Write (PrepareDoc),
// so that the work is done outside the engine's exclusive lock; InsertPrepared stores it.
type PreparedDoc struct {
	d   *Doc
	dec bson.D
	// keys are d's keys for set's secondary indexes (IndexSet.Prepare), used when the
	// collection still has those indexes; nil: computed by the insert.
	set  *IndexSet
	keys *docKeys
	// ent is the insert's oplog entry encoded but for its times (IndexSet.Prepare), used
	// when the collection is still set's; nil: encoded by the insert.
	ent []byte
}

// PrepareDoc validates and encodes doc as Insert would (its errors are Insert's), without
// taking any lock. It takes ownership of doc. A PreparedDoc is inserted at most once.
func PrepareDoc(doc bson.D) (*PreparedDoc, error) {
	d, dec, err := newDoc(doc, 256)
	if err != nil {
		return nil, err
	}
	return &PreparedDoc{d: d, dec: dec}, nil
}

// ID returns the prepared document's _id.
func (p *PreparedDoc) ID() any { return p.dec[0].Value }

// InsertPrepared is Insert of a document prepared by PrepareDoc: only the index checks and
// updates, and the oplog entry, happen inside the Write.
func (w *Writer) InsertPrepared(db, coll string, p *PreparedDoc) (*Doc, error) {
	if err := w.check(); err != nil {
		return nil, err
	}
	if p == nil || p.d == nil {
		return nil, mongoerr.New(mongoerr.InternalError, "storage: a prepared document inserted twice")
	}
	d, dec := p.d, p.dec
	c, err := w.ensureColl(db, coll)
	if err != nil {
		return nil, err
	}
	if !p.set.current(c) {
		if err := w.insertInto(c, d, dec, nil); err != nil {
			return nil, err
		}
		p.d = nil
		return d, nil
	}
	if err := c.insert(d, dec, p.keys); err != nil {
		return nil, err
	}
	w.commitEncoded(p.ent)
	p.d, p.ent = nil, nil
	return d, nil
}

func (w *Writer) insertDoc(db, coll string, d *Doc, dec bson.D) error {
	c, err := w.ensureColl(db, coll)
	if err != nil {
		return err
	}
	return w.insertInto(c, d, dec, nil)
}

// insertInto inserts d into c and logs it; dk, when not nil, are d's keys for c's secondary
// indexes, computed before the Write.
func (w *Writer) insertInto(c *collection, d *Doc, dec bson.D, dk *docKeys) error {
	db, coll := c.db, c.name
	if err := c.insert(d, dec, dk); err != nil {
		return err
	}
	w.commit(Entry{Op: OpInsert, DB: db, Coll: coll, DocKey: docKey(dec), Doc: dec, raw: d.Raw}, c)
	return nil
}

// ReplaceContents makes docs (each with an _id) the whole content of db.coll, creating it when
// missing and keeping its indexes, as an aggregation's $out does. The documents are first
// checked against the indexes on their own (unique keys, duplicate _ids, size), so an error
// changes nothing; then the existing documents are deleted and docs inserted, each an
// ordinary logged delete or insert. ReplaceContents takes ownership of docs.
func (w *Writer) ReplaceContents(db, coll string, docs []bson.D) error {
	if err := w.check(); err != nil {
		return err
	}
	if err := validateNamespace(db, coll); err != nil {
		return err
	}
	c := w.e.st.coll(db, coll)
	scratch := &collection{db: db, name: coll, indexes: []*index{newIndex(idIndexSpec())}}
	if c != nil {
		for _, ix := range c.indexes[1:] {
			scratch.indexes = append(scratch.indexes, newIndex(ix.spec))
		}
	}
	prepared := make([]*Doc, len(docs))
	decoded := make([]bson.D, len(docs))
	for i, doc := range docs {
		d, dec, err := newDoc(doc, 256)
		if err != nil {
			return err
		}
		if err := scratch.insert(d, dec, nil); err != nil {
			return err
		}
		prepared[i], decoded[i] = d, dec
	}
	if c != nil {
		var old []*Doc
		c.indexes[0].tree.Ascend(func(e entry) bool {
			old = append(old, e.doc)
			return true
		})
		for _, d := range old {
			c.delete(d)
			w.commit(Entry{Op: OpDelete, DB: db, Coll: coll, DocKey: bson.D{{Key: "_id", Value: d.ID()}}}, c)
		}
	}
	for i, d := range prepared {
		if err := w.insertDoc(db, coll, d, decoded[i]); err != nil {
			return err
		}
	}
	return nil
}

// Replace replaces the stored document old with doc (same _id). A unique violation is a
// *DupKeyError and changes nothing. desc nil logs a full replacement ("replace"), non-nil an
// "update" with that description. Replace takes ownership of doc and desc.
func (w *Writer) Replace(db, coll string, old *Doc, doc bson.D, desc *UpdateDesc) (*Doc, error) {
	if err := w.check(); err != nil {
		return nil, err
	}
	c := w.e.st.coll(db, coll)
	if c == nil || old == nil {
		return nil, mongoerr.New(mongoerr.NoSuchKey, "storage: no document to replace in %s.%s", db, coll)
	}
	cur := c.get(old.idKey)
	if cur == nil {
		return nil, mongoerr.New(mongoerr.NoSuchKey, "storage: no document with _id %s in %s.%s",
			bsonval.Format(old.ID()), db, coll)
	}
	d, dec, err := newDoc(doc, len(cur.Raw)+64)
	if err != nil {
		return nil, err
	}
	if !bsonval.Equal(d.ID(), cur.ID()) {
		return nil, mongoerr.New(mongoerr.ImmutableField,
			"After applying the update, the (immutable) field '_id' was found to have been altered to _id: %s",
			bsonval.Format(d.ID()))
	}
	d.idKey = cur.idKey
	if err := c.replace(cur, d, dec); err != nil {
		return nil, err
	}
	op := OpReplace
	if desc != nil {
		op = OpUpdate
	}
	ent := Entry{Op: op, DB: db, Coll: coll, DocKey: docKey(dec), Doc: dec, Update: desc, raw: d.Raw}
	if c.opts.PreAndPostImages {
		ent.Pre = cur.D()
	}
	w.commit(ent, c)
	return d, nil
}

// Delete removes the stored document with old's _id.
func (w *Writer) Delete(db, coll string, old *Doc) error {
	if err := w.check(); err != nil {
		return err
	}
	c := w.e.st.coll(db, coll)
	if c == nil || old == nil {
		return mongoerr.New(mongoerr.NoSuchKey, "storage: no document to delete in %s.%s", db, coll)
	}
	cur := c.get(old.idKey)
	if cur == nil {
		return mongoerr.New(mongoerr.NoSuchKey, "storage: no document with _id %s in %s.%s",
			bsonval.Format(old.ID()), db, coll)
	}
	c.delete(cur)
	ent := Entry{Op: OpDelete, DB: db, Coll: coll, DocKey: bson.D{{Key: "_id", Value: cur.ID()}}}
	if c.opts.PreAndPostImages {
		ent.Pre = cur.D()
	}
	w.commit(ent, c)
	return nil
}
