package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/aggregate"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/query"
	"github.com/gameops/rollup/embedded/storage"
)

type deleteOp struct {
	q      bson.D
	filter *query.Filter
	limit  int64
}

func parseDeleteOp(env *aggregate.Env, d bson.D) (deleteOp, error) {
	op := deleteOp{limit: -1}
	var haveQ bool
	for _, e := range d {
		switch e.Key {
		case "q":
			q, ok := e.Value.(bson.D)
			if !ok {
				return op, mongoerr.TypeMismatchf("BSON field 'delete.deletes.q' is the wrong type '%s', expected type 'object'", typeName(e.Value))
			}
			op.q, haveQ = q, true
		case "limit":
			n, ok := toInt64(e.Value)
			if !ok || (n != 0 && n != 1) {
				return op, mongoerr.FailedToParsef("The limit field in delete objects must be 0 or 1. Got %v", e.Value)
			}
			op.limit = n
		case "hint", "sampleId":
		case "collation":
			if err := checkCollation(e.Value); err != nil {
				return op, err
			}
		default:
			return op, unknownField("delete.deletes", e.Key)
		}
	}
	if !haveQ {
		return op, mongoerr.New(40414, "BSON field 'delete.deletes.q' is missing but a required field")
	}
	if op.limit < 0 {
		return op, mongoerr.New(40414, "BSON field 'delete.deletes.limit' is missing but a required field")
	}
	f, err := env.CompileFilter(op.q)
	if err != nil {
		return op, err
	}
	op.filter = f
	return op, nil
}

func cmdDelete(ctx context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	stmts, err := batchArg(r, "deletes")
	if err != nil {
		return result{}, err
	}
	env, err := s.exprEnv(r)
	if err != nil {
		return result{}, err
	}
	ordered := orderedArg(r)
	ops, err := parseAll(stmts, func(d bson.D) (deleteOp, error) {
		op, err := parseDeleteOp(env, d)
		if err == nil {
			err = s.checkStmtHint(r.db, coll, d)
		}
		return op, err
	})
	if err != nil {
		return result{}, err
	}
	// Each statement's find planned without the lock, as the update command's (planPoints).
	var set *storage.IndexSet
	s.engine.Read(func(rd *storage.Reader) { set = rd.IndexSet(r.db, coll) })
	pts := planPoints(set, ops, func(op *deleteOp) bson.D { return op.q })
	tot, op, writeErrors, err := s.writeStatements(ctx, r, len(ops), ordered, func(w *storage.Writer, i int) (stmtOutcome, error) {
		if ops[i].err != nil {
			return stmtOutcome{}, ops[i].err
		}
		o := ops[i].op
		var pt *storage.PointLookup
		if pts != nil {
			pt = pts[i]
		}
		targets, err := findTargets(&w.Reader, r.db, coll, o.q, o.filter, int(o.limit), pt)
		if err != nil {
			return stmtOutcome{}, err
		}
		for _, m := range targets {
			if err := w.Delete(r.db, coll, m.doc); err != nil {
				return stmtOutcome{}, err
			}
		}
		return stmtOutcome{n: len(targets)}, nil
	})
	if err != nil {
		return result{}, err
	}
	return writeReply(op, writeErrors, bson.E{Key: "n", Value: int32(tot.n)}), nil
}
