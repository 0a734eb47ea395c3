package embedded

import (
	"context"

	"github.com/gameops/rollup/embedded/mongoerr"
)

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
