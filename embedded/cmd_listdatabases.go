package embedded

import (
	"context"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

func cmdListDatabases(_ context.Context, s *Server, r *request) (result, error) {
	if r.db != "admin" {
		return result{}, mongoerr.New(mongoerr.Unauthorized, "listDatabases may only be run against the admin database.")
	}
	filter, nameOnly, err := listArgs(r)
	if err != nil {
		return result{}, err
	}
	var dbs bson.A
	var total int64
	s.engine.Read(func(rd *storage.Reader) {
		for _, d := range withAdmin(rd.Databases()) {
			doc := bson.D{{Key: "name", Value: d.Name}}
			if !nameOnly {
				doc = append(doc, bson.E{Key: "sizeOnDisk", Value: d.SizeOnDisk}, bson.E{Key: "empty", Value: d.Empty})
			}
			// Compiled without $expr, the filter cannot fail.
			if ok, _ := filter.Match(doc); !ok {
				continue
			}
			total += d.SizeOnDisk
			dbs = append(dbs, doc)
		}
	})
	if dbs == nil {
		dbs = bson.A{}
	}
	f := bson.D{{Key: "databases", Value: dbs}}
	if !nameOnly {
		f = append(f, bson.E{Key: "totalSize", Value: total}, bson.E{Key: "totalSizeMb", Value: total >> 20})
	}
	return result{fields: f}, nil
}

// withAdmin adds the admin database to dbs (sorted by name) when it holds nothing yet: a
// replica set always has it, and mongod always lists it.
func withAdmin(dbs []storage.DatabaseInfo) []storage.DatabaseInfo {
	i, found := slices.BinarySearchFunc(dbs, "admin", func(d storage.DatabaseInfo, name string) int {
		return strings.Compare(d.Name, name)
	})
	if found {
		return dbs
	}
	return slices.Insert(dbs, i, storage.DatabaseInfo{Name: "admin", Empty: true})
}
