package query

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// NotSingleValueField is mongod's code for a filter whose equalities cannot seed an upsert.
const NotSingleValueField int32 = 54

// UpsertSeed returns the document an upsert starts from: the filter's equality conditions
// ({f: v}, {f: {$eq: v}}, single-element $in, inside top-level $and and single-clause $or),
// dotted paths creating embedded documents. As mongod it adds them in lexicographic order of
// their paths (its equality map is ordered) and then moves _id first. Equalities on the same
// path or on a path and its prefix fail with code 54 NotSingleValueField. The filter must
// already compile (CompileFilter); UpsertSeed does not re-validate it.
func UpsertSeed(filter bson.D) (bson.D, error) {
	eqs := map[string]any{}
	var paths []string
	if err := collectEqualities(filter, eqs, &paths); err != nil {
		return nil, err
	}
	slices.Sort(paths)
	seed := bson.D{}
	for _, p := range paths {
		seed = setSeedPath(seed, splitPath(p), bsonval.Clone(eqs[p]))
	}
	for i, e := range seed {
		if e.Key == "_id" && i > 0 {
			out := make(bson.D, 0, len(seed))
			out = append(out, e)
			out = append(out, seed[:i]...)
			return append(out, seed[i+1:]...), nil
		}
	}
	return seed, nil
}

func collectEqualities(filter bson.D, eqs map[string]any, paths *[]string) error {
	for _, e := range filter {
		switch e.Key {
		case "$and":
			arr, _ := e.Value.(bson.A)
			for _, x := range arr {
				if d, ok := x.(bson.D); ok {
					if err := collectEqualities(d, eqs, paths); err != nil {
						return err
					}
				}
			}
			continue
		case "$or":
			if arr, _ := e.Value.(bson.A); len(arr) == 1 {
				if d, ok := arr[0].(bson.D); ok {
					if err := collectEqualities(d, eqs, paths); err != nil {
						return err
					}
				}
			}
			continue
		}
		if strings.HasPrefix(e.Key, "$") {
			continue
		}
		ops, isOps := isOperatorDoc(e.Value)
		if !isOps {
			if _, isRe := e.Value.(bson.Regex); isRe {
				continue
			}
			if err := addEquality(e.Key, e.Value, eqs, paths); err != nil {
				return err
			}
			continue
		}
		for _, op := range ops {
			switch op.Key {
			case "$eq":
				if err := addEquality(e.Key, op.Value, eqs, paths); err != nil {
					return err
				}
			case "$in":
				if arr, ok := op.Value.(bson.A); ok && len(arr) == 1 {
					if _, isRe := arr[0].(bson.Regex); !isRe {
						if err := addEquality(e.Key, arr[0], eqs, paths); err != nil {
							return err
						}
					}
				}
			}
		}
	}
	return nil
}

func addEquality(path string, v any, eqs map[string]any, paths *[]string) error {
	for _, p := range *paths {
		if p == path {
			return mongoerr.New(NotSingleValueField, "cannot infer query fields to set, path '%s' is matched twice", path)
		}
		if strings.HasPrefix(path, p+".") || strings.HasPrefix(p, path+".") {
			return mongoerr.New(NotSingleValueField, "cannot infer query fields to set, both paths '%s' and '%s' are matched", p, path)
		}
	}
	eqs[path] = bsonval.Normalize(v)
	*paths = append(*paths, path)
	return nil
}

// setSeedPath sets parts in d, creating embedded documents; paths never conflict here.
func setSeedPath(d bson.D, parts []string, v any) bson.D {
	if len(parts) == 1 {
		return append(d, bson.E{Key: parts[0], Value: v})
	}
	for i := range d {
		if d[i].Key == parts[0] {
			if sub, ok := d[i].Value.(bson.D); ok {
				d[i].Value = setSeedPath(sub, parts[1:], v)
				return d
			}
		}
	}
	return append(d, bson.E{Key: parts[0], Value: setSeedPath(bson.D{}, parts[1:], v)})
}
