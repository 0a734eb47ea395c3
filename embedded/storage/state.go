package storage

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// state is the in-memory database image. It is guarded by Engine.mu.
type state struct {
	dbs map[string]*database
}

type database struct {
	name  string
	colls map[string]*collection
}

type collection struct {
	db, name string
	uuid     bson.Binary
	indexes  []*index // [0] is _id_; set with setIndexes
	// gen counts the changes of indexes: a plan or index keys computed outside the lock from
	// an IndexSet hold only while gen (and the collection) are the same.
	gen  uint64
	size int64
	opts CollOptions
}

func newState() *state { return &state{dbs: map[string]*database{}} }

func (st *state) coll(db, name string) *collection {
	d := st.dbs[db]
	if d == nil {
		return nil
	}
	return d.colls[name]
}

func (st *state) createColl(db, name string, uuid bson.Binary) *collection {
	d := st.dbs[db]
	if d == nil {
		d = &database{name: db, colls: map[string]*collection{}}
		st.dbs[db] = d
	}
	c := &collection{db: db, name: name, uuid: uuid, indexes: []*index{newIndex(idIndexSpec())}}
	d.colls[name] = c
	return c
}

func (st *state) dropColl(db, name string) {
	d := st.dbs[db]
	if d == nil {
		return
	}
	delete(d.colls, name)
	if len(d.colls) == 0 {
		delete(st.dbs, db)
	}
}

// sortedColls returns the collections of a database by name.
func (st *state) sortedColls(db string) []*collection {
	d := st.dbs[db]
	if d == nil {
		return nil
	}
	out := make([]*collection, 0, len(d.colls))
	for _, c := range d.colls {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *collection) int { return cmp.Compare(a.name, b.name) })
	return out
}

// setIndexes replaces the collection's index list (never modified in place: an IndexSet
// taken before keeps its own copy) and moves gen.
func (c *collection) setIndexes(ixs []*index) {
	c.indexes = ixs
	c.gen++
}

func (c *collection) count() int { return c.indexes[0].tree.Len() }

func (c *collection) info() CollectionInfo {
	ci := CollectionInfo{DB: c.db, Name: c.name, UUID: c.uuid, Count: c.count(), Size: c.size, Options: c.opts}
	for _, ix := range c.indexes {
		ci.Indexes = append(ci.Indexes, cloneSpec(ix.spec))
	}
	return ci
}

func cloneSpec(s IndexSpec) IndexSpec {
	s.Key = bsonval.CloneDoc(s.Key)
	return s
}

func (c *collection) get(idKey []byte) *Doc {
	e, ok := c.indexes[0].tree.Get(entry{key: idKey})
	if !ok {
		return nil
	}
	return e.doc
}

func (c *collection) index(name string) (int, *index) {
	for i, ix := range c.indexes {
		if ix.spec.Name == name {
			return i, ix
		}
	}
	return -1, nil
}

func (c *collection) dupKey(ix *index, dec bson.D, k []byte) *DupKeyError {
	return &DupKeyError{
		DB: c.db, Coll: c.name, Index: ix.spec.Name,
		KeyPattern: bsonval.CloneDoc(ix.spec.Key),
		KeyValue:   ix.keyValues(dec, k),
	}
}

// docKeys holds a document's keys for every index but _id_.
type docKeys struct {
	keys  [][][]byte
	multi []bool
}

// keysFor computes d's keys (d decoded: dec) for the secondary indexes and checks unique
// constraints against documents other than d (by _id). pre, when not nil, holds the keys
// computed before the Write for these same indexes: only the checks are made.
func (c *collection) keysFor(d *Doc, dec bson.D, pre *docKeys) (docKeys, error) {
	n := len(c.indexes) - 1
	if n == 0 {
		return docKeys{}, nil
	}
	dk := docKeys{keys: make([][][]byte, n), multi: make([]bool, n)}
	if pre != nil {
		dk = *pre
	}
	for i, ix := range c.indexes[1:] {
		ks, multi := dk.keys[i], dk.multi[i]
		if pre == nil {
			var err error
			if ks, multi, err = ix.indexKeys(d, dec); err != nil {
				return docKeys{}, err
			}
		}
		for _, k := range ks {
			if ix.conflict(k, d) != nil {
				return docKeys{}, c.dupKey(ix, dec, k)
			}
		}
		dk.keys[i], dk.multi[i] = ks, multi
	}
	return dk, nil
}

// insert adds a new document (decoded: dec); a duplicate _id or unique key changes nothing.
// pre: see keysFor.
func (c *collection) insert(d *Doc, dec bson.D, pre *docKeys) error {
	idx := c.indexes[0]
	if _, ok := idx.tree.Get(entry{key: d.idKey}); ok {
		return c.dupKey(idx, dec, d.idKey)
	}
	dk, err := c.keysFor(d, dec, pre)
	if err != nil {
		return err
	}
	idx.tree.ReplaceOrInsert(entry{key: d.idKey, doc: d})
	for i, ix := range c.indexes[1:] {
		ix.add(dk.keys[i], dk.multi[i], d)
	}
	c.size += int64(len(d.Raw))
	return nil
}

// replace swaps the stored document cur for d (decoded: dec; same _id).
func (c *collection) replace(cur, d *Doc, dec bson.D) error {
	dk, err := c.keysFor(d, dec, nil)
	if err != nil {
		return err
	}
	var curD bson.D // cur decoded, once an index needs more than its top-level fields
	c.indexes[0].tree.ReplaceOrInsert(entry{key: d.idKey, doc: d})
	for i, ix := range c.indexes[1:] {
		if !ix.simple && curD == nil {
			curD = cur.D()
		}
		old, _, _ := ix.indexKeys(cur, curD)
		if !keysEqual(old, dk.keys[i]) {
			ix.remove(old, cur)
		}
		ix.add(dk.keys[i], dk.multi[i], d)
	}
	c.size += int64(len(d.Raw)) - int64(len(cur.Raw))
	return nil
}

func (c *collection) delete(cur *Doc) {
	c.indexes[0].tree.Delete(entry{key: cur.idKey})
	var curD bson.D // cur decoded, once an index needs more than its top-level fields
	for _, ix := range c.indexes[1:] {
		if !ix.simple && curD == nil {
			curD = cur.D()
		}
		old, _, _ := ix.indexKeys(cur, curD)
		ix.remove(old, cur)
	}
	c.size -= int64(len(cur.Raw))
}

// buildIndex builds ix over the existing documents.
func (c *collection) buildIndex(ix *index) error {
	var err error
	c.indexes[0].tree.Ascend(func(e entry) bool {
		var ks [][]byte
		var multi bool
		dec := e.doc.D()
		ks, multi, err = ix.indexKeys(e.doc, dec)
		if err != nil {
			return false
		}
		for _, k := range ks {
			if ix.conflict(k, e.doc) != nil {
				err = c.dupKey(ix, dec, k)
				return false
			}
		}
		ix.add(ks, multi, e.doc)
		return true
	})
	return err
}

// newDoc validates a document for storage and encodes it. _id is moved first when needed;
// the document as stored (decoded) is returned with it.
func newDoc(d bson.D, sizeHint int) (*Doc, bson.D, error) {
	if len(d) == 0 || d[0].Key != "_id" {
		pos := -1
		for i, e := range d {
			if e.Key == "_id" {
				pos = i
				break
			}
		}
		if pos < 0 {
			return nil, nil, mongoerr.BadValuef("document to store has no _id field")
		}
		nd := make(bson.D, 0, len(d))
		nd = append(nd, d[pos])
		nd = append(nd, d[:pos]...)
		d = append(nd, d[pos+1:]...)
	}
	id := d[0].Value
	switch id.(type) {
	case bson.A, []any:
		return nil, nil, mongoerr.New(mongoerr.InvalidIDField, "The '_id' value cannot be of type array")
	case bson.Regex:
		return nil, nil, mongoerr.New(mongoerr.InvalidIDField, "The '_id' value cannot be of type regex")
	case bson.Undefined:
		return nil, nil, mongoerr.New(mongoerr.InvalidIDField, "The '_id' value cannot be of type undefined")
	}
	raw, err := bsonval.AppendDocument(make([]byte, 0, sizeHint), d)
	if err != nil {
		return nil, nil, mongoerr.BadValuef("cannot encode document: %v", err)
	}
	if len(raw) > MaxDocumentSize {
		return nil, nil, mongoerr.New(mongoerr.BSONObjectTooLarge,
			"object to insert too large. size in bytes: %d, max size: %d", len(raw), MaxDocumentSize)
	}
	if cap(raw)-len(raw) > 32 {
		raw = slices.Clip(bytes.Clone(raw)) // a stored document keeps no spare capacity
	}
	return &Doc{Raw: raw, idKey: bsonval.KeyOf(id)}, d, nil
}

// docFromRaw builds a stored document from its encoding (recovery), and returns it decoded.
func docFromRaw(raw []byte) (*Doc, bson.D, error) {
	d, err := bsonval.Decode(raw)
	if err != nil {
		return nil, nil, err
	}
	if len(d) == 0 || d[0].Key != "_id" {
		return nil, nil, mongoerr.BadValuef("stored document has no leading _id")
	}
	return &Doc{Raw: raw, idKey: bsonval.KeyOf(d[0].Value)}, d, nil
}
