package watcher

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/store"
)

// Partition is the set of projects one change stream (and one lease and one checkpoint)
// covers. The zero Partition covers every project.
type Partition struct {
	// Name identifies the partition in lease and checkpoint ids and in Leadership.
	Name string
	// Hash and Of select the projects whose stable hash (FNV-1a of the name) modulo Of is
	// Hash; used when Of > 0.
	Hash, Of uint32
	// Projects, when not empty, are the projects of the partition; with Rest set the
	// partition is every project NOT in Projects instead.
	Projects []string
	Rest     bool
}

// ParsePartitions reads a partition spec, as given on the command line:
//
//   - "" or "all": one partition with every project;
//   - "hash:N" (1 <= N <= 1024): N partitions by a stable hash of the project name;
//   - "projects:a,b;c;d,e": one partition per ';'-separated list, plus a partition "rest"
//     for every project not listed (so no project is ever left unwatched).
//
// A hash partition's stream carries every leaf and the watcher drops the other partitions'
// leaves (the server has no hash in a change stream's $match that MongoDB 7.0 and the
// embedded server share); a project list is matched by the server, so the watch load of a
// sharded cluster spreads.
func ParsePartitions(spec string) ([]Partition, error) {
	spec = strings.TrimSpace(spec)
	switch {
	case spec == "" || spec == "all":
		return []Partition{{}}, nil
	case strings.HasPrefix(spec, "hash:"):
		n, err := strconv.ParseUint(strings.TrimPrefix(spec, "hash:"), 10, 32)
		if err != nil || n < 1 || n > 1024 {
			return nil, fmt.Errorf("partitions %q: hash:N needs 1 <= N <= 1024", spec)
		}
		if n == 1 {
			return []Partition{{}}, nil
		}
		out := make([]Partition, n)
		for i := range out {
			out[i] = Partition{Name: fmt.Sprintf("hash-%d-of-%d", i, n), Hash: uint32(i), Of: uint32(n)}
		}
		return out, nil
	case strings.HasPrefix(spec, "projects:"):
		var out []Partition
		var all []string
		seen := map[string]bool{}
		for i, group := range strings.Split(strings.TrimPrefix(spec, "projects:"), ";") {
			var ps []string
			for p := range strings.SplitSeq(group, ",") {
				p = strings.TrimSpace(p)
				if p == "" {
					return nil, fmt.Errorf("partitions %q: empty project name in list %d", spec, i+1)
				}
				if seen[p] {
					return nil, fmt.Errorf("partitions %q: project %q is in two lists", spec, p)
				}
				seen[p] = true
				ps = append(ps, p)
			}
			out = append(out, Partition{Name: fmt.Sprintf("list-%d", i), Projects: ps})
			all = append(all, ps...)
		}
		slices.Sort(all)
		return append(out, Partition{Name: "rest", Projects: all, Rest: true}), nil
	}
	return nil, fmt.Errorf("partitions %q: want \"all\", \"hash:N\" or \"projects:a,b;c\"", spec)
}

// all reports whether p covers every project.
func (p Partition) all() bool { return p.Of == 0 && len(p.Projects) == 0 }

// owns reports whether project belongs to p.
func (p Partition) owns(project string) bool {
	switch {
	case p.Of > 0:
		return projectHash(project)%p.Of == p.Hash
	case len(p.Projects) > 0:
		return slices.Contains(p.Projects, project) != p.Rest
	}
	return true
}

// ownsDoc reports whether the leaf document doc belongs to p, from its project field alone
// (without decoding the rest of the document, or allocating); known is false when that field
// is not a string (store.DecodeLeaf then says what is wrong with it). A hash partition's
// stream carries every partition's leaves, so most of its events end here, unread.
func (p Partition) ownsDoc(doc bson.Raw) (owns, known bool) {
	if p.all() {
		return true, true
	}
	v, err := doc.LookupErr(store.FieldProject)
	if err != nil || v.Type != bson.TypeString || len(v.Value) < 5 {
		return false, false
	}
	name := v.Value[4 : len(v.Value)-1] // int32 length, the bytes, a NUL
	if p.Of > 0 {
		return projectHash(name)%p.Of == p.Hash, true
	}
	return p.owns(string(name)), true
}

// projectHash is the stable hash partitions use: FNV-1a 32 of the project name (as hash/fnv's
// New32a computes it, without its allocation).
func projectHash[S string | []byte](project S) uint32 {
	const offset32, prime32 = 2166136261, 16777619
	h := uint32(offset32)
	for i := 0; i < len(project); i++ {
		h ^= uint32(project[i])
		h *= prime32
	}
	return h
}

// id is the lease and checkpoint id of p for a watcher named name: name itself for the
// partition of every project (so a single watcher keeps its checkpoint), else name/p.Name.
func (p Partition) id(name string) string {
	if p.all() || p.Name == "" {
		return name
	}
	return name + "/" + p.Name
}

// projectFilter is the condition on a leaf document's project that the server can evaluate
// for p (nil when it cannot: every project, or a hash).
func (p Partition) projectFilter() bson.D {
	if len(p.Projects) == 0 {
		return nil
	}
	op := "$in"
	if p.Rest {
		op = "$nin"
	}
	ps := make(bson.A, len(p.Projects))
	for i, s := range p.Projects {
		ps[i] = s
	}
	return bson.D{{Key: op, Value: ps}}
}

// streamFilter is the change stream's pipeline for p: leafFilter, then, for a project list,
// a $match that keeps the stream-ending events and the leaves of p's projects, then
// leafProjection.
func (p Partition) streamFilter() []bson.D {
	pipe := []bson.D(leafFilter())
	if f := p.projectFilter(); f != nil {
		pipe = append(pipe, bson.D{{Key: "$match", Value: bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "operationType", Value: bson.D{{Key: "$nin", Value: bson.A{"insert", "update", "replace"}}}}},
			bson.D{{Key: "fullDocument." + store.FieldProject, Value: f}},
		}}}}})
	}
	return append(pipe, leafProjection())
}
