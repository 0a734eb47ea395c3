package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/aggregate"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/query"
	"github.com/gameops/rollup/embedded/storage"
)

var famFields = []string{"query", "sort", "remove", "update", "new", "fields", "upsert",
	"bypassDocumentValidation", "collation", "hint", "arrayFilters", "let"}

// famArgs is a parsed findAndModify command.
type famArgs struct {
	q          bson.D
	filter     *query.Filter
	sort       *query.Sort
	proj       *query.Projection
	upd        updater
	remove     bool
	returnNew  bool
	upsert     bool
	hasUpdate  bool
	collection string
}

func parseFAM(env *aggregate.Env, r *request) (famArgs, error) {
	var a famArgs
	var err error
	if a.collection, err = collArg(r); err != nil {
		return a, err
	}
	var update any
	var arrayFilters bson.A
	for _, e := range r.body[1:] {
		switch e.Key {
		case "query":
			if e.Value != nil {
				a.q = asDoc(e.Value)
			}
		case "sort":
			if a.sort, err = sortArg("findAndModify", e.Value); err != nil {
				return a, err
			}
		case "fields":
			if a.proj, err = projectionArg("findAndModify", "fields", e.Value); err != nil {
				return a, err
			}
		case "remove":
			a.remove = boolArg(e.Value)
		case "new":
			a.returnNew = boolArg(e.Value)
		case "upsert":
			a.upsert = boolArg(e.Value)
		case "update":
			switch e.Value.(type) {
			case bson.D, bson.A:
				update, a.hasUpdate = e.Value, true
			default:
				return a, mongoerr.FailedToParsef("Update argument must be either an object or an array")
			}
		case "collation":
			if err := checkCollation(e.Value); err != nil {
				return a, err
			}
		case "arrayFilters":
			if arrayFilters, err = arrayFiltersArg("findAndModify", e.Value); err != nil {
				return a, err
			}
		}
	}
	switch {
	case a.remove && a.hasUpdate:
		return a, mongoerr.FailedToParsef("Cannot specify both an update and remove=true")
	case !a.remove && !a.hasUpdate:
		return a, mongoerr.FailedToParsef("Either an update or remove=true must be specified")
	case a.remove && a.returnNew:
		return a, mongoerr.FailedToParsef("Cannot specify both new=true and remove=true; 'remove' always returns the deleted document")
	case a.remove && a.upsert:
		return a, mongoerr.FailedToParsef("Cannot specify both upsert=true and remove=true")
	}
	if a.hasUpdate {
		if a.upd, err = compileUpdater(env, "findAndModify.update", update, arrayFilters); err != nil {
			return a, err
		}
	}
	if a.filter, err = env.CompileFilter(a.q); err != nil {
		return a, err
	}
	return a, nil
}

// prepare does, before the Write and without the lock, what the update command does for its
// statements: the find planned when it is one full key of a unique index (planPoints), and
// an upsert's document built, encoded and given its index keys (prepareUpserts). Each is
// used under the lock only if the collection's indexes are still the same.
func (a *famArgs) prepare(s *Server, db string) (*storage.PointLookup, *preparedUpsert) {
	var set *storage.IndexSet
	s.engine.Read(func(rd *storage.Reader) { set = rd.IndexSet(db, a.collection) })
	var pt *storage.PointLookup
	if pl, ok := set.Point(a.q); ok {
		pt = &pl
	}
	if !a.upsert {
		return pt, nil
	}
	doc, err := upsertDoc(a.q, a.upd)
	if err != nil {
		return pt, nil // the insert under the lock gives the error
	}
	p, err := set.Prepare(doc)
	if err != nil {
		return pt, nil
	}
	return pt, &preparedUpsert{doc: doc, p: p}
}

// preparedUpsert is findAndModify's upsert document built before the Write: doc is what the
// command returns with new: true, p the same document encoded for the insert.
type preparedUpsert struct {
	doc bson.D
	p   *storage.PreparedDoc
}

// upsertInto inserts the document of an upsert that matched nothing: the prepared one when
// there is one, else built here.
func (a *famArgs) upsertInto(w *storage.Writer, db string, pre *preparedUpsert) (bson.D, error) {
	if pre != nil {
		_, err := w.InsertPrepared(db, a.collection, pre.p)
		return pre.doc, err
	}
	doc, err := upsertDoc(a.q, a.upd)
	if err != nil {
		return nil, err
	}
	_, err = w.Insert(db, a.collection, doc)
	return doc, err
}

func cmdFindAndModify(ctx context.Context, s *Server, r *request) (result, error) {
	env, err := s.exprEnv(r)
	if err != nil {
		return result{}, err
	}
	a, err := parseFAM(env, r)
	if err != nil {
		return result{}, err
	}
	if err := s.checkHint(r); err != nil {
		return result{}, err
	}
	var value any
	lastErr := bson.D{}
	pt, pre := a.prepare(s, r.db)
	turn, err := s.turns.take(ctx, 1)
	if err != nil {
		return result{}, err
	}
	defer turn()
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		turn() // under the lock: see writeTurns
		target, err := findOne(&w.Reader, r.db, a.collection, a.q, a.filter, a.sort, pt)
		if err != nil {
			return err
		}
		switch {
		case a.remove:
			if target == nil {
				lastErr = bson.D{{Key: "n", Value: int32(0)}}
				return nil
			}
			if err := w.Delete(r.db, a.collection, target.doc); err != nil {
				return err
			}
			value = target.full()
			lastErr = bson.D{{Key: "n", Value: int32(1)}}
		case target != nil:
			out, desc, changed, err := applyMatched(a.upd, a.filter, target.full())
			if err != nil {
				return err
			}
			value = target.full()
			if changed {
				if _, err := w.Replace(r.db, a.collection, target.doc, out, storageDesc(a.upd, desc)); err != nil {
					return err
				}
			}
			if a.returnNew {
				value = out
			}
			lastErr = bson.D{{Key: "n", Value: int32(1)}, {Key: "updatedExisting", Value: true}}
		case a.upsert:
			doc, err := a.upsertInto(w, r.db, pre)
			if err != nil {
				return err
			}
			if a.returnNew {
				value = doc
			}
			lastErr = bson.D{{Key: "n", Value: int32(1)}, {Key: "updatedExisting", Value: false}, {Key: "upserted", Value: doc[0].Value}}
		default:
			lastErr = bson.D{{Key: "n", Value: int32(0)}, {Key: "updatedExisting", Value: false}}
		}
		return nil
	})
	if err != nil {
		return result{opTime: op}, toMongoErr(err)
	}
	if d, ok := value.(bson.D); ok && a.proj != nil {
		value = a.proj.Apply(d)
	}
	return result{fields: bson.D{{Key: "lastErrorObject", Value: lastErr}, {Key: "value", Value: value}}, opTime: op}, nil
}
