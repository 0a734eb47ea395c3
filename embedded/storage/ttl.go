package storage

import (
	"time"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TTLIndex names one TTL index of the engine.
type TTLIndex struct {
	DB, Coll string
	Spec     IndexSpec
}

// TTLIndexes lists every TTL index, by namespace.
func (r *Reader) TTLIndexes() []TTLIndex {
	var out []TTLIndex
	for _, db := range sortedKeys(r.e.st.dbs) {
		for _, c := range r.e.st.sortedColls(db) {
			for _, ix := range c.indexes[1:] {
				if ix.spec.TTL {
					out = append(out, TTLIndex{DB: c.db, Coll: c.name, Spec: cloneSpec(ix.spec)})
				}
			}
		}
	}
	return out
}

// SetExpireAfterSeconds changes the expireAfterSeconds of the TTL index name (collMod) and
// returns the previous value. It fails with NamespaceNotFound, IndexNotFound, or
// InvalidOptions when the index is not a TTL index; setting the current value changes
// nothing and logs nothing.
func (w *Writer) SetExpireAfterSeconds(db, coll, name string, secs int64) (old int64, err error) {
	if err := w.check(); err != nil {
		return 0, err
	}
	c := w.e.st.coll(db, coll)
	if c == nil {
		return 0, mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist: %s.%s", db, coll)
	}
	_, ix := c.index(name)
	if ix == nil {
		return 0, mongoerr.New(mongoerr.IndexNotFound, "cannot find index %s for ns %s.%s", name, db, coll)
	}
	if !ix.spec.TTL {
		return 0, mongoerr.New(mongoerr.InvalidOptions, "no expireAfterSeconds field to update")
	}
	if err := ValidateExpireAfterSeconds(secs); err != nil {
		return 0, err
	}
	old = ix.spec.ExpireAfterSeconds
	if old == secs {
		return old, nil
	}
	ix.spec.ExpireAfterSeconds = secs
	sp := cloneSpec(ix.spec)
	w.commit(Entry{Op: OpCollMod, DB: db, Coll: coll, Index: &sp}, c)
	return old, nil
}

// DeleteExpired deletes up to limit documents that the TTL index name of db.coll says have
// expired at now: documents whose indexed field is a date, or an array holding a date, before
// now minus expireAfterSeconds. It reads only the index range of such dates, and each delete
// is an ordinary delete (logged, and a delete event in the oplog). It returns the number
// deleted; fewer than limit means no expired document is left.
func (w *Writer) DeleteExpired(db, coll, name string, now time.Time, limit int) (int, error) {
	if err := w.check(); err != nil {
		return 0, err
	}
	c := w.e.st.coll(db, coll)
	if c == nil {
		return 0, nil
	}
	_, ix := c.index(name)
	if ix == nil || !ix.spec.TTL {
		return 0, nil
	}
	cutoff := now.Add(-time.Duration(ix.spec.ExpireAfterSeconds) * time.Second)
	lo := bsonval.KeyOf(bson.DateTime(minDateMillis))
	hi := bsonval.KeyOf(bson.NewDateTimeFromTime(cutoff))
	var victims []*Doc
	seen := map[*Doc]struct{}{}
	w.iter++
	// Entries of a non-unique index are the field key then the _id key, so every entry of a
	// date before cutoff sorts before hi, the key of cutoff alone.
	ix.tree.AscendRange(entry{key: lo}, entry{key: hi}, func(e entry) bool {
		if _, dup := seen[e.doc]; !dup {
			seen[e.doc] = struct{}{}
			victims = append(victims, e.doc)
		}
		return len(victims) < limit
	})
	w.iter--
	for _, d := range victims {
		if err := w.Delete(db, coll, d); err != nil {
			return 0, err
		}
	}
	return len(victims), nil
}

// minDateMillis is the smallest BSON date.
const minDateMillis = -1 << 63
