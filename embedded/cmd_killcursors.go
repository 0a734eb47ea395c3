package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
)

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
