package store

import (
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestShardKey: the shard key is exactly the unique index's key (so the index is allowed on
// a sharded collection), and the collections rollup shards are those keyed by it: the counts,
// never the small ones that stay on the primary shard.
func TestShardKey(t *testing.T) {
	if !keysEqual(ShardKey(), keyIndex().Keys) {
		t.Errorf("shard key %v, unique index %v", ShardKey(), keyIndex().Keys)
	}
	got := ShardedCollections()
	if len(got) == 0 || got[0] != CountsCollection {
		t.Errorf("ShardedCollections() = %v: want counts first", got)
	}
	for _, c := range []string{TokensCollection, ProjectsCollection, CheckpointsCollection, LeasesCollection,
		InstancesCollection, MigrationsCollection, LockCollection, "trees", "tree_nodes"} {
		if slices.Contains(got, c) {
			t.Errorf("%s is sharded: %v", c, got)
		}
	}
	for _, c := range got {
		ix, ok := IndexNamed(c, CountsKeyIndex)
		if !ok || !ix.Unique {
			t.Errorf("%s is sharded but has no unique index on the shard key", c)
		}
	}
}

// TestSameShardKey compares keys as config.collections stores them.
func TestSameShardKey(t *testing.T) {
	tests := []struct {
		key  bson.D
		want bool
	}{
		{bson.D{{Key: "id", Value: int32(1)}, {Key: "type", Value: int32(1)}, {Key: "timestamp", Value: int32(1)}}, true},
		{bson.D{{Key: "id", Value: 1.0}, {Key: "type", Value: 1.0}, {Key: "timestamp", Value: 1.0}}, true},
		{bson.D{{Key: "id", Value: int64(1)}, {Key: "type", Value: int64(1)}, {Key: "timestamp", Value: int64(1)}}, true},
		{bson.D{{Key: "id", Value: "hashed"}}, false},
		{bson.D{{Key: "id", Value: 1}}, false},
		{bson.D{{Key: "id", Value: 1}, {Key: "type", Value: 1}}, false},
		{bson.D{{Key: "id", Value: 1}, {Key: "type", Value: 1}, {Key: "timestamp", Value: -1}}, false},
		{bson.D{{Key: "type", Value: 1}, {Key: "id", Value: 1}, {Key: "timestamp", Value: 1}}, false},
		{bson.D{{Key: "id", Value: 1}, {Key: "type", Value: 1}, {Key: "timestamp", Value: 1}, {Key: "project", Value: 1}}, false},
		{bson.D{{Key: "id", Value: 1.5}, {Key: "type", Value: 1}, {Key: "timestamp", Value: 1}}, false},
		{bson.D{}, false},
	}
	for _, tc := range tests {
		raw, err := bson.Marshal(tc.key)
		if err != nil {
			t.Fatal(err)
		}
		if got := SameShardKey(raw); got != tc.want {
			t.Errorf("SameShardKey(%v) = %v, want %v", tc.key, got, tc.want)
		}
	}
}
