package embedded

import (
	"context"
	"errors"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

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

// writeTotals accumulates the outcomes of a write command's statements (under the engine's
// lock: the reply's documents are built after it, upsertedDocs).
type writeTotals struct {
	n, nModified int
	upserts      []upsertAt
}

// upsertAt is the statement index and _id of an upsert that inserted.
type upsertAt struct {
	i  int
	id any
}

func (t *writeTotals) add(i int, o stmtOutcome) {
	t.n += o.n
	t.nModified += o.nModified
	if o.upsert {
		t.upserts = append(t.upserts, upsertAt{i: i, id: o.upserted})
	}
}

// upsertedDocs is the reply's upserted array (nil when nothing was upserted).
func (t *writeTotals) upsertedDocs() bson.A {
	if len(t.upserts) == 0 {
		return nil
	}
	out := make(bson.A, len(t.upserts))
	for k, u := range t.upserts {
		out[k] = bson.D{{Key: "index", Value: int32(u.i)}, {Key: "_id", Value: u.id}}
	}
	return out
}

// writeStatements runs statements 0..n-1 of a write command under one engine write: each
// failing statement becomes a writeErrors entry at its index; ordered stops at the first. A
// command of more than yieldEvery statements lets the small writes waiting for the lock in
// between every yieldEvery of them (storage.Writer.Yield), as mongod yields between the
// statements of a write command, which is not atomic either.
//
// In a retryable write (r.retry set) a statement the session already executed is not run
// again: its remembered outcome is replayed. Statements that run evaluate the
// onPrimaryTransactionalWrite fail point as mongod does: before each statement when it fails
// writes unapplied, and after each write unit once it has written, which may stop the command
// and close the connection (r.closeConn) when the writes are durable. mongod's write unit is
// one update or delete statement, but a batch of up to insertBatchSize inserts: an insertMany
// whose reply is lost has then applied every document of the batch, and the driver's retry
// replays them all instead of writing the rest and firing the fail point again.
func (s *Server) writeStatements(ctx context.Context, r *request, n int, ordered bool, run func(w *storage.Writer, i int) (stmtOutcome, error)) (writeTotals, bson.Timestamp, bson.A, error) {
	var tot writeTotals
	var writeErrors bson.A
	unitEnd := func(i int) bool { return r.name != "insert" || i == n-1 || (i+1)%insertBatchSize == 0 }
	turn, err := s.turns.take(ctx, n)
	if err != nil {
		return tot, bson.Timestamp{}, nil, err
	}
	defer turn()
	lastHold := (n - 1) / yieldEvery * yieldEvery // the first statement of the last hold
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		wrote := false // a statement of the current write unit wrote
		for i := range n {
			if i > 0 && i%yieldEvery == 0 {
				// Between holds of a large command: see yieldEvery.
				if err := w.Yield(s.turns.letSmallIn); err != nil {
					return err
				}
			}
			if i == lastHold {
				turn() // under the lock, in the command's last hold: see writeTurns
			}
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
				wrote = wrote || w.Mutations() > before
				if r.retry != nil && wrote && unitEnd(i) {
					act, wrote = s.fail.afterTxnWrite(), false
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

// insertBatchSize is mongod's internalInsertMaxBatchSize: the inserts of one write unit.
const insertBatchSize = 64

// parsed is one statement of a write command, parsed outside the write lock; a statement that
// does not parse becomes a write error at its index when the statements run.
type parsed[T any] struct {
	op  T
	err error
}

// parseAll parses every statement. Some errors fail the whole command before any statement
// runs, and are returned instead (failsCommand).
func parseAll[T any](stmts []bson.D, parse func(bson.D) (T, error)) ([]parsed[T], error) {
	out := make([]parsed[T], len(stmts))
	for i, d := range stmts {
		out[i].op, out[i].err = parse(d)
		if out[i].err != nil && failsCommand(out[i].err) {
			return nil, out[i].err
		}
	}
	return out, nil
}

// failsCommand reports a statement's parse error that fails the whole write command (ok: 0)
// instead of being a write error at its index: a field MongoDB 7.0's command schema does not
// know (such as the 8.0 statement option sort), as mongod's IDL parser does; an update
// pipeline's unknown operator, as mongod does; and anything the server does not implement,
// so that no statement of a command it cannot run in full is applied.
func failsCommand(err error) bool {
	return mongoerr.Is(err, mongoerr.IDLUnknownField) || mongoerr.Is(err, mongoerr.InvalidPipelineOperator) ||
		mongoerr.Is(err, mongoerr.NotImplemented)
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
