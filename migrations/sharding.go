package migrations

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/store"
)

// The sharding setup is not a numbered step: it applies only to a sharded cluster, and it
// runs at the end of every Up (after the steps built the indexes it relies on), so a replica
// set later converted to a sharded cluster, or a collection added to store.ShardedCollections,
// is set up by the next Up. It is idempotent: a collection already sharded on store.ShardKey
// is left alone, one sharded on another key is a permanent *ShardKeyError.

// mongosMsg is the msg field of hello when a mongos answers.
const mongosMsg = "isdbgrid"

// wireVersion60 is MongoDB 6.0's wire version: from 6.0 on, shardCollection no longer needs
// the database to be enabled for sharding first (enableSharding).
const wireVersion60 = 17

// codeAlreadyInitialized is MongoDB's AlreadyInitialized error code (enableSharding of a
// database already enabled, before 4.x made it a no-op; shardCollection of a collection
// already sharded with other options).
const codeAlreadyInitialized = 23

// codeUnauthorized is MongoDB's Unauthorized error code: rollup's user may lack the
// privileges of the sharding setup (read on config, enableSharding), which an operator then
// runs once as a cluster administrator.
const codeUnauthorized = 13

// configDB and configCollections hold the cluster's catalog of sharded collections.
const (
	configDB          = "config"
	configCollections = "collections"
)

// Cluster is what hello says about the deployment.
type Cluster struct {
	// Sharded: a mongos answered (hello's msg is "isdbgrid").
	Sharded bool
	// MaxWireVersion is the server's (21 for MongoDB 7.0, 17 for 6.0).
	MaxWireVersion int32
}

// DetectCluster asks the deployment of client what it is.
func DetectCluster(ctx context.Context, client *mongo.Client) (Cluster, error) {
	var hello struct {
		Msg            string `bson:"msg"`
		MaxWireVersion int32  `bson:"maxWireVersion"`
	}
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return Cluster{}, fmt.Errorf("hello: %w", err)
	}
	return Cluster{Sharded: hello.Msg == mongosMsg, MaxWireVersion: hello.MaxWireVersion}, nil
}

// ShardState is one collection of store.ShardedCollections on a sharded cluster.
type ShardState struct {
	// Namespace is "database.collection".
	Namespace string
	// Key is the shard key the cluster has for it (config.collections), nil when the
	// collection is not sharded.
	Key bson.Raw
}

// Sharded reports whether the collection is sharded (on any key).
func (s ShardState) Sharded() bool { return s.Key != nil }

// OK reports whether the collection is sharded on store.ShardKey.
func (s ShardState) OK() bool { return s.Key != nil && store.SameShardKey(s.Key) }

// Sharding is the sharding state of rollup's database.
type Sharding struct {
	// Cluster is what hello said.
	Cluster Cluster
	// Collections are the collections of store.ShardedCollections, in that order (only on a
	// sharded cluster).
	Collections []ShardState
	// Unreadable says why the shard keys could not be read (rollup's user may not read the
	// config database); Collections is empty then.
	Unreadable string
}

// Pending lists the namespaces still to shard (none off a sharded cluster).
func (s Sharding) Pending() []string {
	var out []string
	for _, c := range s.Collections {
		if !c.Sharded() {
			out = append(out, c.Namespace)
		}
	}
	return out
}

// Sharding reads the deployment's kind and, on a sharded cluster, how each collection of
// store.ShardedCollections is sharded.
func (m *Migrator) Sharding(ctx context.Context) (Sharding, error) {
	c, err := DetectCluster(ctx, m.db.Client())
	if err != nil || !c.Sharded {
		return Sharding{Cluster: c}, err
	}
	out := Sharding{Cluster: c}
	for _, coll := range store.ShardedCollections() {
		ns := m.db.Name() + "." + coll
		key, err := shardKeyOf(ctx, m.db.Client(), ns)
		if isUnauthorized(err) {
			return Sharding{Cluster: c, Unreadable: err.Error()}, nil
		}
		if err != nil {
			return out, err
		}
		out.Collections = append(out.Collections, ShardState{Namespace: ns, Key: key})
	}
	return out, nil
}

// shardKeyOf reads the shard key of namespace ns from config.collections (nil when it is not
// sharded; before 5.0 a dropped collection keeps its entry, marked dropped).
func shardKeyOf(ctx context.Context, client *mongo.Client, ns string) (bson.Raw, error) {
	var entry struct {
		Key     bson.Raw `bson:"key"`
		Dropped bool     `bson:"dropped"`
	}
	err := client.Database(configDB).Collection(configCollections).FindOne(ctx, bson.D{{Key: "_id", Value: ns}}).Decode(&entry)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read the shard key of %s: %w", ns, err)
	case entry.Dropped:
		return nil, nil
	case entry.Key == nil:
		return nil, fmt.Errorf("read the shard key of %s: config.collections has no key for it", ns)
	}
	return entry.Key, nil
}

// ShardingCommands are the admin commands that shard the namespaces ns of database db on a
// cluster c: enableSharding first on servers before 6.0 (which need it), then one
// shardCollection per namespace on store.ShardKey, unique (the unique index the steps built
// backs the key).
func ShardingCommands(db string, c Cluster, ns []string) []bson.D {
	if len(ns) == 0 {
		return nil
	}
	var out []bson.D
	if c.MaxWireVersion < wireVersion60 {
		out = append(out, bson.D{{Key: "enableSharding", Value: db}})
	}
	for _, n := range ns {
		out = append(out, bson.D{{Key: "shardCollection", Value: n}, {Key: "key", Value: store.ShardKey()}, {Key: "unique", Value: true}})
	}
	return out
}

// ShardKeyError is a collection sharded on another key than store.ShardKey: its unique (id,
// type, timestamp) index cannot exist (or cannot be trusted), so rollup must not write.
type ShardKeyError struct {
	// Namespace is "database.collection"; Found is its shard key.
	Namespace string
	Found     bson.Raw
}

// Error names the key found, the key wanted, and the fix.
func (e *ShardKeyError) Error() string {
	want := formatKey(store.ShardKey())
	return fmt.Sprintf("%s is sharded on %s, but rollup needs the ranged shard key %s (its unique (id, type, timestamp) "+
		"index must be prefixed by the shard key): reshard it with db.adminCommand({reshardCollection: %q, key: %s}) "+
		"(MongoDB 5.0+), then run `rollup migrate up` again", e.Namespace, e.Found.String(), want, e.Namespace, want)
}

// Permanent marks the error as one that retrying cannot fix (retry.IsPermanent).
func (e *ShardKeyError) Permanent() bool { return true }

// formatKey renders an index or shard key as the shell writes it.
func formatKey(k bson.D) string {
	parts := make([]string, len(k))
	for i, e := range k {
		parts[i] = fmt.Sprintf("%s: %v", e.Key, e.Value)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// ShardResult is what the sharding setup did (or with DryRun would do) on a sharded cluster.
type ShardResult struct {
	// Commands are the admin commands run (with DryRun: to run), in order.
	Commands []bson.D
	// Already lists the namespaces found sharded on store.ShardKey.
	Already []string
	// Skipped says why the setup did not run (rollup's user lacks a privilege it needs).
	Skipped string
}

// isUnauthorized reports whether err is MongoDB's Unauthorized.
func isUnauthorized(err error) bool {
	se := mongo.ServerError(nil)
	return errors.As(err, &se) && se.HasErrorCode(codeUnauthorized)
}

// skip records that the setup could not run for lack of privileges, and warns: rollup works on
// an unsharded counts collection (all of it on the primary shard), so this is no reason to
// stop serving; an operator runs `rollup migrate up` once with a user that may shard.
func (m *Migrator) skip(res *ShardResult, why string) {
	res.Skipped = why + ": run `rollup migrate up` once as a user with the clusterManager role (or shard " +
		"the collections by hand, docs/scaling.md); until then counts stays unsharded on the primary shard"
	m.log.Warn("sharding setup skipped", zap.String("why", res.Skipped))
}

// shard is the sharding setup, run at the end of Up: nothing off a sharded cluster; on one,
// it shards every collection of store.ShardedCollections not sharded yet (with r.DryRun it
// only reports the commands). A collection sharded on another key is a *ShardKeyError.
func (m *Migrator) shard(ctx context.Context, r *Report) error {
	st, err := m.Sharding(ctx)
	if err != nil || !st.Cluster.Sharded {
		return err
	}
	res := &ShardResult{}
	r.Sharding = res
	if st.Unreadable != "" {
		m.skip(res, "cannot read config.collections ("+st.Unreadable+")")
		return nil
	}
	for _, c := range st.Collections {
		if c.Sharded() && !c.OK() {
			return &ShardKeyError{Namespace: c.Namespace, Found: c.Key}
		}
		if c.OK() {
			res.Already = append(res.Already, c.Namespace)
		}
	}
	res.Commands = ShardingCommands(m.db.Name(), st.Cluster, st.Pending())
	if r.DryRun {
		return nil
	}
	err = m.runShardCommands(ctx, res)
	if isUnauthorized(err) {
		m.skip(res, err.Error())
		return nil
	}
	return err
}

// runShardCommands runs res.Commands in order on the admin database; after an error,
// res.Commands keeps only the commands that succeeded.
func (m *Migrator) runShardCommands(ctx context.Context, res *ShardResult) error {
	cmds := res.Commands
	for i, cmd := range cmds {
		if err := m.runShardCommand(ctx, cmd); err != nil {
			res.Commands = cmds[:i]
			return err
		}
	}
	return nil
}

// runShardCommand runs one command of ShardingCommands. An AlreadyInitialized answer is fine
// for enableSharding (enabled before) and for a shardCollection whose collection turns out
// sharded on store.ShardKey; on another key it is a *ShardKeyError.
func (m *Migrator) runShardCommand(ctx context.Context, cmd bson.D) error {
	m.log.Info("sharding setup", zap.String("command", cmd[0].Key), zap.Any("target", cmd[0].Value))
	err := m.db.Client().Database("admin").RunCommand(ctx, cmd).Err()
	if err == nil {
		return nil
	}
	if se := mongo.ServerError(nil); !errors.As(err, &se) || !se.HasErrorCode(codeAlreadyInitialized) {
		return fmt.Errorf("%s %v: %w", cmd[0].Key, cmd[0].Value, err)
	}
	if cmd[0].Key == "enableSharding" {
		return nil
	}
	// Sharded meanwhile (not by rollup: Up holds the migration lock): fine on our key.
	ns, _ := cmd[0].Value.(string)
	key, kerr := shardKeyOf(ctx, m.db.Client(), ns)
	switch {
	case kerr != nil:
		return kerr
	case key == nil:
		return fmt.Errorf("%s %v: %w", cmd[0].Key, cmd[0].Value, err)
	case !store.SameShardKey(key):
		return &ShardKeyError{Namespace: ns, Found: key}
	}
	return nil
}
