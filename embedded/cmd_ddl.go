package embedded

import (
	"context"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/query"
	"github.com/gameops/rollup/embedded/storage"
)

func cmdCreate(ctx context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	_, viewOn := r.arg("viewOn")
	if _, pipeline := r.arg("pipeline"); viewOn || pipeline {
		return result{}, mongoerr.NotImplementedf("views (create with viewOn)")
	}
	var opts storage.CollOptions
	if v, ok := r.arg("changeStreamPreAndPostImages"); ok {
		if opts.PreAndPostImages, err = preAndPostImagesArg(v, "create"); err != nil {
			return result{}, err
		}
	}
	// MongoDB 7.0 answers success when the collection already exists with identical options,
	// NamespaceExists when its options differ.
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		created, existing, err := w.CreateCollectionWith(r.db, coll, opts)
		if err == nil && !created && existing != opts {
			err = mongoerr.New(mongoerr.NamespaceExists, "Collection %s.%s already exists with different options", r.db, coll)
		}
		return err
	})
	if err != nil {
		return result{}, err
	}
	return result{opTime: op}, nil
}

func cmdDrop(ctx context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	var nIndexes int
	var existed bool
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		if info, ok := w.Collection(r.db, coll); ok {
			nIndexes = len(info.Indexes)
		}
		existed, err = w.DropCollection(r.db, coll)
		return err
	})
	if err != nil {
		return result{}, err
	}
	if !existed {
		// MongoDB 7.0 drops a missing collection successfully.
		return result{opTime: op}, nil
	}
	return result{fields: bson.D{{Key: "nIndexesWas", Value: int32(nIndexes)}, {Key: "ns", Value: r.db + "." + coll}}, opTime: op}, nil
}

func cmdDropDatabase(ctx context.Context, s *Server, r *request) (result, error) {
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error { return w.DropDatabase(r.db) })
	if err != nil {
		return result{}, err
	}
	return result{fields: bson.D{{Key: "dropped", Value: r.db}}, opTime: op}, nil
}

// parseIndexSpec validates one createIndexes entry; options outside the subset are refused.
func parseIndexSpec(v any) (storage.IndexSpec, error) {
	d, ok := v.(bson.D)
	if !ok {
		return storage.IndexSpec{}, mongoerr.TypeMismatchf("each index specification must be an object")
	}
	var spec storage.IndexSpec
	for _, e := range d {
		switch e.Key {
		case "key":
			k, ok := e.Value.(bson.D)
			if !ok || len(k) == 0 {
				return spec, mongoerr.New(mongoerr.CannotCreateIndex, "Index keys cannot be empty.")
			}
			spec.Key = k
		case "name":
			n, ok := e.Value.(string)
			if !ok || n == "" {
				return spec, mongoerr.New(mongoerr.CannotCreateIndex, "The index name must be a non-empty string")
			}
			spec.Name = n
		case "unique":
			spec.Unique = boolArg(e.Value)
		case "expireAfterSeconds":
			secs, err := expireAfterSecondsArg(e.Value, d)
			if err != nil {
				return spec, err
			}
			spec.TTL, spec.ExpireAfterSeconds = true, secs
		case "v", "background", "ns":
			// v is always 2; background is ignored since 4.2; ns is legacy.
		default:
			return spec, mongoerr.NotImplementedf("index option '%s'", e.Key)
		}
	}
	if spec.Key == nil {
		return spec, mongoerr.FailedToParsef("The 'key' field is a required property of an index specification")
	}
	if spec.Name == "" {
		return spec, mongoerr.FailedToParsef("The 'name' field is a required property of an index specification")
	}
	return spec, nil
}

// expireAfterSecondsArg reads a TTL index's expireAfterSeconds as createIndexes does: any
// number, truncated to an integer, within [0, storage.MaxExpireAfterSeconds].
func expireAfterSecondsArg(v any, spec bson.D) (int64, error) {
	f, ok := bsonval.ToFloat(v)
	if !ok {
		return 0, mongoerr.New(mongoerr.CannotCreateIndex, "TTL index 'expireAfterSeconds' option must be numeric, but received a type of '%s'. Index spec: %s",
			typeName(v), bsonval.Format(spec))
	}
	if math.IsNaN(f) || f > storage.MaxExpireAfterSeconds {
		return 0, mongoerr.New(mongoerr.InvalidOptions, "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number")
	}
	if f < 0 {
		return 0, mongoerr.New(mongoerr.InvalidOptions, "TTL index 'expireAfterSeconds' option cannot be less than 0")
	}
	return int64(f), nil
}

func cmdCreateIndexes(ctx context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	v, _ := r.arg("indexes")
	arr, ok := v.(bson.A)
	if !ok || len(arr) == 0 {
		return result{}, mongoerr.BadValuef("Must specify at least one index to create")
	}
	specs := make([]storage.IndexSpec, len(arr))
	for i, x := range arr {
		if specs[i], err = parseIndexSpec(x); err != nil {
			return result{}, err
		}
	}
	var before, after int
	var createdColl bool
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		info, ok := w.Collection(r.db, coll)
		if ok {
			before = len(info.Indexes)
		} else {
			if createdColl, err = w.CreateCollection(r.db, coll); err != nil {
				return err
			}
			before = 1
		}
		for _, spec := range specs {
			if _, err := w.CreateIndex(r.db, coll, spec); err != nil {
				return err
			}
		}
		info, _ = w.Collection(r.db, coll)
		after = len(info.Indexes)
		return nil
	})
	if err != nil {
		return result{opTime: op}, toMongoErr(err)
	}
	f := bson.D{
		{Key: "numIndexesBefore", Value: int32(before)},
		{Key: "numIndexesAfter", Value: int32(after)},
		{Key: "createdCollectionAutomatically", Value: createdColl},
	}
	if before == after {
		f = append(f, bson.E{Key: "note", Value: "all indexes already exist"})
	}
	return result{fields: f, opTime: op}, nil
}

func indexDoc(spec storage.IndexSpec) bson.D {
	d := bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: spec.Key}, {Key: "name", Value: spec.Name}}
	// The _id index is unique by nature; mongod does not list a unique field for it.
	if spec.Unique && spec.Name != "_id_" {
		d = append(d, bson.E{Key: "unique", Value: true})
	}
	if spec.TTL {
		d = append(d, bson.E{Key: "expireAfterSeconds", Value: int32(spec.ExpireAfterSeconds)})
	}
	return d
}

func cmdListIndexes(_ context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	var info storage.CollectionInfo
	var ok bool
	s.engine.Read(func(rd *storage.Reader) { info, ok = rd.Collection(r.db, coll) })
	if !ok {
		return result{}, mongoerr.New(mongoerr.NamespaceNotFound, "ns does not exist: %s.%s", r.db, coll)
	}
	docs, err := encodeAll(info.Indexes, indexDoc)
	if err != nil {
		return result{}, err
	}
	return result{fields: s.firstBatch(r.db+"."+coll, docs, cursorBatchSize(r), false)}, nil
}

// cursorBatchSize reads cursor.batchSize of a command that returns a cursor.
func cursorBatchSize(r *request) int64 {
	cv, _ := r.arg("cursor")
	if bs, ok := bsonval.Get(asDoc(cv), "batchSize"); ok {
		if n, ok := toInt64(bs); ok && n >= 0 {
			return n
		}
	}
	return defaultFirstBatch
}

func encodeAll[T any](items []T, toDoc func(T) bson.D) ([]bson.Raw, error) {
	out := make([]bson.Raw, 0, len(items))
	for _, it := range items {
		raw, err := bsonval.Encode(toDoc(it))
		if err != nil {
			return nil, mongoerr.New(mongoerr.InternalError, "encode: %v", err)
		}
		out = append(out, raw)
	}
	return out, nil
}

func cmdDropIndexes(ctx context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	idx, _ := r.arg("index")
	var nWas int
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		info, ok := w.Collection(r.db, coll)
		if !ok {
			return mongoerr.New(mongoerr.NamespaceNotFound, "ns not found %s.%s", r.db, coll)
		}
		nWas = len(info.Indexes)
		switch x := idx.(type) {
		case string:
			if x == "*" {
				return w.DropIndexes(r.db, coll)
			}
			return w.DropIndex(r.db, coll, x)
		case bson.A:
			for _, n := range x {
				name, ok := n.(string)
				if !ok {
					return mongoerr.TypeMismatchf("dropIndexes.index array must contain index names")
				}
				if err := w.DropIndex(r.db, coll, name); err != nil {
					return err
				}
			}
			return nil
		case bson.D:
			for _, spec := range info.Indexes {
				if bsonval.Compare(spec.Key, x) == 0 {
					return w.DropIndex(r.db, coll, spec.Name)
				}
			}
			return mongoerr.New(mongoerr.IndexNotFound, "can't find index with key: %v", x)
		default:
			return mongoerr.TypeMismatchf("dropIndexes.index must be a string, an array of strings or an index key")
		}
	})
	if err != nil {
		return result{opTime: op}, err
	}
	return result{fields: bson.D{{Key: "nIndexesWas", Value: int32(nWas)}}, opTime: op}, nil
}

// listArgs reads the options listDatabases and listCollections share: filter, a query over
// the entries they list (nil when absent or null), and nameOnly.
func listArgs(r *request) (filter *query.Filter, nameOnly bool, err error) {
	if f, ok := r.arg("filter"); ok && f != nil {
		if filter, err = query.CompileFilter(asDoc(f)); err != nil {
			return nil, false, err
		}
	}
	if v, ok := r.arg("nameOnly"); ok {
		nameOnly = boolArg(v)
	}
	return filter, nameOnly, nil
}

func cmdListCollections(_ context.Context, s *Server, r *request) (result, error) {
	filter, nameOnly, err := listArgs(r)
	if err != nil {
		return result{}, err
	}
	var infos []storage.CollectionInfo
	s.engine.Read(func(rd *storage.Reader) { infos = rd.Collections(r.db) })
	var docs []bson.Raw
	for _, c := range infos {
		d := bson.D{{Key: "name", Value: c.Name}, {Key: "type", Value: "collection"}}
		if !nameOnly {
			d = append(d,
				bson.E{Key: "options", Value: optionsDoc(c.Options)},
				bson.E{Key: "info", Value: bson.D{{Key: "readOnly", Value: false}, {Key: "uuid", Value: c.UUID}}},
				bson.E{Key: "idIndex", Value: bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "name", Value: "_id_"}}})
		}
		// Compiled without $expr, the filter cannot fail.
		if ok, _ := filter.Match(d); !ok {
			continue
		}
		raw, err := bsonval.Encode(d)
		if err != nil {
			return result{}, mongoerr.New(mongoerr.InternalError, "encode: %v", err)
		}
		docs = append(docs, raw)
	}
	return result{fields: s.firstBatch(r.db+".$cmd.listCollections", docs, cursorBatchSize(r), false)}, nil
}
