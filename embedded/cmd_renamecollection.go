package embedded

import (
	"context"
	"strings"

	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

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
