package clientconn

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo is a Handler that answers {ok: 1, conn, app, cmd} and remembers what it ran. Command
// "close" closes the connection silently, "fail" with an error, "app" sets the app name.
type echo struct {
	mu  sync.Mutex
	ran []bson.D
}

func (h *echo) Handle(_ context.Context, c *Conn, cmd bson.D) (bson.D, error) {
	h.mu.Lock()
	h.ran = append(h.ran, cmd)
	h.mu.Unlock()
	switch cmd[0].Key {
	case "close":
		return nil, ErrCloseConnection
	case "fail":
		return nil, errors.New("handler failed")
	case "app":
		c.SetAppName(cmd[0].Value.(string))
	}
	return bson.D{{Key: "ok", Value: 1.0}, {Key: "conn", Value: c.ID}, {Key: "app", Value: c.AppName()}, {Key: "cmd", Value: cmd}}, nil
}

func (h *echo) ErrorReply(err error) bson.D {
	e := mongoerr.As(err)
	return bson.D{{Key: "ok", Value: 0.0}, {Key: "code", Value: e.Code}, {Key: "errmsg", Value: e.Msg}}
}

func (h *echo) commands() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ran)
}

// start runs a Listener with h until the test ends and checks Run's clean return.
func start(t *testing.T, h Handler) *Listener {
	t.Helper()
	l, err := Listen("127.0.0.1:0", h, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	})
	return l
}

type client struct {
	c     net.Conn
	r     *bufio.Reader
	reqID int32
}

func dial(t *testing.T, l *Listener) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", l.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// A guard against a hang, not a bound: TestRequestBufferReuse moves 20 MiB through the
	// race detector, which took 36 s of a 30 s deadline once with four packages beside it.
	if err := c.SetDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	return &client{c: c, r: bufio.NewReader(c)}
}

func (cl *client) send(t *testing.T, build func(reqID int32) []byte) int32 {
	t.Helper()
	cl.reqID++
	if _, err := cl.c.Write(build(cl.reqID)); err != nil {
		t.Fatal(err)
	}
	return cl.reqID
}

// read reads one reply, checks it answers reqID, and returns its op code and document.
func (cl *client) read(t *testing.T, reqID int32) (int32, bson.D) {
	t.Helper()
	h, msg, err := wire.ReadMessage(cl.r, wire.DefaultMaxMessageSize)
	if err != nil {
		t.Fatalf("read reply: %v", err)
	}
	if h.ResponseTo != reqID {
		t.Fatalf("reply to %d, want %d", h.ResponseTo, reqID)
	}
	var raw bson.Raw
	switch h.OpCode {
	case wire.OpMsg:
		m, err := wire.ParseMsg(msg)
		if err != nil {
			t.Fatal(err)
		}
		raw = m.Body
	case wire.OpReply:
		r, err := wire.ParseReply(msg)
		if err != nil || len(r.Docs) != 1 {
			t.Fatalf("OP_REPLY %v %v", r, err)
		}
		raw = r.Docs[0]
	default:
		t.Fatalf("reply op code %d", h.OpCode)
	}
	var d bson.D
	if err := bson.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return h.OpCode, d
}

func msgOf(t *testing.T, cmd bson.D, flags uint32, seqs ...wire.Sequence) func(int32) []byte {
	body, err := bson.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return func(id int32) []byte { return wire.Msg{Flags: flags, Body: body, Sequences: seqs}.Append(nil, id, 0) }
}

// queryOf builds a legacy OP_QUERY of cmd on the namespace ns.
func queryOf(t *testing.T, ns string, cmd bson.D) func(int32) []byte {
	doc, err := bson.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return func(id int32) []byte {
		b := make([]byte, 16, 64+len(doc))
		binary.LittleEndian.PutUint32(b[4:], uint32(id))
		binary.LittleEndian.PutUint32(b[12:], uint32(wire.OpQuery))
		b = binary.LittleEndian.AppendUint32(b, 0) // flags
		b = append(append(b, ns...), 0)
		b = binary.LittleEndian.AppendUint32(b, 0)          // numberToSkip
		b = binary.LittleEndian.AppendUint32(b, 0xffffffff) // numberToReturn -1
		b = append(b, doc...)
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		return b
	}
}

// letters returns n random lowercase letters: a random 4 KiB block repeated, so that a
// 9 MiB payload costs one block's random draws under the race detector, not 9 million.
func letters(r *rand.Rand, n int) []byte {
	block := make([]byte, 4<<10)
	for j := range block {
		block[j] = byte('a' + r.IntN(26))
	}
	return bytes.Repeat(block, n/len(block)+1)[:n]
}

// sameDoc reports whether got, a document, marshals to the same bytes as want.
func sameDoc(t *testing.T, got any, want bson.D) bool {
	t.Helper()
	d, ok := got.(bson.D)
	if !ok {
		return false
	}
	g, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	w, err := bson.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(g, w)
}

func field(d bson.D, key string) any {
	for _, e := range d {
		if e.Key == key {
			return e.Value
		}
	}
	return nil
}

// TestConn drives one connection through everything the layer does on its own.
func TestConn(t *testing.T) {
	h := &echo{}
	l := start(t, h)
	cl := dial(t, l)

	// An OP_MSG with a document sequence: the handler gets one body with the sequence merged.
	doc1, _ := bson.Marshal(bson.D{{Key: "_id", Value: int32(1)}})
	doc2, _ := bson.Marshal(bson.D{{Key: "_id", Value: int32(2)}})
	id := cl.send(t, msgOf(t, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "db"}}, 0,
		wire.Sequence{Identifier: "documents", Docs: []bson.Raw{doc1, doc2}}))
	op, reply := cl.read(t, id)
	got := fmt.Sprint(field(reply, "cmd"))
	if op != wire.OpMsg || got != `{"insert":"c","$db":"db","documents":[{"_id":{"$numberInt":"1"}},{"_id":{"$numberInt":"2"}}]}` {
		t.Fatalf("OP_MSG with a sequence: op %d, handler got %s", op, got)
	}

	// A fire-and-forget (moreToCome) request runs but gets no reply: the next reply read is
	// the next request's.
	cl.send(t, msgOf(t, bson.D{{Key: "noreply", Value: 1}, {Key: "$db", Value: "db"}}, wire.FlagMoreToCome))
	id = cl.send(t, msgOf(t, bson.D{{Key: "app", Value: "tests"}, {Key: "$db", Value: "db"}}, 0))
	if _, reply = cl.read(t, id); field(reply, "app") != "tests" || h.commands() != 3 {
		t.Fatalf("after moreToCome: reply %v, %d commands run", reply, h.commands())
	}

	// The legacy handshake: hello/isMaster as OP_QUERY on a $cmd namespace answers OP_REPLY,
	// with $db taken from the namespace; other OP_QUERY commands are refused unrun (352).
	id = cl.send(t, queryOf(t, "admin.$cmd", bson.D{{Key: "isMaster", Value: 1}}))
	if op, reply = cl.read(t, id); op != wire.OpReply || fmt.Sprint(field(reply, "cmd")) != `{"isMaster":{"$numberInt":"1"},"$db":"admin"}` || field(reply, "app") != "tests" {
		t.Fatalf("OP_QUERY isMaster: op %d reply %v", op, reply)
	}
	id = cl.send(t, queryOf(t, "db.coll", bson.D{{Key: "find", Value: "coll"}}))
	if op, reply = cl.read(t, id); op != wire.OpReply || field(reply, "code") != int32(352) || h.commands() != 4 {
		t.Fatalf("OP_QUERY find: op %d reply %v, %d commands run", op, reply, h.commands())
	}

	// A body that is not valid BSON is an error reply; the connection goes on.
	id = cl.send(t, func(id int32) []byte {
		return wire.AppendMsg(nil, id, 0, 0, []byte{6, 0, 0, 0, 0x7f, 0})
	})
	if _, reply = cl.read(t, id); field(reply, "code") != wire.CodeInvalidBSON {
		t.Fatalf("invalid BSON: %v", reply)
	}

	// ErrCloseConnection closes the connection without a reply.
	cl.send(t, msgOf(t, bson.D{{Key: "close", Value: 1}, {Key: "$db", Value: "db"}}, 0))
	if _, _, err := wire.ReadMessage(cl.r, wire.DefaultMaxMessageSize); !errors.Is(err, io.EOF) {
		t.Fatalf("after ErrCloseConnection: read = %v, want EOF", err)
	}

	// A second connection has the next id and its own state; a handler error closes it.
	cl2 := dial(t, l)
	id = cl2.send(t, msgOf(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "db"}}, 0))
	if _, reply = cl2.read(t, id); field(reply, "conn") != int64(2) || field(reply, "app") != "" {
		t.Fatalf("second connection: %v", reply)
	}
	cl2.send(t, msgOf(t, bson.D{{Key: "fail", Value: 1}, {Key: "$db", Value: "db"}}, 0))
	if _, _, err := wire.ReadMessage(cl2.r, wire.DefaultMaxMessageSize); err == nil {
		t.Fatal("after a handler error the connection is still open")
	}
}

// blocker is a Handler whose commands wait for the connection's context.
type blocker struct{ started chan struct{} }

func (b blocker) Handle(ctx context.Context, _ *Conn, _ bson.D) (bson.D, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	return bson.D{{Key: "ok", Value: 1.0}}, nil
}

func (b blocker) ErrorReply(error) bson.D { return bson.D{{Key: "ok", Value: 0.0}} }

// TestRunShutdown: cancelling Run's context ends waiting commands, closes every connection
// and returns nil once their goroutines are done (goleak checks none is left).
func TestRunShutdown(t *testing.T) {
	b := blocker{started: make(chan struct{}, 2)}
	l, err := Listen("127.0.0.1:0", b, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var clients []*client
	for range 2 {
		cl := dial(t, l)
		cl.send(t, msgOf(t, bson.D{{Key: "wait", Value: 1}, {Key: "$db", Value: "db"}}, 0))
		<-b.started
		clients = append(clients, cl)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	for _, cl := range clients {
		// The waiting command was answered or the connection closed; either way it ends.
		for {
			if _, _, err := wire.ReadMessage(cl.r, wire.DefaultMaxMessageSize); err != nil {
				break
			}
		}
	}
	if _, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
		t.Fatal("still accepting after Run returned")
	}
}

// TestRequestBufferReuse: one connection reads requests of sizes around and beyond its kept
// buffer (small after large, large after small, one beyond what a MessageReader keeps) into its reused
// buffer. Every reply echoes its own request, and every command the handler kept still holds
// what was sent after all of them were read: nothing decoded aliases the request's bytes.
func TestRequestBufferReuse(t *testing.T) {
	h := &echo{}
	l := start(t, h)
	cl := dial(t, l)
	r := rand.New(rand.NewPCG(1, 2))
	sizes := []int{10, 200 << 10, 5, 1 << 20, 100, 9 << 20, 3, 64 << 10, 64<<10 + 1, 7}
	var sent []bson.D
	for i, n := range sizes {
		payload := letters(r, n)
		cmd := bson.D{{Key: "echo", Value: int32(i)}, {Key: "s", Value: string(payload)}, {Key: "b", Value: bson.Binary{Data: payload[:min(n, 1<<10)]}}, {Key: "$db", Value: "db"}}
		sent = append(sent, cmd)
		id := cl.send(t, msgOf(t, cmd, 0))
		if _, reply := cl.read(t, id); !sameDoc(t, field(reply, "cmd"), cmd) {
			t.Fatalf("request %d (%d bytes): the reply echoes another command", i, n)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, cmd := range sent {
		if !sameDoc(t, h.ran[i], cmd) {
			t.Fatalf("command %d changed after later requests were read into the connection's buffer", i)
		}
	}
}
