package storage

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// RenameCollection renames db.coll to to (in the same or another database), keeping its
// documents, indexes and UUID, as one logged "rename" entry. A missing source is
// NamespaceNotFound (26); an existing target is NamespaceExists (48) unless dropTarget, in
// which case the target is dropped by the same entry (Entry.Rename.DropTarget names it).
func (w *Writer) RenameCollection(db, coll string, to Namespace, dropTarget bool) error {
	if err := w.check(); err != nil {
		return err
	}
	if err := validateNamespace(to.DB, to.Coll); err != nil {
		return err
	}
	c := w.e.st.coll(db, coll)
	if c == nil {
		return mongoerr.New(mongoerr.NamespaceNotFound, "Source collection %s.%s does not exist", db, coll)
	}
	if db == to.DB && coll == to.Coll {
		return mongoerr.New(mongoerr.IllegalOperation, "Can't rename a collection to itself")
	}
	ent := Entry{Op: OpRename, DB: db, Coll: coll, Rename: &Rename{To: to}}
	if target := w.e.st.coll(to.DB, to.Coll); target != nil {
		if !dropTarget {
			return mongoerr.New(mongoerr.NamespaceExists, "target namespace exists")
		}
		ent.Rename.DropTarget = target.uuid
	}
	w.e.st.rename(c, to)
	w.commit(ent, c)
	return nil
}

// rename moves c to the namespace to, dropping any collection there.
func (st *state) rename(c *collection, to Namespace) {
	st.dropColl(to.DB, to.Coll)
	st.dropColl(c.db, c.name)
	d := st.dbs[to.DB]
	if d == nil {
		d = &database{name: to.DB, colls: map[string]*collection{}}
		st.dbs[to.DB] = d
	}
	c.db, c.name = to.DB, to.Coll
	d.colls[to.Coll] = c
}

// CollMod sets a collection's options (nil: leave them) and logs a "collMod" entry even when
// nothing changes, as mongod does. A missing collection is NamespaceNotFound (26).
func (w *Writer) CollMod(db, coll string, opts *CollOptions) error {
	if err := w.check(); err != nil {
		return err
	}
	c := w.e.st.coll(db, coll)
	if c == nil {
		return mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist: %s.%s", db, coll)
	}
	ent := Entry{Op: OpCollMod, DB: db, Coll: coll}
	if opts != nil {
		ent.Options = &OptionsChange{New: *opts, Old: c.opts}
		c.opts = *opts
	}
	w.commit(ent, c)
	return nil
}

// optionsDoc is the stored form of collection options (log entries and snapshots).
func optionsDoc(o CollOptions) bson.D {
	return bson.D{{Key: "cspp", Value: o.PreAndPostImages}}
}

func optionsFromDoc(d bson.D) CollOptions {
	v, _ := bsonval.Get(d, "cspp")
	b, _ := v.(bool)
	return CollOptions{PreAndPostImages: b}
}

// appendCatalogFields appends the log fields of pre-images, renames and collection options.
func appendCatalogFields(dst []byte, ent *Entry) []byte {
	if ent.Pre != nil {
		dst = appendDocElement(dst, "pre", ent.Pre)
	}
	if r := ent.Rename; r != nil {
		dst = appendDocElement(dst, "to", bson.D{{Key: "db", Value: r.To.DB}, {Key: "c", Value: r.To.Coll}})
		if r.DropTarget.Data != nil {
			dst = bsoncore.AppendBinaryElement(dst, "dt", r.DropTarget.Subtype, r.DropTarget.Data)
		}
	}
	if o := ent.Options; o != nil {
		dst = appendDocElement(dst, "opts", optionsDoc(o.New))
		if ent.Op == OpCollMod {
			dst = appendDocElement(dst, "oldopts", optionsDoc(o.Old))
		}
	}
	return dst
}

// decodeCatalogField reads one field appendCatalogFields wrote; ok is false when its type is
// wrong. Unknown keys are ignored (ok).
func decodeCatalogField(ent *Entry, key string, v bsoncore.Value) (ok bool) {
	switch key {
	case "pre":
		var d bsoncore.Document
		if d, ok = v.DocumentOK(); ok {
			ent.Pre, _ = bsonval.Decode(d)
		}
		return ok
	case "to":
		var d bsoncore.Document
		if d, ok = v.DocumentOK(); ok {
			doc, _ := bsonval.Decode(d)
			db, _ := bsonval.Get(doc, "db")
			c, _ := bsonval.Get(doc, "c")
			rename(ent).To.DB, _ = db.(string)
			rename(ent).To.Coll, _ = c.(string)
		}
		return ok
	case "dt":
		var st byte
		var data []byte
		st, data, ok = v.BinaryOK()
		rename(ent).DropTarget = bson.Binary{Subtype: st, Data: append([]byte(nil), data...)}
		return ok
	case "opts", "oldopts":
		var d bsoncore.Document
		if d, ok = v.DocumentOK(); ok {
			doc, _ := bsonval.Decode(d)
			if ent.Options == nil {
				ent.Options = &OptionsChange{}
			}
			if key == "opts" {
				ent.Options.New = optionsFromDoc(doc)
			} else {
				ent.Options.Old = optionsFromDoc(doc)
			}
		}
		return ok
	}
	return true
}

func rename(ent *Entry) *Rename {
	if ent.Rename == nil {
		ent.Rename = &Rename{}
	}
	return ent.Rename
}

// CreateCollectionWith creates a collection with options, logged as one "create" entry
// carrying them. When the collection exists, created is false and existing holds its options.
func (w *Writer) CreateCollectionWith(db, coll string, opts CollOptions) (created bool, existing CollOptions, err error) {
	if err := w.check(); err != nil {
		return false, CollOptions{}, err
	}
	if c := w.e.st.coll(db, coll); c != nil {
		return false, c.opts, nil
	}
	if err := validateNamespace(db, coll); err != nil {
		return false, CollOptions{}, err
	}
	c := w.e.st.createColl(db, coll, newUUID())
	c.opts = opts
	w.commit(Entry{Op: OpCreate, DB: db, Coll: coll, Options: &OptionsChange{New: opts}}, c)
	return true, CollOptions{}, nil
}
