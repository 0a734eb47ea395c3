package embedded_test

import (
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/gameops/rollup/embedded/embeddedtest"
)

func TestHandshakeReplicaSetDiscovery(t *testing.T) {
	e := newEnv(t)
	if !e.store.Real() {
		if want := "replicaSet=rs0"; !containsStr(e.store.URI, want) {
			t.Fatalf("URI %q lacks %q", e.store.URI, want)
		}
	}
	// Server selection through replica-set discovery must find a writable primary.
	if err := e.c.Ping(e.ctx, readpref.Primary()); err != nil {
		t.Fatalf("ping primary: %v", err)
	}
	raw, err := runRaw(e.ctx, e.c.Database("admin"), bson.D{{Key: "hello", Value: 1}})
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	d := mustD(t, raw)
	if s, _ := get(d, "setName").(string); s == "" || (!e.store.Real() && s != "rs0") {
		t.Errorf("setName = %v", get(d, "setName"))
	}
	if get(d, "isWritablePrimary") != true {
		t.Errorf("isWritablePrimary = %v", get(d, "isWritablePrimary"))
	}
	hosts, _ := get(d, "hosts").(bson.A)
	if len(hosts) == 0 {
		t.Errorf("hosts = %v", get(d, "hosts"))
	}
	if !e.store.Real() && !slices.Contains(hosts, any(e.store.Server.Addr())) {
		t.Errorf("hosts %v lacks the server's address %s", hosts, e.store.Server.Addr())
	}
	if _, ok := get(d, "topologyVersion.processId").(bson.ObjectID); !ok {
		t.Errorf("topologyVersion.processId = %v", get(d, "topologyVersion.processId"))
	}
	if _, ok := get(d, "topologyVersion.counter").(int64); !ok {
		t.Errorf("topologyVersion.counter = %v", get(d, "topologyVersion.counter"))
	}
	if n, ok := asInt64(get(d, "logicalSessionTimeoutMinutes")); !ok || n <= 0 {
		t.Errorf("logicalSessionTimeoutMinutes = %v", get(d, "logicalSessionTimeoutMinutes"))
	}
	if n, ok := asInt64(get(d, "maxWireVersion")); !ok || n < 17 {
		t.Errorf("maxWireVersion = %v, want >= 17", get(d, "maxWireVersion"))
	}
	if get(d, "ok") != 1.0 {
		t.Errorf("ok = %v", get(d, "ok"))
	}
}

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestRepliesCarryClusterTime checks operationTime and $clusterTime on every reply, errors
// included: drivers gossip the cluster time and causal consistency needs operationTime.
func TestRepliesCarryClusterTime(t *testing.T) {
	e := newEnv(t)
	if _, err := e.db.Collection("c").InsertOne(e.ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	tests := []struct {
		name     string
		db       string // "" = the test database
		cmd      bson.D
		wantCode int32 // 0 = success
	}{
		{name: "ping", db: "admin", cmd: bson.D{{Key: "ping", Value: 1}}},
		{name: "hello", db: "admin", cmd: bson.D{{Key: "hello", Value: 1}}},
		{name: "insert", cmd: bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "y", Value: 2}}}}}},
		{name: "find", cmd: bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{}}}},
		{name: "count", cmd: bson.D{{Key: "count", Value: "c"}}},
		{name: "bad operator", cmd: bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "$foo", Value: 1}}}}, wantCode: 2},
		{name: "dropIndexes missing collection", cmd: bson.D{{Key: "dropIndexes", Value: "nope"}, {Key: "index", Value: "x_1"}}, wantCode: 26},
		{name: "getMore unknown cursor", cmd: bson.D{{Key: "getMore", Value: int64(12345)}, {Key: "collection", Value: "c"}}, wantCode: 43},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := e.db
			if tc.db != "" {
				db = e.c.Database(tc.db)
			}
			raw, err := runRaw(e.ctx, db, tc.cmd)
			if tc.wantCode == 0 && err != nil {
				t.Fatalf("%v: %v", tc.cmd, err)
			}
			if tc.wantCode != 0 && errCode(err) != tc.wantCode {
				t.Fatalf("%v: error %v (code %d), want code %d", tc.cmd, err, errCode(err), tc.wantCode)
			}
			if raw == nil {
				t.Fatalf("no raw reply (err %v)", err)
			}
			d := mustD(t, raw)
			if ts, ok := get(d, "operationTime").(bson.Timestamp); !ok || ts.T == 0 {
				t.Errorf("operationTime = %v in %v", get(d, "operationTime"), d)
			}
			if ts, ok := get(d, "$clusterTime.clusterTime").(bson.Timestamp); !ok || ts.T == 0 {
				t.Errorf("$clusterTime.clusterTime = %v in %v", get(d, "$clusterTime.clusterTime"), d)
			}
			if _, ok := get(d, "$clusterTime.signature").(bson.D); !ok {
				t.Errorf("$clusterTime.signature missing in %v", d)
			}
		})
	}
}

// TestLegacyOpQueryHandshake speaks the pre-OP_MSG handshake by hand: an OP_QUERY isMaster
// on admin.$cmd answered with an OP_REPLY.
func TestLegacyOpQueryHandshake(t *testing.T) {
	store := embeddedtest.Start(t)
	store.SkipIfReal(t)
	rc := dialRaw(t, store.Server.Addr())

	for _, q := range []bson.D{
		{{Key: "isMaster", Value: 1}, {Key: "helloOk", Value: true}},
		{{Key: "$query", Value: bson.D{{Key: "isMaster", Value: 1}}}},
	} {
		r := rc.opQuery(t, "admin.$cmd", q)
		if r.NumberReturned != 1 || r.CursorID != 0 {
			t.Fatalf("OP_REPLY numberReturned %d cursorID %d", r.NumberReturned, r.CursorID)
		}
		d := mustD(t, r.Docs[0])
		if get(d, "ok") != 1.0 || get(d, "ismaster") != true || get(d, "setName") != "rs0" {
			t.Errorf("isMaster reply = %v", d)
		}
		if n, ok := asInt64(get(d, "maxWireVersion")); !ok || n < 17 {
			t.Errorf("maxWireVersion = %v", get(d, "maxWireVersion"))
		}
	}

	// Any other OP_QUERY command is refused as mongod 5.1+ refuses it.
	r := rc.opQuery(t, "admin.$cmd", bson.D{{Key: "ping", Value: 1}})
	d := mustD(t, r.Docs[0])
	if get(d, "ok") != 0.0 || get(d, "code") != int32(352) {
		t.Errorf("OP_QUERY ping reply = %v, want ok 0 code 352", d)
	}

	// The same connection then speaks OP_MSG.
	if d := rc.command(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); get(d, "ok") != 1.0 {
		t.Errorf("OP_MSG ping after OP_QUERY handshake = %v", d)
	}
}

// TestHandshakeDirectConnection checks a direct connection (no replica-set discovery) works too.
func TestHandshakeDirectConnection(t *testing.T) {
	store := embeddedtest.Start(t)
	store.SkipIfReal(t)
	c := store.Client(t, quickMonitor(), options.Client().ApplyURI("mongodb://"+store.Server.Addr()+"/?directConnection=true"))
	ctx := ctxFor(t)
	if err := c.Ping(ctx, readpref.Primary()); err != nil {
		t.Fatalf("ping: %v", err)
	}
}
