package blackpipe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"

	"github.com/gameops/rollup/embedded/testctx"
	"github.com/gameops/rollup/embedded/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeServer speaks just enough OP_MSG/OP_QUERY: it answers every request expecting a reply
// with {ok: 1, cmd: <name>, n: <documents in sequences>} (plus hello fields for handshakes) and
// records the raw bytes it received and sent.
type fakeServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
	recv  [][]byte
	sent  [][]byte
	ids   atomic.Int32
}

func startFake(t *testing.T) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func replyDoc(name string, n int) []byte {
	d := bson.D{{Key: "ok", Value: 1.0}, {Key: "cmd", Value: name}, {Key: "n", Value: int32(n)}}
	if name == "hello" || name == "isMaster" || name == "ismaster" {
		d = append(d, bson.D{
			{Key: "isWritablePrimary", Value: true}, {Key: "ismaster", Value: true}, {Key: "helloOk", Value: true},
			{Key: "maxBsonObjectSize", Value: int32(16 * 1024 * 1024)}, {Key: "maxMessageSizeBytes", Value: int32(48000000)},
			{Key: "maxWriteBatchSize", Value: int32(100000)}, {Key: "localTime", Value: bson.DateTime(0)},
			{Key: "logicalSessionTimeoutMinutes", Value: int32(30)}, {Key: "connectionId", Value: int32(1)},
			{Key: "minWireVersion", Value: int32(0)}, {Key: "maxWireVersion", Value: int32(21)},
		}...)
	}
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err) // Constant document: cannot fail.
	}
	return b
}

func (s *fakeServer) serve(c net.Conn) {
	for {
		h, msg, err := wire.ReadMessage(c, wire.DefaultMaxMessageSize)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.recv = append(s.recv, msg)
		s.mu.Unlock()
		var out []byte
		switch h.OpCode {
		case wire.OpMsg:
			m, err := wire.ParseMsg(msg)
			if err != nil {
				return
			}
			if m.Flags&wire.FlagMoreToCome != 0 {
				continue
			}
			n := 0
			for _, sq := range m.Sequences {
				n += len(sq.Docs)
			}
			out = wire.AppendMsg(nil, s.ids.Add(1), h.RequestID, 0, replyDoc(wire.CommandName(m.Body), n))
		case wire.OpQuery:
			q, err := wire.ParseQuery(msg)
			if err != nil {
				return
			}
			out = wire.AppendReply(nil, s.ids.Add(1), h.RequestID, 8, replyDoc(wire.CommandName(q.Command()), 0))
		default:
			return
		}
		s.mu.Lock()
		s.sent = append(s.sent, out)
		s.mu.Unlock()
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func (s *fakeServer) received() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.recv...)
}

func (s *fakeServer) commands() []string {
	var out []string
	for _, msg := range s.received() {
		if m, err := wire.ParseMsg(msg); err == nil {
			out = append(out, wire.CommandName(m.Body))
		}
	}
	return out
}

// startProxy runs a proxy to target until the test ends (or stop is called) and checks that
// Run returns nil.
func startProxy(t *testing.T, target string) (p *Proxy, stop func()) {
	t.Helper()
	p = New(target, nil)
	if err := p.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-errc:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("Run did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return p, stop
}

type client struct {
	t    *testing.T
	conn net.Conn
	id   int32
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(testctx.Deadline(t))
	t.Cleanup(func() { _ = c.Close() })
	return &client{t: t, conn: c}
}

func doc(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (c *client) send(m wire.Msg) []byte {
	c.t.Helper()
	c.id++
	raw := m.Append(nil, c.id, 0)
	if _, err := c.conn.Write(raw); err != nil {
		c.t.Fatal(err)
	}
	return raw
}

// call sends cmd and reads the reply.
func (c *client) call(cmd string) ([]byte, error) {
	c.send(wire.Msg{Body: doc(c.t, bson.D{{Key: cmd, Value: int32(1)}, {Key: "$db", Value: "admin"}})})
	_, reply, err := wire.ReadMessage(c.conn, wire.DefaultMaxMessageSize)
	return reply, err
}

func (c *client) mustCall(cmd string) []byte {
	c.t.Helper()
	reply, err := c.call(cmd)
	if err != nil {
		c.t.Fatalf("%s: %v", cmd, err)
	}
	m, err := wire.ParseMsg(reply)
	if err != nil {
		c.t.Fatal(err)
	}
	if got := m.Body.Lookup("cmd").StringValue(); got != cmd {
		c.t.Fatalf("reply to %s is for %q", cmd, got)
	}
	return reply
}

func TestForwardingIsByteExact(t *testing.T) {
	srv := startFake(t)
	p, _ := startProxy(t, srv.ln.Addr().String())
	c := dial(t, p.Addr())
	body := doc(t, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "d"}})
	msgs := []wire.Msg{
		{Body: doc(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})},
		{Flags: wire.FlagMoreToCome, Body: body, Sequences: []wire.Sequence{{Identifier: "documents", Docs: []bson.Raw{doc(t, bson.D{{Key: "_id", Value: 0}})}}}},
		{Flags: wire.FlagChecksumPresent, Body: body, Sequences: []wire.Sequence{{Identifier: "documents", Docs: []bson.Raw{doc(t, bson.D{{Key: "_id", Value: 1}}), doc(t, bson.D{{Key: "_id", Value: 2}})}}}},
	}
	var sent, got [][]byte
	for _, m := range msgs {
		sent = append(sent, c.send(m))
		if m.Flags&wire.FlagMoreToCome != 0 {
			continue
		}
		_, reply, err := wire.ReadMessage(c.conn, wire.DefaultMaxMessageSize)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, reply)
	}
	recv := srv.received()
	if len(recv) != len(sent) {
		t.Fatalf("server received %d messages, want %d", len(recv), len(sent))
	}
	for i := range sent {
		if !bytes.Equal(recv[i], sent[i]) {
			t.Fatalf("request %d altered in transit", i)
		}
	}
	srv.mu.Lock()
	replies := append([][]byte(nil), srv.sent...)
	srv.mu.Unlock()
	if len(replies) != len(got) {
		t.Fatalf("client got %d replies, server sent %d", len(got), len(replies))
	}
	for i := range got {
		if !bytes.Equal(got[i], replies[i]) {
			t.Fatalf("reply %d altered in transit", i)
		}
	}
	if m, _ := wire.ParseMsg(got[1]); m.Body.Lookup("n").Int32() != 2 {
		t.Fatalf("reply %v", m.Body)
	}
}

func TestStatsAndReset(t *testing.T) {
	srv := startFake(t)
	p, _ := startProxy(t, srv.ln.Addr().String())
	const clients, pings = 4, 25
	var wg sync.WaitGroup
	var up, down atomic.Int64
	cs := make([]*client, clients)
	for i := range cs {
		cs[i] = dial(t, p.Addr())
	}
	errc := make(chan error, clients)
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range pings {
				c.id++
				raw := wire.AppendMsg(nil, c.id, 0, 0, pingBody)
				if _, err := c.conn.Write(raw); err != nil {
					errc <- err
					return
				}
				up.Add(int64(len(raw)))
				_, reply, err := wire.ReadMessage(c.conn, wire.DefaultMaxMessageSize)
				if err != nil {
					errc <- err
					return
				}
				down.Add(int64(len(reply)))
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	s := p.Stats()
	if s.Commands["ping"] != clients*pings || s.Requests != clients*pings || len(s.Commands) != 1 ||
		s.BytesUp != up.Load() || s.BytesDown != down.Load() || s.Conns != clients {
		t.Fatalf("stats %+v; want %d pings, %d bytes up, %d down", s, clients*pings, up.Load(), down.Load())
	}
	if n := len(p.Commands("ping")); n != clients*pings {
		t.Fatalf("recorded %d pings", n)
	}
	s.Commands["ping"] = -1 // The copy is the caller's.
	if p.Stats().Commands["ping"] != clients*pings {
		t.Fatal("Stats returned the proxy's own map")
	}
	p.ResetStats()
	if s := p.Stats(); s.Requests != 0 || s.BytesUp != 0 || s.BytesDown != 0 || s.Conns != 0 || len(s.Commands) != 0 || len(p.Commands("ping")) != 0 {
		t.Fatalf("after reset: %+v", s)
	}
	cs[0].mustCall("hello")
	if s := p.Stats(); s.Commands["hello"] != 1 || s.Requests != 1 {
		t.Fatalf("after reset and hello: %+v", s)
	}
}

var pingBody = func() []byte {
	b, _ := bson.Marshal(bson.D{{Key: "ping", Value: int32(1)}, {Key: "$db", Value: "admin"}})
	return b
}()

func TestCommandsMergesSequencesAndUnwrapsQuery(t *testing.T) {
	srv := startFake(t)
	p, _ := startProxy(t, srv.ln.Addr().String())
	c := dial(t, p.Addr())
	updates := []bson.Raw{
		doc(t, bson.D{{Key: "q", Value: bson.D{{Key: "id", Value: "a"}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}, {Key: "upsert", Value: true}}),
		doc(t, bson.D{{Key: "q", Value: bson.D{{Key: "id", Value: "b"}}}, {Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}}, {Key: "upsert", Value: true}}),
	}
	c.send(wire.Msg{
		Body:      doc(t, bson.D{{Key: "update", Value: "c"}, {Key: "ordered", Value: false}, {Key: "$db", Value: "d"}}),
		Sequences: []wire.Sequence{{Identifier: "updates", Docs: updates}},
	})
	if _, _, err := wire.ReadMessage(c.conn, wire.DefaultMaxMessageSize); err != nil {
		t.Fatal(err)
	}
	got := p.Commands("update")
	if len(got) != 1 {
		t.Fatalf("Commands(update) = %d bodies", len(got))
	}
	var cmd struct {
		Update  string   `bson:"update"`
		Ordered bool     `bson:"ordered"`
		Updates []bson.D `bson:"updates"`
	}
	if err := bson.Unmarshal(got[0], &cmd); err != nil {
		t.Fatal(err)
	}
	if cmd.Update != "c" || cmd.Ordered || len(cmd.Updates) != 2 {
		t.Fatalf("recorded %+v", cmd)
	}
	for i, u := range updates {
		want, _ := bson.Marshal(cmd.Updates[i])
		if !bytes.Equal(want, u) {
			t.Fatalf("update %d = %v", i, cmd.Updates[i])
		}
	}
	if len(p.Commands("ping")) != 0 || len(p.Commands("")) != 0 {
		t.Fatal("unrelated commands recorded")
	}

	// Legacy OP_QUERY handshake, wrapped in $query.
	q := doc(t, bson.D{{Key: "$query", Value: bson.D{{Key: "isMaster", Value: int32(1)}, {Key: "helloOk", Value: true}}}})
	raw := appendQuery(q)
	if _, err := c.conn.Write(raw); err != nil {
		t.Fatal(err)
	}
	_, reply, err := wire.ReadMessage(c.conn, wire.DefaultMaxMessageSize)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := wire.ParseReply(reply); err != nil || len(r.Docs) != 1 || !r.Docs[0].Lookup("ismaster").Boolean() {
		t.Fatalf("OP_REPLY %+v, %v", r, err)
	}
	if s := p.Stats(); s.Commands["isMaster"] != 1 || s.Commands["update"] != 1 || s.Requests != 2 {
		t.Fatalf("stats %+v", s)
	}
	if got := p.Commands("isMaster"); len(got) != 1 || !bytes.Equal(got[0], doc(t, bson.D{{Key: "isMaster", Value: int32(1)}, {Key: "helloOk", Value: true}})) {
		t.Fatalf("Commands(isMaster) = %v", got)
	}
}

func appendQuery(query []byte) []byte {
	b := make([]byte, 16, 64)
	b = append(b, 0, 0, 0, 0)
	b = append(b, "admin.$cmd\x00"...)
	b = append(b, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff)
	b = append(b, query...)
	h := wire.Header{Length: int32(len(b)), RequestID: 99, OpCode: wire.OpQuery}
	for i, v := range []int32{h.Length, h.RequestID, h.ResponseTo, h.OpCode} {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	return b
}

func TestRecordingIsBounded(t *testing.T) {
	srv := startFake(t)
	p, _ := startProxy(t, srv.ln.Addr().String())
	c := dial(t, p.Addr())
	const total = MaxRecorded + 50
	var stream []byte
	for i := range total {
		stream = wire.AppendMsg(stream, int32(i), 0, wire.FlagMoreToCome, doc(t, bson.D{{Key: "insert", Value: "c"}, {Key: "i", Value: int32(i)}}))
	}
	if _, err := c.conn.Write(stream); err != nil {
		t.Fatal(err)
	}
	testctx.WaitFor(t, "all requests", func() bool { return p.Stats().Requests == total })
	got := p.Commands("insert")
	if len(got) != MaxRecorded {
		t.Fatalf("kept %d bodies, want %d", len(got), MaxRecorded)
	}
	if first, last := got[0].Lookup("i").Int32(), got[len(got)-1].Lookup("i").Int32(); first != total-MaxRecorded || last != total-1 {
		t.Fatalf("kept bodies %d..%d", first, last)
	}
	if p.Stats().Commands["insert"] != total {
		t.Fatal("counting must not be bounded")
	}
}

// TestCountOnly: a proxy told to count only still counts every command (sequences and
// OP_QUERY included) but keeps no bodies.
func TestCountOnly(t *testing.T) {
	srv := startFake(t)
	p, _ := startProxy(t, srv.ln.Addr().String())
	p.CountOnly()
	c := dial(t, p.Addr())
	c.send(wire.Msg{
		Body:      doc(t, bson.D{{Key: "update", Value: "c"}, {Key: "$db", Value: "d"}}),
		Sequences: []wire.Sequence{{Identifier: "updates", Docs: []bson.Raw{doc(t, bson.D{{Key: "q", Value: bson.D{}}})}}},
	})
	if _, _, err := wire.ReadMessage(c.conn, wire.DefaultMaxMessageSize); err != nil {
		t.Fatal(err)
	}
	if _, err := c.conn.Write(appendQuery(doc(t, bson.D{{Key: "$query", Value: bson.D{{Key: "isMaster", Value: int32(1)}}}}))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := wire.ReadMessage(c.conn, wire.DefaultMaxMessageSize); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Commands["update"] != 1 || s.Commands["isMaster"] != 1 || s.Requests != 2 {
		t.Fatalf("stats %+v", s)
	}
	if len(p.Commands("update")) != 0 || len(p.Commands("isMaster")) != 0 {
		t.Fatal("bodies recorded after CountOnly")
	}
}

func TestResetNextReply(t *testing.T) {
	for _, cmd := range []string{"ping", ""} {
		t.Run("cmd="+cmd, func(t *testing.T) {
			srv := startFake(t)
			p, _ := startProxy(t, srv.ln.Addr().String())
			c := dial(t, p.Addr())
			p.ResetNextReply(cmd)
			if cmd != "" {
				c.mustCall("hello") // Does not match: forwarded untouched.
			}
			_, err := c.call("ping")
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("client error %v, want connection reset", err)
			}
			testctx.WaitFor(t, "server to see the ping", func() bool {
				cmds := srv.commands()
				return len(cmds) > 0 && cmds[len(cmds)-1] == "ping"
			})
			// Disarmed: a new connection works.
			dial(t, p.Addr()).mustCall("ping")
			if s := p.Stats(); s.Commands["ping"] != 2 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

func TestDropAfterBytes(t *testing.T) {
	srv := startFake(t)
	p, _ := startProxy(t, srv.ln.Addr().String())
	c := dial(t, p.Addr())
	size := len(c.mustCall("ping"))

	p.DropAfterBytes(size + 10)
	c.mustCall("ping") // Fits: forwarded whole.
	before := p.Stats().BytesDown
	_, err := c.call("ping")
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("client error %v, want unexpected EOF", err)
	}
	if got := p.Stats().BytesDown - before; got != 10 {
		t.Fatalf("forwarded %d bytes of the cut reply, want 10", got)
	}

	c = dial(t, p.Addr())
	c.mustCall("ping") // Disarmed.
	p.DropAfterBytes(0)
	if _, err := c.call("ping"); !errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("client error %v, want EOF before any byte", err)
	}

	c = dial(t, p.Addr())
	p.DropAfterBytes(5)
	p.DropAfterBytes(-1) // Disarmed again.
	c.mustCall("ping")
}

func TestStall(t *testing.T) {
	srv := startFake(t)
	p, _ := startProxy(t, srv.ln.Addr().String())
	c := dial(t, p.Addr())
	const d = 400 * time.Millisecond
	p.Stall("ping", d)
	c.mustCall("hello") // Not stalled: it does not match.
	start := time.Now()
	c.mustCall("ping")
	if el := time.Since(start); el < d {
		t.Fatalf("stalled reply came after %v, want >= %v", el, d)
	}
	// Disarmed: the next ping comes back without waiting for the stall (generous bound).
	p.Stall("hello", time.Hour)
	start = time.Now()
	c.mustCall("ping")
	if el := time.Since(start); el >= d {
		t.Fatalf("unstalled reply took %v", el)
	}
}

func TestStallEndsWithRun(t *testing.T) {
	srv := startFake(t)
	p, stop := startProxy(t, srv.ln.Addr().String())
	c := dial(t, p.Addr())
	p.Stall("", time.Hour)
	c.send(wire.Msg{Body: pingBody})
	testctx.WaitFor(t, "server to answer", func() bool { return len(srv.received()) == 1 })
	start := time.Now()
	stop() // Checks that Run returns nil promptly despite the stalled reply.
	if _, _, err := wire.ReadMessage(c.conn, wire.DefaultMaxMessageSize); !errors.Is(err, io.EOF) {
		t.Fatalf("client error %v after stop, want EOF", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("stop took %v", el)
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Fatal("proxy still accepts after Run returned")
	}
}

func TestDropRequest(t *testing.T) {
	srv := startFake(t)
	p, _ := startProxy(t, srv.ln.Addr().String())
	c := dial(t, p.Addr())
	p.DropRequest("insert")
	c.mustCall("ping")
	if _, err := c.call("insert"); !errors.Is(err, io.EOF) {
		t.Fatalf("client error %v, want EOF", err)
	}
	c2 := dial(t, p.Addr())
	c2.mustCall("insert") // Disarmed.
	if got := srv.commands(); len(got) != 2 || got[0] != "ping" || got[1] != "insert" {
		t.Fatalf("server saw %v, want [ping insert]", got)
	}
	if s := p.Stats(); s.Commands["insert"] != 2 || len(p.Commands("insert")) != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestUnreachableTarget(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	_ = ln.Close()
	p, _ := startProxy(t, target)
	c := dial(t, p.Addr())
	if _, err := c.call("ping"); err == nil {
		t.Fatal("call through a proxy to a dead target succeeded")
	}
}

func TestRunErrors(t *testing.T) {
	p := New("127.0.0.1:1", nil)
	if err := p.Run(context.Background()); err == nil {
		t.Fatal("Run before Listen succeeded")
	}
	if p.Addr() != "" {
		t.Fatal("Addr before Listen")
	}
	if err := p.Listen("127.0.0.1:99999"); err == nil {
		t.Fatal("Listen on a bad address succeeded")
	}
	p, stop := startProxy(t, "127.0.0.1:1")
	if err := p.Listen("127.0.0.1:0"); err == nil {
		t.Fatal("second Listen succeeded")
	}
	// Once a connection was accepted (and closed: the target is dead), Run is running.
	if _, err := dial(t, p.Addr()).call("ping"); err == nil {
		t.Fatal("call to a dead target succeeded")
	}
	if err := p.Run(context.Background()); err == nil {
		t.Fatal("second Run succeeded")
	}
	stop()
}

func TestDriverThroughProxy(t *testing.T) {
	srv := startFake(t)
	p, _ := startProxy(t, srv.ln.Addr().String())
	cl, err := mongo.Connect(options.Client().
		ApplyURI(fmt.Sprintf("mongodb://%s/?directConnection=true", p.Addr())).
		SetServerSelectionTimeout(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testctx.Context(t)
	defer func() {
		if err := cl.Disconnect(ctx); err != nil {
			t.Error(err)
		}
	}()
	if err := cl.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	p.ResetNextReply("ping")
	if err := cl.Ping(ctx, nil); err == nil {
		t.Fatal("ping with a reset reply succeeded")
	}
	s := p.Stats()
	t.Logf("stats through the driver: %+v", s)
	if s.Commands["ping"] != 2 || s.Commands["hello"]+s.Commands["isMaster"] < 1 {
		t.Fatalf("stats %+v", s)
	}
}
