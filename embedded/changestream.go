package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
)

// changeStream is the state of a $changeStream cursor.
type changeStream struct{}

func (s *Server) openChangeStream(_ context.Context, _ *request, _ []bson.D, _ int64) (result, error) {
	return result{}, mongoerr.NotImplementedf("stage '$changeStream'")
}

func (s *Server) changeStreamGetMore(_ context.Context, _ *cursor, _ *request, _ int64) (result, error) {
	return result{}, mongoerr.NotImplementedf("stage '$changeStream'")
}
