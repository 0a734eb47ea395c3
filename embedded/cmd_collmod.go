package embedded

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/storage"
)

func cmdCollMod(ctx context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	var opts *storage.CollOptions
	if v, ok := r.arg("changeStreamPreAndPostImages"); ok {
		enabled, err := preAndPostImagesArg(v, "collMod")
		if err != nil {
			return result{}, err
		}
		opts = &storage.CollOptions{PreAndPostImages: enabled}
	}
	index, hasIndex := r.arg("index")
	var fields bson.D
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		if hasIndex {
			var err error
			if fields, err = collModIndex(w, r.db, coll, index); err != nil {
				return err
			}
			if opts == nil {
				return nil
			}
		}
		return w.CollMod(r.db, coll, opts)
	})
	if err != nil {
		return result{opTime: op}, err
	}
	return result{fields: fields, opTime: op}, nil
}
