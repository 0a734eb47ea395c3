package embedded

import (
	"context"
	"errors"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/aggregate"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/query"
	"github.com/gameops/rollup/embedded/storage"
)

// maxWriteBatch is mongod's maxWriteBatchSize.
const maxWriteBatch = 100000

// toMongoErr converts storage errors to server errors (E11000 with keyPattern/keyValue).
func toMongoErr(err error) *mongoerr.Error {
	var dup *storage.DupKeyError
	if errors.As(err, &dup) {
		return dup.MongoError()
	}
	return mongoerr.As(err)
}

// writeErrorDoc renders one writeErrors entry, carrying the op's index in the command.
func writeErrorDoc(index int, err error) bson.D {
	e := toMongoErr(err)
	d := bson.D{{Key: "index", Value: int32(index)}, {Key: "code", Value: e.Code}}
	for _, f := range e.Extra {
		d = append(d, bson.E{Key: f.Key, Value: f.Value})
	}
	return append(d, bson.E{Key: "errmsg", Value: e.Msg})
}

// writeTotals accumulates the outcomes of a write command's statements.
type writeTotals struct {
	n, nModified int
	upserted     bson.A
}

func (t *writeTotals) add(i int, o stmtOutcome) {
	t.n += o.n
	t.nModified += o.nModified
	if o.upserted != nil {
		t.upserted = append(t.upserted, bson.D{{Key: "index", Value: int32(i)}, {Key: "_id", Value: o.upserted}})
	}
}

// writeStatements runs statements 0..n-1 of a write command under one engine write: each
// failing statement becomes a writeErrors entry at its index; ordered stops at the first.
//
// In a retryable write (r.retry set) a statement the session already executed is not run
// again: its remembered outcome is replayed. A statement that runs evaluates the
// onPrimaryTransactionalWrite fail point, which may fail it unapplied (before it runs) or,
// once it has written, stop the command and close the connection (r.closeConn) when the
// writes are durable.
func (s *Server) writeStatements(ctx context.Context, r *request, n int, ordered bool, run func(w *storage.Writer, i int) (stmtOutcome, error)) (writeTotals, bson.Timestamp, bson.A, error) {
	var tot writeTotals
	var writeErrors bson.A
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		for i := range n {
			if o, ok := r.retry.done(i); ok {
				tot.add(i, o)
				continue
			}
			var act txnWriteAction
			if r.retry != nil {
				act = s.fail.beforeTxnWrite(r)
			}
			var o stmtOutcome
			err := act.failErr
			if err == nil {
				before := w.Mutations()
				o, err = run(w, i)
				if r.retry != nil && w.Mutations() > before {
					act = s.fail.afterTxnWrite()
				}
			}
			if err == nil {
				tot.add(i, o)
				r.retry.record(i, o)
			} else if !act.closeConn {
				writeErrors = append(writeErrors, writeErrorDoc(i, err))
			}
			if act.closeConn {
				r.closeConn = true
				return nil
			}
			if err != nil && ordered {
				return nil
			}
		}
		return nil
	})
	return tot, op, writeErrors, err
}

// parsed is one statement of a write command, parsed outside the write lock; a statement that
// does not parse becomes a write error at its index when the statements run.
type parsed[T any] struct {
	op  T
	err error
}

// parseAll parses every statement. A field that MongoDB 7.0's command schema does not know
// (such as the 8.0 statement option sort) fails the whole command before any statement runs,
// as mongod's IDL parser does; that error is returned instead.
func parseAll[T any](stmts []bson.D, parse func(bson.D) (T, error)) ([]parsed[T], error) {
	out := make([]parsed[T], len(stmts))
	for i, d := range stmts {
		out[i].op, out[i].err = parse(d)
		if out[i].err != nil && mongoerr.Is(out[i].err, mongoerr.IDLUnknownField) {
			return nil, out[i].err
		}
	}
	return out, nil
}

// unknownField is mongod's answer to a field its command schema does not know.
func unknownField(where, key string) error {
	return mongoerr.New(mongoerr.IDLUnknownField, "BSON field '%s.%s' is an unknown field.", where, key)
}

// writeReply is the reply of a write command: its counters, then writeErrors when any.
func writeReply(op bson.Timestamp, writeErrors bson.A, fields ...bson.E) result {
	f := bson.D(fields)
	if writeErrors != nil {
		f = append(f, bson.E{Key: "writeErrors", Value: writeErrors})
	}
	return result{fields: f, opTime: op}
}

// batchArg returns the op documents of a write command (documents/updates/deletes).
func batchArg(r *request, key string) ([]bson.D, error) {
	v, ok := r.arg(key)
	if !ok {
		return nil, mongoerr.New(40414, "BSON field '%s.%s' is missing but a required field", r.name, key)
	}
	arr, ok := v.(bson.A)
	if !ok {
		return nil, mongoerr.TypeMismatchf("BSON field '%s.%s' is the wrong type '%s', expected type 'array'", r.name, key, typeName(v))
	}
	if len(arr) == 0 || len(arr) > maxWriteBatch {
		return nil, mongoerr.New(mongoerr.InvalidLength, "Write batch sizes must be between 1 and %d. Got %d operations.", maxWriteBatch, len(arr))
	}
	out := make([]bson.D, len(arr))
	for i, v := range arr {
		d, ok := v.(bson.D)
		if !ok {
			return nil, mongoerr.TypeMismatchf("BSON field '%s.%s.%d' is the wrong type '%s', expected type 'object'", r.name, key, i, typeName(v))
		}
		out[i] = d
	}
	return out, nil
}

func orderedArg(r *request) bool {
	if v, ok := r.arg("ordered"); ok {
		return boolArg(v)
	}
	return true
}

// withID returns doc with an _id as its first field, generating an ObjectID when absent.
func withID(doc bson.D) (bson.D, error) {
	for i, e := range doc {
		if e.Key != "_id" {
			continue
		}
		switch e.Value.(type) {
		case bson.A:
			return nil, mongoerr.New(mongoerr.InvalidIDField, "The '_id' value cannot be of type array")
		case bson.Regex:
			return nil, mongoerr.New(mongoerr.InvalidIDField, "can't use a regex for _id")
		case bson.Undefined:
			return nil, mongoerr.New(mongoerr.InvalidIDField, "can't use a undefined for _id")
		case bson.D:
			if err := checkIDDoc(e.Value.(bson.D)); err != nil {
				return nil, err
			}
		}
		if i == 0 {
			return doc, nil
		}
		out := make(bson.D, 0, len(doc))
		out = append(out, e)
		out = append(out, doc[:i]...)
		return append(out, doc[i+1:]...), nil
	}
	out := make(bson.D, 0, len(doc)+1)
	out = append(out, bson.E{Key: "_id", Value: bson.NewObjectID()})
	return append(out, doc...), nil
}

// checkIDDoc refuses an _id document holding $-prefixed field names at any depth, as MongoDB
// 5.0+ does (top-level $-prefixed fields elsewhere in a document are allowed); DBRef fields
// ($ref, $id, $db) are the exception.
func checkIDDoc(d bson.D) error {
	for _, e := range d {
		if strings.HasPrefix(e.Key, "$") && e.Key != "$ref" && e.Key != "$id" && e.Key != "$db" {
			return mongoerr.New(mongoerr.DollarPrefixedFieldName,
				"_id fields may not contain '$'-prefixed fields: %s is not valid for storage.", e.Key)
		}
		if sub, ok := e.Value.(bson.D); ok {
			if err := checkIDDoc(sub); err != nil {
				return err
			}
		}
	}
	return nil
}

func cmdInsert(ctx context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	docs, err := batchArg(r, "documents")
	if err != nil {
		return result{}, err
	}
	tot, op, writeErrors, err := s.writeStatements(ctx, r, len(docs), orderedArg(r), func(w *storage.Writer, i int) (stmtOutcome, error) {
		doc, err := withID(docs[i])
		if err == nil {
			_, err = w.Insert(r.db, coll, doc)
		}
		return stmtOutcome{n: 1}, err
	})
	if err != nil {
		return result{}, err
	}
	return writeReply(op, writeErrors, bson.E{Key: "n", Value: int32(tot.n)}), nil
}

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
			// A hint never changes results; the server picks its own index.
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

// checkCollation accepts only the simple collation; anything else is outside the subset.
func checkCollation(v any) error {
	d, ok := v.(bson.D)
	if !ok {
		return mongoerr.TypeMismatchf("collation must be an object")
	}
	if len(d) == 0 {
		return nil
	}
	if len(d) == 1 && d[0].Key == "locale" && d[0].Value == "simple" {
		return nil
	}
	return mongoerr.NotImplementedf("collations other than {locale: \"simple\"}")
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
	for _, d := range targets {
		out, desc, changed, err := applyMatched(op.upd, op.filter, d.D)
		if err != nil {
			return stmtOutcome{}, err
		}
		n++
		if !changed {
			continue
		}
		if _, err := w.Replace(db, coll, d, out, storageDesc(op.upd, desc)); err != nil {
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
	return stmtOutcome{n: 1, upserted: doc[0].Value}, nil
}

// upsertDoc builds the document an upsert inserts: the filter's equalities with the update
// applied (including $setOnInsert), or the replacement with the filter's _id.
func upsertDoc(q bson.D, upd updater) (bson.D, error) {
	seed, err := query.UpsertSeed(q)
	if err != nil {
		return nil, err
	}
	if upd.IsReplacement() {
		// Only the _id of the filter carries over into a replacement.
		var base bson.D
		for _, e := range seed {
			if e.Key == "_id" {
				base = bson.D{e}
			}
		}
		seed = base
	}
	out, _, _, err := upd.Apply(seed, true)
	if err != nil {
		return nil, err
	}
	return withID(out)
}

// storageDesc is the description an update is logged with: nil (a replace event) for a
// replacement document or a pipeline-style update mongod would log as a replacement.
func storageDesc(upd updater, d query.UpdateDescription) *storage.UpdateDesc {
	if upd.IsReplacement() || d.Replacement {
		return nil
	}
	sd := &storage.UpdateDesc{UpdatedFields: d.UpdatedFields, RemovedFields: d.RemovedFields, DottedPaths: d.DottedPaths}
	for _, ta := range d.TruncatedArrays {
		sd.TruncatedArrays = append(sd.TruncatedArrays, storage.TruncatedArray{Field: ta.Field, NewSize: ta.NewSize})
	}
	return sd
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
	ops, err := parseAll(stmts, func(d bson.D) (updateOp, error) { return parseUpdateOp(env, d) })
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
	ops, err := parseAll(stmts, func(d bson.D) (deleteOp, error) { return parseDeleteOp(env, d) })
	if err != nil {
		return result{}, err
	}
	tot, op, writeErrors, err := s.writeStatements(ctx, r, len(ops), ordered, func(w *storage.Writer, i int) (stmtOutcome, error) {
		if ops[i].err != nil {
			return stmtOutcome{}, ops[i].err
		}
		o := ops[i].op
		targets, err := findMatching(&w.Reader, r.db, coll, o.q, o.filter, int(o.limit))
		if err != nil {
			return stmtOutcome{}, err
		}
		for _, d := range targets {
			if err := w.Delete(r.db, coll, d); err != nil {
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
