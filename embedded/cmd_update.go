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
// (prepareUpserts).
func applyUpdate(w *storage.Writer, db, coll string, op updateOp, pre *storage.PreparedDoc) (stmtOutcome, error) {
	limit := 1
	if op.multi {
		limit = 0
	}
	targets, err := findMatching(&w.Reader, db, coll, op.q, op.filter, limit)
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

// prepareUpserts builds and encodes, before the Write and without any lock, the document
// each single-document upsert inserts when nothing matches it: a function of the statement
// alone (its filter's equality fields and its update), so it does not depend on what the
// collection holds when the statement runs, and the engine's exclusive section is left with
// the find, the index updates and the oplog entry. For rollup's leaf writes, upserts of a new
// tick's keys, that is about 40% of the CPU the update command spent under the lock (issue
// 25). A statement that then matches a document does not use it; one whose document does not
// build or encode gets none and runs as before (giving the same error).
func prepareUpserts(ops []parsed[updateOp]) []*storage.PreparedDoc {
	var pre []*storage.PreparedDoc
	for i, op := range ops {
		if op.err != nil || !op.op.upsert || op.op.multi {
			continue
		}
		doc, err := upsertDoc(op.op.q, op.op.upd)
		if err != nil {
			continue
		}
		p, err := storage.PrepareDoc(doc)
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
	pre := prepareUpserts(ops)
	st, op, writeErrors, err := s.writeStatements(ctx, r, len(ops), ordered, func(w *storage.Writer, i int) (stmtOutcome, error) {
		if ops[i].err != nil {
			return stmtOutcome{}, ops[i].err
		}
		var p *storage.PreparedDoc
		if pre != nil {
			p = pre[i]
		}
		return applyUpdate(w, r.db, coll, ops[i].op, p)
	})
	if err != nil {
		return result{}, err
	}
	f := []bson.E{{Key: "n", Value: int32(st.n)}, {Key: "nModified", Value: int32(st.nModified)}}
	if st.upserted != nil {
		f = append(f, bson.E{Key: "upserted", Value: st.upserted})
	}
	return writeReply(op, writeErrors, f...), nil
}
