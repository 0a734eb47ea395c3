package migrations

import (
	"errors"
	"os"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/retry"
	"github.com/gameops/rollup/store"
)

// rendered renders commands as extended JSON, one per line, for comparisons and messages.
func rendered(cmds []bson.D) string {
	var b strings.Builder
	for _, c := range cmds {
		b.WriteString(bson.Raw(mustMarshal(c)).String())
		b.WriteByte('\n')
	}
	return b.String()
}

const (
	wantKey   = `{"id": {"$numberInt":"1"},"type": {"$numberInt":"1"},"timestamp": {"$numberInt":"1"}}`
	shardCmd  = `{"shardCollection": "rollup.%s","key": ` + wantKey + `,"unique": true}`
	enableCmd = `{"enableSharding": "rollup"}`
)

func shardLine(coll string) string { return strings.Replace(shardCmd, "%s", coll, 1) }

// TestShardingCommands: enableSharding only before 6.0 (wire version 17), then one
// shardCollection per namespace on exactly the unique index's key; nothing to shard, nothing
// to run.
func TestShardingCommands(t *testing.T) {
	tests := []struct {
		name string
		wire int32
		ns   []string
		want []string
	}{
		{"7.0", 21, []string{"rollup.counts"}, []string{shardLine("counts")}},
		{"6.0", 17, []string{"rollup.counts", "rollup.rollups_1h"}, []string{shardLine("counts"), shardLine("rollups_1h")}},
		{"5.0 enables sharding first", 13, []string{"rollup.counts"}, []string{enableCmd, shardLine("counts")}},
		{"nothing pending", 13, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := rendered(ShardingCommands("rollup", Cluster{Sharded: true, MaxWireVersion: tc.wire}, tc.ns))
			want := ""
			for _, w := range tc.want {
				want += w + "\n"
			}
			if got != want {
				t.Errorf("commands:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// mongosMigrator is a Migrator on database "rollup" of a fake mongos.
func mongosMigrator(t *testing.T, f *fakeMongos) *Migrator {
	t.Helper()
	return New(f.client(t).Database("rollup"), zaptest.NewLogger(t))
}

// TestShardSetupOnMongos drives the sharding setup through the real driver against a
// wire-level mongos stand-in: the cluster is detected from hello, each collection of
// store.ShardedCollections is sharded once on the unique index's key (enableSharding first
// before 6.0), a second run finds it done and sends nothing, and a dry run sends nothing.
func TestShardSetupOnMongos(t *testing.T) {
	ctx := testCtx(t)
	var want []string
	for _, c := range store.ShardedCollections() {
		want = append(want, shardLine(c))
	}
	if len(want) == 0 || want[0] != shardLine(store.CountsCollection) {
		t.Fatalf("store.ShardedCollections() = %v: want counts first", store.ShardedCollections())
	}
	for _, tc := range []struct {
		name   string
		wire   int32
		enable bool
	}{{"7.0", 21, false}, {"5.0", 13, true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFakeMongos(t, tc.wire)
			m := mongosMigrator(t, f)

			st, err := m.Sharding(ctx)
			if err != nil || !st.Cluster.Sharded || st.Cluster.MaxWireVersion != tc.wire || len(st.Pending()) != len(want) {
				t.Fatalf("Sharding = %+v, %v: want a sharded cluster of wire version %d with %d pending", st, err, tc.wire, len(want))
			}

			dry := Report{DryRun: true}
			if err := m.shard(ctx, &dry); err != nil {
				t.Fatal(err)
			}
			if sent, _ := f.state(); len(sent) != 0 || dry.Sharding == nil || dry.UpToDate() {
				t.Fatalf("dry run sent %v; report %+v", sent, dry.Sharding)
			}

			var r Report
			if err := m.shard(ctx, &r); err != nil {
				t.Fatal(err)
			}
			wantSent := append([]string(nil), want...)
			if tc.enable {
				wantSent = append([]string{enableCmd}, wantSent...)
			}
			sent, unexpected := f.state()
			if got := rendered(sent); got != strings.Join(wantSent, "\n")+"\n" {
				t.Errorf("sent:\n%s\nwant:\n%s", got, strings.Join(wantSent, "\n"))
			}
			if rendered(r.Sharding.Commands) != rendered(dry.Sharding.Commands) {
				t.Errorf("the dry run reported\n%s\nthe run did\n%s", rendered(dry.Sharding.Commands), rendered(r.Sharding.Commands))
			}
			if len(unexpected) > 0 {
				t.Errorf("unexpected commands %v", unexpected)
			}
			var out strings.Builder
			if err := r.Format(&out); err != nil || !strings.Contains(out.String(), "sharded cluster: ran {\"shardCollection\": \"rollup.counts\"") {
				t.Errorf("report:\n%s", out.String())
			}

			again := Report{}
			if err := m.shard(ctx, &again); err != nil {
				t.Fatal(err)
			}
			if sent2, _ := f.state(); len(sent2) != len(sent) || len(again.Sharding.Commands) != 0 || len(again.Sharding.Already) != len(want) || !again.UpToDate() {
				t.Errorf("second run: sent %v, report %+v", sent2[len(sent):], again.Sharding)
			}
			out.Reset()
			if err := again.Format(&out); err != nil || !strings.Contains(out.String(), "up to date") ||
				!strings.Contains(out.String(), "sharded cluster: rollup.counts is sharded on {id: 1, type: 1, timestamp: 1}") {
				t.Errorf("second report:\n%s", out.String())
			}
		})
	}
}

// TestShardSetupWrongKey: a collection sharded on another key (a hashed id, a prefix) is a
// permanent error naming the key found and the fix, and nothing is sent.
func TestShardSetupWrongKey(t *testing.T) {
	ctx := testCtx(t)
	for _, key := range []bson.D{
		{{Key: "id", Value: "hashed"}},
		{{Key: "id", Value: int32(1)}},
		{{Key: "id", Value: 1.0}, {Key: "type", Value: 1.0}, {Key: "timestamp", Value: -1.0}},
	} {
		f := startFakeMongos(t, 21)
		f.setKey("rollup.counts", key)
		m := mongosMigrator(t, f)
		var r Report
		err := m.shard(ctx, &r)
		var ke *ShardKeyError
		if !errors.As(err, &ke) || !retry.IsPermanent(err) || ke.Namespace != "rollup.counts" {
			t.Fatalf("key %v: err %v, want a permanent *ShardKeyError", key, err)
		}
		msg := err.Error()
		for _, want := range []string{"rollup.counts is sharded on " + bson.Raw(mustMarshal(key)).String(), "{id: 1, type: 1, timestamp: 1}", "reshardCollection"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q lacks %q", msg, want)
			}
		}
		if sent, unexpected := f.state(); len(sent) != 0 || len(unexpected) != 0 {
			t.Errorf("key %v: sent %v, unexpected %v", key, sent, unexpected)
		}
	}
}

// TestShardSetupCommandErrors: shardCollection answering AlreadyInitialized is fine when the
// collection turns out sharded on rollup's key; any other error (here NotImplemented) is
// returned, never taken for success.
func TestShardSetupCommandErrors(t *testing.T) {
	ctx := testCtx(t)

	f := startFakeMongos(t, 21)
	f.failWith("shardCollection", 238)
	var r Report
	err := mongosMigrator(t, f).shard(ctx, &r)
	if se := mongo.ServerError(nil); !errors.As(err, &se) || !se.HasErrorCode(238) || !strings.Contains(err.Error(), "shardCollection rollup.counts") {
		t.Fatalf("err %v: want the NotImplemented of shardCollection", err)
	}

	// Sharded on our key between the read and the command: AlreadyInitialized, then ok.
	f = startFakeMongos(t, 13)
	f.failWith("enableSharding", codeAlreadyInitialized)
	m := mongosMigrator(t, f)
	if err := m.shard(ctx, &Report{}); err != nil {
		t.Fatalf("enableSharding already done: %v", err)
	}
	f = startFakeMongos(t, 21)
	m = mongosMigrator(t, f)
	f.failWith("shardCollection", codeAlreadyInitialized)
	st, err := m.Sharding(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range st.Pending() {
		f.setKey(ns, store.ShardKey())
	}
	// The catalog now says sharded, so run the commands the setup decided on before.
	res := &ShardResult{Commands: ShardingCommands("rollup", st.Cluster, st.Pending())}
	if err := m.runShardCommands(ctx, res); err != nil {
		t.Errorf("AlreadyInitialized on rollup's key: %v", err)
	}
	f.setKey("rollup.counts", bson.D{{Key: "id", Value: "hashed"}})
	var ke *ShardKeyError
	if err := m.runShardCommands(ctx, res); !errors.As(err, &ke) {
		t.Errorf("AlreadyInitialized on another key: %v, want a *ShardKeyError", err)
	}
}

// TestShardSetupOffMongos: on the test deployment, Up detects what it is. Off a sharded
// cluster (the embedded server, a replica set) it runs no sharding command and reports
// none; on a mongos (MONGODB_URI) every collection ends sharded on rollup's key and a second
// Up sends nothing.
func TestShardSetupOffMongos(t *testing.T) {
	ctx := testCtx(t)
	db := newDB(t)
	m := newTestMigrator(t, db)
	r, err := m.Up(ctx, UpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.Sharding(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Cluster.Sharded {
		if r.Sharding != nil || len(st.Collections) != 0 {
			t.Fatalf("not a sharded cluster, yet sharding %+v / %+v", r.Sharding, st)
		}
		return
	}
	for _, c := range st.Collections {
		if !c.OK() {
			t.Errorf("%s: shard key %v after Up", c.Namespace, c.Key)
		}
	}
	again, err := m.Up(ctx, UpOptions{})
	if err != nil || !again.UpToDate() {
		t.Errorf("second Up: %+v, %v", again, err)
	}
}

// TestEmbeddedRefusesSharding: the embedded server is no mongos; asked to shard anyway it
// answers NotImplemented (238), never a silent ok.
func TestEmbeddedRefusesSharding(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("a test of the embedded server")
	}
	ctx := testCtx(t)
	srv := embeddedtest.Start(t)
	admin := srv.Client(t).Database("admin")
	for _, cmd := range ShardingCommands("rollup", Cluster{Sharded: true, MaxWireVersion: 13}, []string{"rollup.counts"}) {
		err := admin.RunCommand(ctx, cmd).Err()
		if se := mongo.ServerError(nil); !errors.As(err, &se) || !se.HasErrorCode(238) {
			t.Errorf("%v: %v, want NotImplemented (238)", cmd, err)
		}
	}
}

// TestShardSetupUnauthorized: a rollup user that may not read the config database or shard
// is no reason to stop: the setup is skipped with a warning and a report line that says how to
// run it, and nothing else is sent.
func TestShardSetupUnauthorized(t *testing.T) {
	ctx := testCtx(t)
	for _, cmd := range []string{"find", "shardCollection"} {
		f := startFakeMongos(t, 21)
		f.failWith(cmd, codeUnauthorized)
		m := mongosMigrator(t, f)
		var r Report
		if err := m.shard(ctx, &r); err != nil {
			t.Fatalf("%s unauthorized: %v", cmd, err)
		}
		var out strings.Builder
		if err := r.Format(&out); err != nil || r.Sharding == nil || !strings.Contains(out.String(), "sharding setup skipped") ||
			!strings.Contains(out.String(), "clusterManager") {
			t.Errorf("%s unauthorized: report\n%s", cmd, out.String())
		}
		sent, unexpected := f.state()
		if len(sent) != 0 || len(unexpected) > 0 { // the stub records only commands that succeed
			t.Errorf("%s unauthorized: sent %v, unexpected %v", cmd, sent, unexpected)
		}
		if st, err := m.Sharding(ctx); err != nil || (cmd == "find") != (st.Unreadable != "") {
			t.Errorf("%s unauthorized: Sharding %+v, %v", cmd, st, err)
		}
	}
}

// TestShardSetupPartialFailure: when a later command fails, the report lists only the
// commands that ran.
func TestShardSetupPartialFailure(t *testing.T) {
	ctx := testCtx(t)
	f := startFakeMongos(t, 13)
	f.failWith("shardCollection", 238)
	var r Report
	if err := mongosMigrator(t, f).shard(ctx, &r); err == nil {
		t.Fatal("no error")
	}
	if got := rendered(r.Sharding.Commands); got != enableCmd+"\n" {
		t.Errorf("report lists\n%s\nwant only %s", got, enableCmd)
	}
}
