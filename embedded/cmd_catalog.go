package embedded

import (
	"context"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

// Catalog commands change streams need: renameCollection, collMod and the collection option
// changeStreamPreAndPostImages (in create and collMod).

func cmdRenameCollection(ctx context.Context, s *Server, r *request) (result, error) {
	if r.db != "admin" {
		return result{}, mongoerr.New(mongoerr.Unauthorized, "renameCollection may only be run against the admin database.")
	}
	from, err := namespaceArg(r.body[0].Value, "renameCollection")
	if err != nil {
		return result{}, err
	}
	toV, ok := r.arg("to")
	if !ok {
		return result{}, mongoerr.New(40414, "BSON field 'renameCollection.to' is missing but a required field")
	}
	to, err := namespaceArg(toV, "to")
	if err != nil {
		return result{}, err
	}
	dropTarget := false
	if v, ok := r.arg("dropTarget"); ok {
		dropTarget = boolArg(v)
	}
	op, err := s.engine.Write(ctx, func(w *storage.Writer) error {
		return w.RenameCollection(from.DB, from.Coll, to, dropTarget)
	})
	if err != nil {
		return result{opTime: op}, err
	}
	return result{opTime: op}, nil
}

// namespaceArg parses a full "db.collection" namespace argument.
func namespaceArg(v any, field string) (storage.Namespace, error) {
	str, ok := v.(string)
	if !ok {
		return storage.Namespace{}, mongoerr.TypeMismatchf("BSON field 'renameCollection.%s' is the wrong type '%s', expected type 'string'", field, typeName(v))
	}
	db, coll, ok := strings.Cut(str, ".")
	if !ok || db == "" || coll == "" {
		return storage.Namespace{}, mongoerr.New(mongoerr.InvalidNamespace, "Invalid namespace specified '%s'", str)
	}
	if strings.HasPrefix(coll, "system.") || strings.ContainsAny(coll, "\x00$") {
		return storage.Namespace{}, mongoerr.New(mongoerr.IllegalOperation, "error with target namespace: Invalid collection name: %s", coll)
	}
	return storage.Namespace{DB: db, Coll: coll}, nil
}

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

// preAndPostImagesArg reads {enabled: <bool>}, the changeStreamPreAndPostImages option.
func preAndPostImagesArg(v any, cmd string) (bool, error) {
	d, ok := v.(bson.D)
	if !ok {
		return false, mongoerr.TypeMismatchf("BSON field '%s.changeStreamPreAndPostImages' is the wrong type '%s', expected type 'object'", cmd, typeName(v))
	}
	enabled, found := false, false
	for _, e := range d {
		if e.Key != "enabled" {
			return false, mongoerr.New(40415, "BSON field '%s.changeStreamPreAndPostImages.%s' is an unknown field.", cmd, e.Key)
		}
		b, ok := e.Value.(bool)
		if !ok {
			return false, mongoerr.TypeMismatchf("BSON field '%s.changeStreamPreAndPostImages.enabled' is the wrong type '%s', expected type 'bool'", cmd, typeName(e.Value))
		}
		enabled, found = b, true
	}
	if !found {
		return false, mongoerr.New(40414, "BSON field '%s.changeStreamPreAndPostImages.enabled' is missing but a required field", cmd)
	}
	return enabled, nil
}

// optionsDoc renders collection options as listCollections and change events show them.
func optionsDoc(o storage.CollOptions) bson.D {
	if !o.PreAndPostImages {
		return bson.D{}
	}
	return bson.D{{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}
}
