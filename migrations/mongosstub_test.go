package migrations

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/wire"
)

// fakeMongos is a tiny wire-level stand-in for a mongos, for the sharding setup only (the
// embedded server is a replica set member, not a router): it answers hello as a mongos of a
// given wire version, find on config.collections from its own catalog, enableSharding and
// shardCollection (recording them and updating the catalog), and endSessions. Any other
// command is recorded as unexpected and answered with an error, so a test sees it.
type fakeMongos struct {
	addr string
	wire int32

	mu         sync.Mutex
	keys       map[string]bson.Raw // config.collections: namespace → shard key
	sent       []bson.D            // enableSharding and shardCollection, in order
	unexpected []string
	fail       map[string]int32 // command name → error code to answer with
}

// startFakeMongos listens on 127.0.0.1:0 until the test ends.
func startFakeMongos(t *testing.T, wireVersion int32) *fakeMongos {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeMongos{addr: ln.Addr().String(), wire: wireVersion, keys: map[string]bson.Raw{}, fail: map[string]int32{}}
	var wg sync.WaitGroup
	var conns sync.Map
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(c, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				f.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		conns.Range(func(k, _ any) bool { _ = k.(net.Conn).Close(); return true })
		wg.Wait()
	})
	return f
}

// client connects the driver to the stub.
func (f *fakeMongos) client(t *testing.T) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + f.addr + "/").SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

// serve answers one connection's commands until it closes.
func (f *fakeMongos) serve(c net.Conn) {
	for id := int32(1); ; id++ {
		h, msg, err := wire.ReadMessage(c, wire.DefaultMaxMessageSize)
		if err != nil {
			return
		}
		var out []byte
		switch h.OpCode {
		case wire.OpQuery:
			q, err := wire.ParseQuery(msg)
			if err != nil {
				return
			}
			out = wire.AppendReply(nil, id, h.RequestID, 0, f.answer(q.Command()))
		case wire.OpMsg:
			m, err := wire.ParseMsg(msg)
			if err != nil {
				return
			}
			out = wire.AppendMsg(nil, id, h.RequestID, 0, f.answer(m.Body))
		default:
			return
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// answer runs one command against the stub's state.
func (f *fakeMongos) answer(body bson.Raw) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	elems, _ := body.Elements()
	if len(elems) == 0 {
		return mustMarshal(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "empty command"}, {Key: "code", Value: int32(9)}})
	}
	name := elems[0].Key()
	if code, ok := f.fail[name]; ok {
		return mustMarshal(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "stub: " + name + " fails"}, {Key: "code", Value: code}})
	}
	ok := bson.E{Key: "ok", Value: 1.0}
	switch name {
	case "hello", "isMaster", "ismaster":
		return mustMarshal(bson.D{
			{Key: "ismaster", Value: true}, {Key: "isWritablePrimary", Value: true}, {Key: "msg", Value: mongosMsg},
			{Key: "maxBsonObjectSize", Value: int32(16 << 20)}, {Key: "maxMessageSizeBytes", Value: int32(48000000)},
			{Key: "maxWriteBatchSize", Value: int32(100000)}, {Key: "localTime", Value: bson.NewDateTimeFromTime(time.Now())},
			{Key: "logicalSessionTimeoutMinutes", Value: int32(30)}, {Key: "minWireVersion", Value: int32(0)},
			{Key: "maxWireVersion", Value: f.wire}, ok})
	case "endSessions":
		return mustMarshal(bson.D{ok})
	case "find":
		coll, _ := elems[0].Value().StringValueOK()
		db, _ := body.Lookup("$db").StringValueOK()
		if db != configDB || coll != configCollections {
			break
		}
		ns, _ := body.Lookup("filter", "_id").StringValueOK()
		batch := bson.A{}
		if key, found := f.keys[ns]; found {
			batch = append(batch, bson.D{{Key: "_id", Value: ns}, {Key: "key", Value: key}, {Key: "unique", Value: true}})
		}
		return mustMarshal(bson.D{{Key: "cursor", Value: bson.D{{Key: "id", Value: int64(0)}, {Key: "ns", Value: "config.collections"},
			{Key: "firstBatch", Value: batch}}}, ok})
	case "enableSharding":
		f.sent = append(f.sent, commandOf(body))
		return mustMarshal(bson.D{ok})
	case "shardCollection":
		cmd := commandOf(body)
		f.sent = append(f.sent, cmd)
		ns, _ := elems[0].Value().StringValueOK()
		if _, found := f.keys[ns]; found {
			return mustMarshal(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "already sharded"}, {Key: "code", Value: int32(codeAlreadyInitialized)}})
		}
		key, _ := body.Lookup("key").DocumentOK()
		f.keys[ns] = append(bson.Raw(nil), key...)
		return mustMarshal(bson.D{{Key: "collectionsharded", Value: ns}, ok})
	}
	f.unexpected = append(f.unexpected, name)
	return mustMarshal(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "stub: unexpected command " + name}, {Key: "code", Value: int32(238)}})
}

// commandOf is a command without the fields the driver adds ($db, lsid, $clusterTime,
// maxTimeMS from the context deadline, ...).
func commandOf(body bson.Raw) bson.D {
	elems, _ := body.Elements()
	var out bson.D
	for _, e := range elems {
		switch e.Key() {
		case "$db", "lsid", "$clusterTime", "$readPreference", "txnNumber", "writeConcern", "maxTimeMS":
			continue
		}
		var v any
		if err := e.Value().Unmarshal(&v); err != nil {
			panic(err)
		}
		out = append(out, bson.E{Key: e.Key(), Value: v})
	}
	return out
}

// state returns what the stub was sent.
func (f *fakeMongos) state() (sent []bson.D, unexpected []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bson.D(nil), f.sent...), append([]string(nil), f.unexpected...)
}

// setKey puts a shard key into the stub's config.collections.
func (f *fakeMongos) setKey(ns string, key bson.D) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys[ns] = mustMarshal(key)
}

// failWith makes the stub answer command name with an error of code.
func (f *fakeMongos) failWith(name string, code int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[name] = code
}
