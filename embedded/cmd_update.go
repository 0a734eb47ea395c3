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

// applyUpdate runs one update statement under the write lock.
func applyUpdate(w *storage.Writer, db, coll string, op updateOp) (stmtOutcome, error) {
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
	doc, err := upsertDoc(op.q, op.upd)
	if err != nil {
		return stmtOutcome{}, err
	}
	if _, err := w.Insert(db, coll, doc); err != nil {
		return stmtOutcome{}, err
	}
	return stmtOutcome{n: 1, upsert: true, upserted: doc[0].Value}, nil
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
	st, op, writeErrors, err := s.writeStatements(ctx, r, len(ops), ordered, func(w *storage.Writer, i int) (stmtOutcome, error) {
		if ops[i].err != nil {
			return stmtOutcome{}, ops[i].err
		}
		return applyUpdate(w, r.db, coll, ops[i].op)
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
