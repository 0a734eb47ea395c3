package embedded

import (
	"context"
	"math"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/query"
	"github.com/gameops/rollup/embedded/storage"
)

// defaultFirstBatch is mongod's default number of documents in a first batch.
const defaultFirstBatch = 101

var findFields = []string{"filter", "sort", "projection", "skip", "limit", "batchSize", "singleBatch",
	"hint", "noCursorTimeout", "allowPartialResults", "collation", "allowDiskUse", "let"}

// findArgs is a parsed find command.
type findArgs struct {
	q           bson.D
	filter      *query.Filter
	sort        *query.Sort
	proj        *query.Projection
	skip, limit int64
	batchSize   int64
	singleBatch bool
}

func nonNegInt(r *request, key string) (int64, error) {
	v, ok := r.arg(key)
	if !ok || v == nil {
		return 0, nil
	}
	n, ok := toInt64(v)
	if !ok {
		return 0, mongoerr.TypeMismatchf("BSON field '%s.%s' is the wrong type '%s', expected types '[long, int, decimal, double]'", r.name, key, typeName(v))
	}
	if n < 0 {
		return 0, mongoerr.BadValuef("BSON field '%s' value must be >= 0, actual value '%d'", key, n)
	}
	return n, nil
}

func (s *Server) parseFind(r *request) (findArgs, error) {
	var a findArgs
	env, err := s.exprEnv(r)
	if err != nil {
		return a, err
	}
	if v, ok := r.arg("filter"); ok && v != nil {
		d, ok := v.(bson.D)
		if !ok {
			return a, mongoerr.TypeMismatchf("BSON field 'find.filter' is the wrong type '%s', expected type 'object'", typeName(v))
		}
		a.q = d
	}
	if a.filter, err = env.CompileFilter(a.q); err != nil {
		return a, err
	}
	if v, ok := r.arg("sort"); ok && len(asDoc(v)) > 0 {
		if a.sort, err = query.CompileSort(asDoc(v)); err != nil {
			return a, err
		}
	}
	if v, ok := r.arg("projection"); ok && len(asDoc(v)) > 0 {
		if a.proj, err = query.CompileProjection(asDoc(v)); err != nil {
			return a, err
		}
	}
	if a.skip, err = nonNegInt(r, "skip"); err != nil {
		return a, err
	}
	if a.limit, err = nonNegInt(r, "limit"); err != nil {
		return a, err
	}
	if a.batchSize, err = nonNegInt(r, "batchSize"); err != nil {
		return a, err
	}
	if _, ok := r.arg("batchSize"); !ok {
		a.batchSize = defaultFirstBatch
	}
	if v, ok := r.arg("singleBatch"); ok {
		a.singleBatch = boolArg(v)
	}
	if v, ok := r.arg("collation"); ok {
		if err := checkCollation(v); err != nil {
			return a, err
		}
	}
	return a, nil
}

// runFind evaluates a find over a consistent view and returns the result documents encoded.
func (s *Server) runFind(db, coll string, a findArgs) ([]bson.Raw, error) {
	var docs []*storage.Doc
	stopAt := 0
	if a.sort == nil && a.limit > 0 {
		stopAt = int(min(a.skip+a.limit, math.MaxInt32))
	}
	var err error
	s.engine.Read(func(rd *storage.Reader) { docs, err = findMatching(rd, db, coll, a.q, a.filter, stopAt) })
	if err != nil {
		return nil, err
	}
	if a.sort != nil {
		sort.SliceStable(docs, func(i, j int) bool { return a.sort.Compare(docs[i].D, docs[j].D) < 0 })
	}
	if a.skip > 0 {
		if a.skip >= int64(len(docs)) {
			docs = nil
		} else {
			docs = docs[a.skip:]
		}
	}
	if a.limit > 0 && int64(len(docs)) > a.limit {
		docs = docs[:a.limit]
	}
	out := make([]bson.Raw, len(docs))
	for i, d := range docs {
		if a.proj == nil {
			out[i] = d.Raw
			continue
		}
		raw, err := bsonval.Encode(a.proj.Apply(d.D))
		if err != nil {
			return nil, mongoerr.New(mongoerr.InternalError, "encode projection: %v", err)
		}
		out[i] = raw
	}
	return out, nil
}

func cmdFind(_ context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	a, err := s.parseFind(r)
	if err != nil {
		return result{}, err
	}
	docs, err := s.runFind(r.db, coll, a)
	if err != nil {
		return result{}, err
	}
	return result{fields: s.firstBatch(r.db+"."+coll, docs, a.batchSize, a.singleBatch)}, nil
}

// firstBatch returns the first batch of docs and registers a cursor for the rest.
func (s *Server) firstBatch(ns string, docs []bson.Raw, batchSize int64, single bool) bson.D {
	c := &cursor{ns: ns, docs: docs}
	batch := c.nextBatch(int(batchSize))
	var id int64
	if !single && !c.exhausted() {
		id = s.cursors.add(c)
	}
	return cursorReply(id, ns, "firstBatch", batch)
}

func cmdGetMore(ctx context.Context, s *Server, r *request) (result, error) {
	id, ok := r.body[0].Value.(int64)
	if !ok {
		return result{}, mongoerr.TypeMismatchf("BSON field 'getMore.getMore' is the wrong type '%s', expected type 'long'", typeName(r.body[0].Value))
	}
	collV, _ := r.arg("collection")
	coll, ok := collV.(string)
	if !ok {
		return result{}, mongoerr.TypeMismatchf("BSON field 'getMore.collection' is the wrong type '%s', expected type 'string'", typeName(collV))
	}
	batchSize, err := nonNegInt(r, "batchSize")
	if err != nil {
		return result{}, err
	}
	ns := r.db + "." + coll
	c, err := s.cursors.take(id, ns)
	if err != nil {
		return result{}, err
	}
	if err := s.fail.onGetMore(r.conn); err != nil {
		// The cursor is not put back: a getMore that fails kills its cursor, as in mongod.
		return result{}, c.getMoreError(err)
	}
	if c.stream != nil {
		res, err := s.changeStreamGetMore(ctx, c, r, batchSize)
		return res, c.getMoreError(err)
	}
	batch := c.nextBatch(int(batchSize))
	if c.exhausted() {
		id = 0
	} else {
		s.cursors.put(c)
	}
	return result{fields: cursorReply(id, ns, "nextBatch", batch)}, nil
}

func cmdKillCursors(_ context.Context, s *Server, r *request) (result, error) {
	v, _ := r.arg("cursors")
	arr, ok := v.(bson.A)
	if !ok {
		return result{}, mongoerr.TypeMismatchf("BSON field 'killCursors.cursors' is the wrong type '%s', expected type 'array'", typeName(v))
	}
	ids := make([]int64, 0, len(arr))
	for _, x := range arr {
		id, ok := x.(int64)
		if !ok {
			return result{}, mongoerr.TypeMismatchf("BSON field 'killCursors.cursors' must contain longs")
		}
		ids = append(ids, id)
	}
	killed, notFound := s.cursors.kill(ids)
	return result{fields: bson.D{
		{Key: "cursorsKilled", Value: int64sToA(killed)},
		{Key: "cursorsNotFound", Value: int64sToA(notFound)},
		{Key: "cursorsAlive", Value: bson.A{}},
		{Key: "cursorsUnknown", Value: bson.A{}},
	}}, nil
}

func int64sToA(ids []int64) bson.A {
	a := bson.A{}
	for _, id := range ids {
		a = append(a, id)
	}
	return a
}

func cmdCount(_ context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	env, err := s.exprEnv(r)
	if err != nil {
		return result{}, err
	}
	var a findArgs
	if v, ok := r.arg("query"); ok && v != nil {
		a.q = asDoc(v)
	}
	if a.filter, err = env.CompileFilter(a.q); err != nil {
		return result{}, err
	}
	if a.skip, err = nonNegInt(r, "skip"); err != nil {
		return result{}, err
	}
	if v, ok := r.arg("limit"); ok {
		n, ok := toInt64(v)
		if !ok {
			return result{}, mongoerr.TypeMismatchf("count.limit must be a number")
		}
		if n < 0 {
			n = -n
		}
		a.limit = n
	}
	if v, ok := r.arg("collation"); ok {
		if err := checkCollation(v); err != nil {
			return result{}, err
		}
	}
	var n int64
	if len(a.q) == 0 && a.skip == 0 && a.limit == 0 {
		s.engine.Read(func(rd *storage.Reader) { n = int64(rd.Count(r.db, coll)) })
	} else {
		docs, err := s.runFind(r.db, coll, a)
		if err != nil {
			return result{}, err
		}
		n = int64(len(docs))
	}
	return result{fields: bson.D{{Key: "n", Value: intValue(n)}}}, nil
}

// intValue returns n as int32 when it fits, as mongod replies do.
func intValue(n int64) any {
	if n >= -1<<31 && n < 1<<31 {
		return int32(n)
	}
	return n
}

func cmdDistinct(_ context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	keyV, _ := r.arg("key")
	key, ok := keyV.(string)
	if !ok {
		return result{}, mongoerr.TypeMismatchf("BSON field 'distinct.key' is the wrong type '%s', expected type 'string'", typeName(keyV))
	}
	env, err := s.exprEnv(r)
	if err != nil {
		return result{}, err
	}
	var a findArgs
	if v, ok := r.arg("query"); ok && v != nil {
		a.q = asDoc(v)
	}
	if a.filter, err = env.CompileFilter(a.q); err != nil {
		return result{}, err
	}
	if v, ok := r.arg("collation"); ok {
		if err := checkCollation(v); err != nil {
			return result{}, err
		}
	}
	var docs []*storage.Doc
	s.engine.Read(func(rd *storage.Reader) { docs, err = findMatching(rd, r.db, coll, a.q, a.filter, 0) })
	if err != nil {
		return result{}, err
	}
	var values []any
	for _, d := range docs {
		values = appendPathValues(values, d.D, key)
	}
	sort.SliceStable(values, func(i, j int) bool { return bsonval.Compare(values[i], values[j]) < 0 })
	out := bson.A{}
	for i, v := range values {
		if i > 0 && bsonval.Compare(values[i-1], v) == 0 {
			continue
		}
		out = append(out, v)
	}
	return result{fields: bson.D{{Key: "values", Value: out}}}, nil
}

// appendPathValues collects the values at a dotted path for distinct: arrays along the path
// fan out, and an array at the end contributes its elements.
func appendPathValues(dst []any, v any, path string) []any {
	if path == "" {
		if arr, ok := v.(bson.A); ok {
			return append(dst, arr...)
		}
		return append(dst, v)
	}
	head, rest := path, ""
	for i := 0; i < len(path); i++ {
		if path[i] == '.' {
			head, rest = path[:i], path[i+1:]
			break
		}
	}
	switch x := v.(type) {
	case bson.D:
		if f, ok := bsonval.Get(x, head); ok {
			return appendPathValues(dst, f, rest)
		}
	case bson.A:
		for _, e := range x {
			if d, ok := e.(bson.D); ok {
				dst = appendPathValues(dst, d, path)
			}
		}
	}
	return dst
}

func cmdAggregate(ctx context.Context, s *Server, r *request) (result, error) {
	pv, _ := r.arg("pipeline")
	arr, ok := pv.(bson.A)
	if !ok {
		return result{}, mongoerr.TypeMismatchf("BSON field 'aggregate.pipeline' is the wrong type '%s', expected type 'array'", typeName(pv))
	}
	stages := make([]bson.D, len(arr))
	for i, v := range arr {
		d, ok := v.(bson.D)
		if !ok {
			return result{}, mongoerr.TypeMismatchf("Each element of the 'pipeline' array must be an object")
		}
		stages[i] = d
	}
	if v, ok := r.arg("explain"); ok && boolArg(v) {
		return result{}, mongoerr.NotImplementedf("aggregate option 'explain'")
	}
	curV, ok := r.arg("cursor")
	if !ok {
		return result{}, mongoerr.FailedToParsef("The 'cursor' option is required, except for aggregate with the explain argument")
	}
	batchSize := int64(defaultFirstBatch)
	if bs, ok := bsonval.Get(asDoc(curV), "batchSize"); ok {
		n, ok := toInt64(bs)
		if !ok || n < 0 {
			return result{}, mongoerr.BadValuef("cursor.batchSize must be a non-negative integer")
		}
		batchSize = n
	}
	if v, ok := r.arg("collation"); ok {
		if err := checkCollation(v); err != nil {
			return result{}, err
		}
	}
	if len(stages) > 0 && len(stages[0]) > 0 && stages[0][0].Key == "$changeStream" {
		return s.openChangeStream(ctx, r, stages, batchSize)
	}
	coll, isColl := r.body[0].Value.(string)
	if isColl {
		if _, err := collArg(r); err != nil {
			return result{}, err
		}
	} else if n, ok := toInt64(r.body[0].Value); !ok || n != 1 {
		return result{}, mongoerr.FailedToParsef("Invalid command format: the 'aggregate' field must specify a collection name or 1")
	}
	env, err := s.exprEnv(r)
	if err != nil {
		return result{}, err
	}
	p, err := env.Compile(stages)
	if err != nil {
		return result{}, err
	}
	ns := r.db + "." + coll
	if !isColl {
		// A database-level aggregate reads no collection: its input comes from $documents.
		if p.Documents() == nil {
			first := "an empty pipeline"
			if len(stages) > 0 && len(stages[0]) > 0 {
				first = "'" + stages[0][0].Key + "'"
			}
			return result{}, mongoerr.New(mongoerr.InvalidNamespace, "{aggregate: 1} is not valid for %s; a collection is required.", first)
		}
		ns = r.db + ".$cmd.aggregate"
	} else if p.Documents() != nil {
		return result{}, mongoerr.New(mongoerr.InvalidNamespace, "$documents' is only valid with a database-level aggregate ({aggregate: 1})")
	}
	if o := p.Output(); o != nil {
		rc, _ := r.arg("readConcern")
		if lvl, _ := bsonval.Get(asDoc(rc), "level"); lvl == "linearizable" {
			return result{}, mongoerr.New(mongoerr.InvalidOptions, "%s cannot be used with a 'linearizable' read concern level", o.Stage)
		}
	}
	// MongoDB 7.0 treats a missing allowDiskUse as true.
	allowDisk := true
	if v, ok := r.arg("allowDiskUse"); ok {
		allowDisk = boolArg(v)
	}
	p.SetAllowDiskUse(allowDisk)
	// Collect the source under the read lock (documents are immutable), run the pipeline after.
	src := p.Documents()
	if isColl {
		lead := p.LeadingMatch()
		s.engine.Read(func(rd *storage.Reader) {
			rd.Find(r.db, coll, lead, func(d *storage.Doc) bool {
				src = append(src, d.D)
				return true
			})
		})
	}
	out, err := p.Run(func(yield func(bson.D) bool) {
		for _, d := range src {
			if !yield(d) {
				return
			}
		}
	})
	if err != nil {
		return result{}, err
	}
	if o := p.Output(); o != nil {
		op, err := s.writeOutput(ctx, r.db, o, out)
		if err != nil {
			return result{opTime: op}, err
		}
		return result{fields: cursorReply(0, ns, "firstBatch", bson.A{}), opTime: op}, nil
	}
	raws := make([]bson.Raw, len(out))
	for i, d := range out {
		raw, err := bsonval.Encode(d)
		if err != nil {
			return result{}, mongoerr.New(mongoerr.InternalError, "encode aggregate result: %v", err)
		}
		raws[i] = raw
	}
	return result{fields: s.firstBatch(ns, raws, batchSize, false)}, nil
}
