package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/storage"
)

func cmdDropDatabase(ctx context.Context, s *Server, r *request) (result, error) {
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error { return w.DropDatabase(r.db) })
	if err != nil {
		return result{}, err
	}
	return result{fields: bson.D{{Key: "dropped", Value: r.db}}, opTime: op}, nil
}
