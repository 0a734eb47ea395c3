package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/aggregate"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/query"
	"github.com/gameops/rollup/embedded/storage"
)

// updateOp is one parsed statement of an update command.
type updateOp struct {
	q      bson.D
	filter *query.Filter
	upd    updater
	upsert bool
	multi  bool
}

func parseUpdateOp(env *aggregate.Env, d bson.D) (updateOp, error) {
	var op updateOp
	var u any
	var arrayFilters bson.A
	var haveQ, haveU bool
	for _, e := range d {
		switch e.Key {
		case "q":
			q, ok := e.Value.(bson.D)
			if !ok {
				return op, mongoerr.TypeMismatchf("BSON field 'update.updates.q' is the wrong type '%s', expected type 'object'", typeName(e.Value))
			}
			op.q, haveQ = q, true
		case "u":
			u, haveU = e.Value, true
		case "arrayFilters":
			arr, err := arrayFiltersArg("update.updates", e.Value)
			if err != nil {
				return op, err
			}
			arrayFilters = arr
		case "upsert":
			op.upsert = boolArg(e.Value)
		case "multi":
			op.multi = boolArg(e.Value)
		case "hint", "upsertSupplied", "sampleId":
			// A hint never changes an update's result; checkStmtHint checks the index exists.
		case "collation":
			if err := checkCollation(e.Value); err != nil {
				return op, err
			}
		case "c":
			return op, mongoerr.NotImplementedf("update statement option '%s'", e.Key)
		default:
			return op, unknownField("update.updates", e.Key)
		}
	}
	if !haveQ {
		return op, mongoerr.New(40414, "BSON field 'update.updates.q' is missing but a required field")
	}
	if !haveU {
		return op, mongoerr.New(40414, "BSON field 'update.updates.u' is missing but a required field")
	}
	upd, err := compileUpdater(env, "update.updates.u", u, arrayFilters)
	if err != nil {
		return op, err
	}
	op.upd = upd
	if op.multi && op.upd.IsReplacement() {
		return op, mongoerr.FailedToParsef("multi update is not supported for replacement-style update")
	}
	f, err := env.CompileFilter(op.q)
	if err != nil {
		return op, err
	}
	op.filter = f
	return op, nil
}

// applyUpdate runs one update statement under the write lock. pre, when not nil, is the
// document the statement upserts when nothing matches, prepared before the Write
// (prepareUpserts); pt, when not nil, its find planned before the Write (planPoints).
func applyUpdate(w *storage.Writer, db, coll string, op updateOp, pre *storage.PreparedDoc, pt *storage.PointLookup) (stmtOutcome, error) {
	limit := 1
	if op.multi {
		limit = 0
	}
	targets, err := findTargets(&w.Reader, db, coll, op.q, op.filter, limit, pt)
	if err != nil {
		return stmtOutcome{}, err
	}
	// A statement that fails counts in neither n nor nModified, as in mongod (whose per-statement
	// counters are only added on success).
	n, nModified := 0, 0
	for _, m := range targets {
		out, desc, changed, err := applyMatched(op.upd, op.filter, m.full())
		if err != nil {
			return stmtOutcome{}, err
		}
		n++
		if !changed {
			continue
		}
		if _, err := w.Replace(db, coll, m.doc, out, storageDesc(op.upd, desc)); err != nil {
			return stmtOutcome{}, err
		}
		nModified++
	}
	if len(targets) > 0 || !op.upsert {
		return stmtOutcome{n: n, nModified: nModified}, nil
	}
	if pre != nil {
		if _, err := w.InsertPrepared(db, coll, pre); err != nil {
			return stmtOutcome{}, err
		}
		return stmtOutcome{n: 1, upsert: true, upserted: pre.ID()}, nil
	}
	doc, err := upsertDoc(op.q, op.upd)
	if err != nil {
		return stmtOutcome{}, err
	}
	if _, err := w.Insert(db, coll, doc); err != nil {
		return stmtOutcome{}, err
	}
	return stmtOutcome{n: 1, upsert: true, upserted: doc[0].Value}, nil
}

// findTargets is findMatching of the statement, in one index lookup when its find was
// planned before the Write (pt) and the collection's indexes did not change since: the plan
// is then one full key of a unique index, so Find would visit exactly the document stored
// under it (storage.Reader.LookupPoint). Otherwise it is findMatching.
// The update, delete and findAndModify commands find their statements' documents with it.
func findTargets(rd *storage.Reader, db, coll string, q bson.D, filter *query.Filter, limit int, pt *storage.PointLookup) ([]matched, error) {
	if pt != nil {
		if doc, ok := rd.LookupPoint(db, coll, *pt); ok {
			var matches []matched
			var matchErr error
			if doc != nil {
				matchInto(&matches, &matchErr, filter, limit)(doc)
			}
			return matches, matchErr
		}
	}
	return findMatching(rd, db, coll, q, filter, limit)
}

// planPoints plans, before the Write and without the lock, the find of each statement whose
// filter's plan is one full key of a unique index (rollup's leaf and parent upserts: id,
// type and timestamp): the statement then finds its document with one lookup under the lock
// instead of planning there (issue 25: planning was most of the find, a third of the
// exclusive section). nil when no statement qualifies. q is a statement's filter.
func planPoints[T any](set *storage.IndexSet, ops []parsed[T], q func(op *T) bson.D) []*storage.PointLookup {
	var pts []*storage.PointLookup
	for i := range ops {
		if ops[i].err != nil {
			continue
		}
		pl, ok := set.Point(q(&ops[i].op))
		if !ok {
			continue
		}
		if pts == nil {
			pts = make([]*storage.PointLookup, len(ops))
		}
		pts[i] = &pl
	}
	return pts
}

// prepareUpserts builds and encodes, before the Write and without any lock, the document
// each single-document upsert inserts when nothing matches it: a function of the statement
// alone (its filter's equality fields and its update), so it does not depend on what the
// collection holds when the statement runs, and the engine's exclusive section is left with
// the find, the index updates and the oplog entry. For rollup's leaf writes, upserts of a new
// tick's keys, that is about 40% of the CPU the update command spent under the lock (issue
// 25). The document's keys for the collection's secondary indexes (set) are computed here
// too; the insert uses them only if the indexes are still the same. A statement that then
// matches a document does not use it; one whose document does not build or encode gets none
// and runs as before (giving the same error).
func prepareUpserts(set *storage.IndexSet, ops []parsed[updateOp]) []*storage.PreparedDoc {
	var pre []*storage.PreparedDoc
	for i, op := range ops {
		if op.err != nil || !op.op.upsert || op.op.multi {
			continue
		}
		doc, err := upsertDoc(op.op.q, op.op.upd)
		if err != nil {
			continue
		}
		p, err := set.Prepare(doc)
		if err != nil {
			continue
		}
		if pre == nil {
			pre = make([]*storage.PreparedDoc, len(ops))
		}
		pre[i] = p
	}
	return pre
}

func cmdUpdate(ctx context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	stmts, err := batchArg(r, "updates")
	if err != nil {
		return result{}, err
	}
	env, err := s.exprEnv(r)
	if err != nil {
		return result{}, err
	}
	ordered := orderedArg(r)
	// Parse outside the write lock; a statement that does not parse is a write error at its index.
	ops, err := parseAll(stmts, func(d bson.D) (updateOp, error) {
		op, err := parseUpdateOp(env, d)
		if err == nil {
			err = s.checkStmtHint(r.db, coll, d)
		}
		return op, err
	})
	if err != nil {
		return result{}, err
	}
	// The collection's indexes now, for the work below done without the lock; a statement
	// uses that work under the lock only if they are still the same (storage.IndexSet).
	var set *storage.IndexSet
	s.engine.Read(func(rd *storage.Reader) { set = rd.IndexSet(r.db, coll) })
	pre := prepareUpserts(set, ops)
	pts := planPoints(set, ops, func(op *updateOp) bson.D { return op.q })
	st, op, writeErrors, err := s.writeStatements(ctx, r, len(ops), ordered, func(w *storage.Writer, i int) (stmtOutcome, error) {
		if ops[i].err != nil {
			return stmtOutcome{}, ops[i].err
		}
		var p *storage.PreparedDoc
		if pre != nil {
			p = pre[i]
		}
		var pt *storage.PointLookup
		if pts != nil {
			pt = pts[i]
		}
		return applyUpdate(w, r.db, coll, ops[i].op, p, pt)
	})
	if err != nil {
		return result{}, err
	}
	f := []bson.E{{Key: "n", Value: int32(st.n)}, {Key: "nModified", Value: int32(st.nModified)}}
	if up := st.upsertedDocs(); up != nil {
		f = append(f, bson.E{Key: "upserted", Value: up})
	}
	return writeReply(op, writeErrors, f...), nil
}
