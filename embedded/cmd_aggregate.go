package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

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
	if err := s.checkHint(r); err != nil {
		return result{}, err
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
	// Collect the source from a consistent view (a long scan releases the read lock and reads a
	// point-in-time clone; documents are immutable), run the pipeline after.
	src := p.Documents()
	if isColl {
		lead := p.LeadingMatch()
		s.engine.ReadYielding(func(rd *storage.Reader) {
			rd.Find(r.db, coll, lead, func(d *storage.Doc) bool {
				src = append(src, d.D())
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
		// A pipeline that writes answers its write concern as insert does.
		return result{fields: cursorReply(0, ns, "firstBatch", bson.A{}), opTime: op, wcErr: r.wc.check()}, nil
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
