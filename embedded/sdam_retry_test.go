package embedded_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/embedded/testctx"
	"github.com/gameops/rollup/embedded/wire"
)

// TestRetryAfterShutdownWriteConcernError runs the retryable-writes scenario "InsertOne
// succeeds after a writeConcernError ShutdownInProgress" 200 times: the insert is applied,
// its reply carries writeConcernError 91 with the RetryableWriteError label, and the driver's
// single retry must succeed every time. (Before the server attached topologyVersion to such a
// reply, about 1 in 30 failed: see TestDriverRetryAfterPoolClear.)
func TestRetryAfterShutdownWriteConcernError(t *testing.T) {
	store := embeddedtest.Start(t)
	var log commandLog
	c := store.Client(t, quickMonitor(), options.Client().SetMonitor(log.monitor()).SetRetryWrites(true))
	coll := store.Database(t, c).Collection("c")
	ctx := oneRetryCtx(t)
	const runs = 200
	failed := 0
	for i := range runs {
		store.FailPoint(t, c, csDoc("configureFailPoint", "failCommand", "mode", csDoc("times", int32(1)), "data", csDoc(
			"failCommands", bson.A{"insert"},
			"writeConcernError", csDoc("code", int32(91), "errmsg", "Replication is being shut down", "errorLabels", bson.A{"RetryableWriteError"}))))
		before := log.count("insert")
		if _, err := coll.InsertOne(ctx, csDoc("_id", int32(i))); err != nil {
			failed++
			t.Errorf("run %d: insert = %v after %d insert commands, want success after one retry", i, err, log.count("insert")-before)
		}
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != runs {
		t.Errorf("count = %d, %v; want %d", n, err, runs)
	}
	if failed > 0 {
		t.Errorf("%d of %d inserts were not retried", failed, runs)
	}
}

// TestDriverRetryAfterPoolClear documents the Go driver's side (v2.9.3) of issue #15 item 4,
// against a minimal fake mongod: the first insert is answered with writeConcernError 91 and
// the RetryableWriteError label; awaitable hellos are held (the server's topology does not
// change, so a real mongod holds them for maxAwaitTimeMS too).
//
//   - Without a topologyVersion in that reply, the driver takes the error as news: it marks
//     the server Unknown and clears its pool (a "node is shutting down" code). Its retry then
//     needs server selection, which waits for the monitor; the monitor is inside an awaitable
//     hello that RequestImmediateCheck does not cut short, so the server stays Unknown for up
//     to heartbeatFrequencyMS. When server selection (or the context) ends first, the driver
//     returns the first error with a single insert on the wire — spec-conformant: a retry
//     that cannot select a server raises the previous error.
//   - With the reply's topologyVersion equal to the one the driver knows (what mongod 4.4+
//     sends for "not primary" and "shutting down" errors, writeConcernErrors included), the
//     driver ignores the error for monitoring and retries at once.
//
// The embedded server used to omit that topologyVersion, which is why the retry failed
// whenever the awaitable hello did not happen to return in time.
func TestDriverRetryAfterPoolClear(t *testing.T) {
	for _, tt := range []struct {
		name            string
		topologyVersion bool
		wantInserts     int64
		wantErr         bool
	}{
		{"without topologyVersion: pool cleared, no retry", false, 1, true},
		{"with topologyVersion, as mongod: retried", true, 2, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := startFakeMongod(t, tt.topologyVersion)
			c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + fake.addr + "/?replicaSet=rs0").
				SetServerSelectionTimeout(time.Second).SetRetryWrites(true))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Disconnect(ctxFor(t)) })
			// The case is the monitor inside an awaitable hello when the error comes: before
			// that (its first hellos, slower on a loaded machine) an immediate check answers
			// at once and the retry finds the server (2 inserts, a flake seen under load).
			testctx.WaitFor(t, "the monitor's awaitable hello", func() bool { return fake.held.Load() > 0 })
			begin := time.Now()
			_, err = c.Database("db").Collection("c").InsertOne(oneRetryCtx(t), csDoc("_id", 1))
			if got := fake.inserts.Load(); got != tt.wantInserts {
				t.Errorf("inserts on the wire = %d, want %d", got, tt.wantInserts)
			}
			var we mongo.WriteException
			switch {
			case tt.wantErr && (!errors.As(err, &we) || we.WriteConcernError == nil || we.WriteConcernError.Code != 91):
				t.Errorf("insert = %v, want the first attempt's writeConcernError 91", err)
			case tt.wantErr && time.Since(begin) < time.Second:
				t.Errorf("gave up after %v, before server selection timed out", time.Since(begin))
			case !tt.wantErr && err != nil:
				t.Errorf("insert = %v, want success after one retry", err)
			}
		})
	}
}

// fakeMongod answers just enough of the protocol for one client: hello (a one-member replica
// set, wire version 21), inserts (the first with writeConcernError 91), and ok to the rest.
type fakeMongod struct {
	addr    string
	tv      bson.D
	withTV  bool
	inserts atomic.Int64
	// held counts the awaitable hellos being held: the monitor's state the test is about.
	held atomic.Int64
}

func startFakeMongod(t *testing.T, withTV bool) *fakeMongod {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeMongod{addr: ln.Addr().String(), withTV: withTV,
		tv: csDoc("processId", bson.NewObjectID(), "counter", int64(0))}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { f.serve(c) })
		}
	})
	return f
}

func (f *fakeMongod) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		h, msg, err := wire.ReadMessage(r, wire.DefaultMaxMessageSize)
		if err != nil {
			return
		}
		var body bson.Raw
		if h.OpCode == wire.OpQuery {
			q, err := wire.ParseQuery(msg)
			if err != nil {
				return
			}
			body = q.Command()
		} else {
			m, err := wire.ParseMsg(msg)
			if err != nil {
				return
			}
			body = m.Body
		}
		name := strings.ToLower(wire.CommandName(body))
		if _, err := body.LookupErr("maxAwaitTimeMS"); err == nil && (name == "hello" || name == "ismaster") {
			// An awaitable hello: nothing changes, so it is held until the connection closes.
			f.held.Add(1)
			_, _ = io.Copy(io.Discard, r)
			return
		}
		reply := f.reply(name)
		raw, _ := bson.Marshal(reply)
		var out []byte
		if h.OpCode == wire.OpQuery {
			out = wire.AppendReply(nil, 0, h.RequestID, 8, raw)
		} else {
			out = wire.AppendMsg(nil, 0, h.RequestID, 0, raw)
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func (f *fakeMongod) reply(name string) bson.D {
	switch name {
	case "hello", "ismaster":
		return csDoc("helloOk", true, "topologyVersion", f.tv, "hosts", bson.A{f.addr}, "setName", "rs0",
			"setVersion", int32(1), "isWritablePrimary", true, "ismaster", true, "secondary", false,
			"primary", f.addr, "me", f.addr, "electionId", bson.ObjectID{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1},
			"maxBsonObjectSize", int32(16<<20), "maxMessageSizeBytes", int32(48000000), "maxWriteBatchSize", int32(100000),
			"localTime", bson.NewDateTimeFromTime(time.Now()), "logicalSessionTimeoutMinutes", int32(30),
			"connectionId", int32(1), "minWireVersion", int32(0), "maxWireVersion", int32(21), "readOnly", false, "ok", 1.0)
	case "insert":
		if f.inserts.Add(1) > 1 {
			return csDoc("n", int32(1), "ok", 1.0)
		}
		reply := csDoc("n", int32(1), "ok", 1.0,
			"writeConcernError", csDoc("code", int32(91), "codeName", "ShutdownInProgress", "errmsg", "Replication is being shut down"),
			"errorLabels", bson.A{"RetryableWriteError"})
		if f.withTV {
			reply = append(reply, bson.E{Key: "topologyVersion", Value: f.tv})
		}
		return reply
	}
	return csDoc("ok", 1.0)
}
