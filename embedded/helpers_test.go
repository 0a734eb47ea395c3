package embedded_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/embedded/wire"
)

// testTimeout bounds every driver call of a test.
const testTimeout = 30 * time.Second

// ctxFor returns a context that ends with the test or after testTimeout.
func ctxFor(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// env is what most tests need: the store, a connected client and a fresh database.
type env struct {
	store *embeddedtest.Store
	c     *mongo.Client
	db    *mongo.Database
	ctx   context.Context
}

// quickMonitor shortens the driver's heartbeat. The driver can miss the cancellation of an
// in-flight awaitable hello when a client disconnects; Disconnect then waits for the server
// to answer it, which takes maxAwaitTimeMS = the heartbeat interval (10 s by default, and
// the same with a real mongod). With 1 s a test never stalls long.
func quickMonitor() *options.ClientOptions {
	return options.Client().SetHeartbeatInterval(time.Second)
}

func newEnv(t testing.TB) env {
	t.Helper()
	store := embeddedtest.Start(t)
	c := store.Client(t, quickMonitor())
	return env{store: store, c: c, db: store.Database(t, c), ctx: ctxFor(t)}
}

// runRaw runs a command and returns the raw reply, also for ok:0 replies and replies with
// write errors (from the CommandError or WriteException, with the error), so tests can
// inspect every field the server sent.
func runRaw(ctx context.Context, db *mongo.Database, cmd any) (bson.Raw, error) {
	raw, err := db.RunCommand(ctx, cmd).Raw()
	if err != nil {
		var ce mongo.CommandError
		if errors.As(err, &ce) && len(ce.Raw) > 0 {
			return ce.Raw, err
		}
		var we mongo.WriteException
		if errors.As(err, &we) && len(we.Raw) > 0 {
			return we.Raw, err
		}
		return nil, err
	}
	return raw, nil
}

// mustD decodes raw into a bson.D.
func mustD(t testing.TB, raw bson.Raw) bson.D {
	t.Helper()
	var d bson.D
	if err := bson.Unmarshal(raw, &d); err != nil {
		t.Fatalf("unmarshal %v: %v", raw, err)
	}
	return d
}

// errCode returns the server error code carried by err, or 0.
func errCode(err error) int32 {
	var se mongo.ServerError
	if errors.As(err, &se) {
		var ce mongo.CommandError
		if errors.As(err, &ce) {
			return ce.Code
		}
		var we mongo.WriteException
		if errors.As(err, &we) {
			if len(we.WriteErrors) > 0 {
				return int32(we.WriteErrors[0].Code)
			}
			if we.WriteConcernError != nil {
				return int32(we.WriteConcernError.Code)
			}
		}
	}
	return 0
}

// rawConn is a minimal wire-protocol client for tests that must control exactly what is
// sent (legacy OP_QUERY, explicit lsid/txnNumber).
type rawConn struct {
	c     net.Conn
	r     *bufio.Reader
	reqID int32
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{c: c, r: bufio.NewReader(c)}
}

// roundTrip writes one message and reads the reply, checking responseTo.
func (rc *rawConn) roundTrip(t testing.TB, msg []byte, reqID int32) (wire.Header, []byte) {
	t.Helper()
	if err := rc.c.SetDeadline(time.Now().Add(testTimeout)); err != nil {
		t.Fatalf("set deadline: %v", err)
	}
	if _, err := rc.c.Write(msg); err != nil {
		t.Fatalf("write: %v", err)
	}
	h, reply, err := wire.ReadMessage(rc.r, wire.DefaultMaxMessageSize)
	if err != nil {
		t.Fatalf("read reply: %v", err)
	}
	if h.ResponseTo != reqID {
		t.Fatalf("reply responseTo = %d, want %d", h.ResponseTo, reqID)
	}
	return h, reply
}

// command sends cmd as an OP_MSG and returns the decoded reply body.
func (rc *rawConn) command(t testing.TB, cmd bson.D) bson.D {
	t.Helper()
	body, err := bson.Marshal(cmd)
	if err != nil {
		t.Fatalf("marshal command: %v", err)
	}
	rc.reqID++
	h, reply := rc.roundTrip(t, wire.AppendMsg(nil, rc.reqID, 0, 0, body), rc.reqID)
	if h.OpCode != wire.OpMsg {
		t.Fatalf("reply op code %d, want OP_MSG", h.OpCode)
	}
	m, err := wire.ParseMsg(reply)
	if err != nil {
		t.Fatalf("parse reply: %v", err)
	}
	return mustD(t, m.Body)
}

// opQuery sends a legacy OP_QUERY and returns the parsed OP_REPLY.
func (rc *rawConn) opQuery(t testing.TB, ns string, q bson.D) wire.Reply {
	t.Helper()
	doc, err := bson.Marshal(q)
	if err != nil {
		t.Fatalf("marshal query: %v", err)
	}
	rc.reqID++
	msg := make([]byte, 16, 64+len(doc))
	binary.LittleEndian.PutUint32(msg[4:], uint32(rc.reqID))
	binary.LittleEndian.PutUint32(msg[12:], uint32(wire.OpQuery))
	msg = binary.LittleEndian.AppendUint32(msg, 0) // flags
	msg = append(msg, ns...)
	msg = append(msg, 0)
	msg = binary.LittleEndian.AppendUint32(msg, 0)          // numberToSkip
	msg = binary.LittleEndian.AppendUint32(msg, 0xffffffff) // numberToReturn -1
	msg = append(msg, doc...)
	binary.LittleEndian.PutUint32(msg, uint32(len(msg)))
	h, reply := rc.roundTrip(t, msg, rc.reqID)
	if h.OpCode != wire.OpReply {
		t.Fatalf("reply op code %d, want OP_REPLY", h.OpCode)
	}
	r, err := wire.ParseReply(reply)
	if err != nil {
		t.Fatalf("parse OP_REPLY: %v", err)
	}
	return r
}

// get returns the value at a dotted path of d (nil when absent).
func get(d bson.D, path string) any {
	var cur any = d
	start := 0
	for i := 0; i <= len(path); i++ {
		if i < len(path) && path[i] != '.' {
			continue
		}
		key := path[start:i]
		start = i + 1
		doc, ok := cur.(bson.D)
		if !ok {
			return nil
		}
		found := false
		for _, e := range doc {
			if e.Key == key {
				cur, found = e.Value, true
				break
			}
		}
		if !found {
			return nil
		}
	}
	return cur
}

// asInt64 converts a BSON integer or integral double to int64.
func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case float64:
		return int64(x), float64(int64(x)) == x
	}
	return 0, false
}
