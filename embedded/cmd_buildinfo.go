package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func cmdBuildInfo(context.Context, *Server, *request) (result, error) {
	return result{fields: bson.D{
		{Key: "version", Value: serverVersion},
		{Key: "gitVersion", Value: "rollup-embedded"},
		{Key: "versionArray", Value: bson.A{int32(7), int32(0), int32(0), int32(0)}},
		{Key: "bits", Value: int32(64)},
		{Key: "debug", Value: false},
		{Key: "maxBsonObjectSize", Value: int32(16 * 1024 * 1024)},
		{Key: "storageEngines", Value: bson.A{"rollup-embedded"}},
		{Key: "modules", Value: bson.A{}},
	}}, nil
}
