package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

func cmdGetParameter(_ context.Context, s *Server, r *request) (result, error) {
	known := bson.D{
		{Key: "featureCompatibilityVersion", Value: bson.D{{Key: "version", Value: "7.0"}}},
		{Key: "enableTestCommands", Value: s.cfg.EnableTestCommands},
		{Key: "maxBSONDepth", Value: int32(200)},
	}
	arg := r.body[0].Value
	if str, ok := arg.(string); ok && str == "*" {
		return result{fields: known}, nil
	}
	var out bson.D
	for _, e := range r.body[1:] {
		if isGenericField(e.Key) {
			continue
		}
		v, ok := bsonval.Get(known, e.Key)
		if !ok {
			return result{}, mongoerr.NotImplementedf("getParameter '%s'", e.Key)
		}
		out = append(out, bson.E{Key: e.Key, Value: v})
	}
	if len(out) == 0 {
		return result{}, mongoerr.New(mongoerr.InvalidOptions, "no option found to get")
	}
	return result{fields: out}, nil
}
