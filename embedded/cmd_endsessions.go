package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
)

func cmdEndSessions(_ context.Context, s *Server, r *request) (result, error) {
	ids, ok := r.body[0].Value.(bson.A)
	if !ok {
		return result{}, mongoerr.TypeMismatchf("endSessions takes an array of session ids")
	}
	for _, id := range ids {
		s.sessions.end(asDoc(id))
	}
	return result{}, nil
}
