package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

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
