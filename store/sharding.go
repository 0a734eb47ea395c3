package store

import (
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ShardKey is the shard key of every collection rollup shards on a sharded cluster: exactly
// the key of its unique (id, type, timestamp) index, ranged. A unique index on a sharded
// collection must be prefixed by the shard key, so no other key (a hashed one, or one led by
// project) could keep that index; the full key, rather than {id: 1}, lets a node's documents
// split over chunks as its ticks accumulate (a root's documents embed every child, so one
// id's history outgrows a chunk within days). docs/scaling.md explains the choice.
func ShardKey() bson.D { return CountsKey() }

// ShardedCollections are the collections rollup shards on a sharded cluster: every one whose
// catalog (Indexes) has a unique index on exactly ShardKey — the counts, and any collection
// keyed the same way. The others (tokens, projects, checkpoints, leases, instances, trees,
// migrations) stay unsharded on the database's primary shard.
func ShardedCollections() []string {
	var out []string
	for _, ix := range Indexes() {
		if ix.Unique && keysEqual(ix.Keys, ShardKey()) && !slices.Contains(out, ix.Collection) {
			out = append(out, ix.Collection)
		}
	}
	return out
}

// keysEqual compares two index keys written by rollup (field names and directions in order).
func keysEqual(a, b bson.D) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		da, okA := keyDirection(a[i].Value)
		db, okB := keyDirection(b[i].Value)
		if a[i].Key != b[i].Key || !okA || !okB || da != db {
			return false
		}
	}
	return true
}

// SameShardKey reports whether a shard key as the cluster stores it (config.collections'
// key: field names with 1, -1 or "hashed", numbers of any type) is exactly ShardKey.
func SameShardKey(found bson.Raw) bool {
	elems, err := found.Elements()
	want := ShardKey()
	if err != nil || len(elems) != len(want) {
		return false
	}
	for i, e := range elems {
		wantDir, _ := keyDirection(want[i].Value)
		if n, ok := Count(e.Value()); e.Key() != want[i].Key || !ok || n != wantDir {
			return false
		}
	}
	return true
}
