package embedded

import (
	"context"

	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

func cmdCreate(ctx context.Context, s *Server, r *request) (result, error) {
	coll, err := collArg(r)
	if err != nil {
		return result{}, err
	}
	_, viewOn := r.arg("viewOn")
	if _, pipeline := r.arg("pipeline"); viewOn || pipeline {
		return result{}, mongoerr.NotImplementedf("views (create with viewOn)")
	}
	var opts storage.CollOptions
	if v, ok := r.arg("changeStreamPreAndPostImages"); ok {
		if opts.PreAndPostImages, err = preAndPostImagesArg(v, "create"); err != nil {
			return result{}, err
		}
	}
	// MongoDB 7.0 answers success when the collection already exists with identical options,
	// NamespaceExists when its options differ.
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		created, existing, err := w.CreateCollectionWith(r.db, coll, opts)
		if err == nil && !created && existing != opts {
			err = mongoerr.New(mongoerr.NamespaceExists, "Collection %s.%s already exists with different options", r.db, coll)
		}
		return err
	})
	if err != nil {
		return result{}, err
	}
	return result{opTime: op}, nil
}
