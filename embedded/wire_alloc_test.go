package embedded_test

import (
	"encoding/binary"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/embedded/wire"
)

// TestClaimedMessageLengthCostsNothing: 100 connections each claim a 48 MB message, send
// 1 KiB of it and stall. The server must not allocate the claimed lengths (that was 4.8 GB of
// allocations, and the server grew by 141 MiB with the connections open): while all 100 wait
// for their bytes, its heap in use has grown by about a connection's buffers each, and what
// it allocated follows what arrived. It keeps serving other clients meanwhile.
func TestClaimedMessageLengthCostsNothing(t *testing.T) {
	store := embeddedtest.Start(t)
	store.SkipIfReal(t)
	const conns = 100
	stacks := make([]byte, 8<<20) // for goroutine dumps; allocated before the baseline
	runtime.GC()
	var before, stalled, after runtime.MemStats
	runtime.ReadMemStats(&before)

	msg := make([]byte, wire.HeaderSize+1<<10)
	binary.LittleEndian.PutUint32(msg, uint32(wire.DefaultMaxMessageSize))
	binary.LittleEndian.PutUint32(msg[12:], uint32(wire.OpMsg))
	var open []net.Conn
	for range conns {
		c, err := net.DialTimeout("tcp", store.Server.Addr(), testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	// The signal: every connection's goroutine has read its header, allocated, and waits in
	// wire.readBody for the bytes that do not come.
	deadline := time.Now().Add(testTimeout)
	for waiting(stacks) < conns {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d connections wait for their message's bytes", waiting(stacks), conns)
		}
		runtime.Gosched()
	}
	runtime.GC()
	runtime.ReadMemStats(&stalled)

	// The server still answers others while the 100 wait for their bytes.
	rc := dialRaw(t, store.Server.Addr())
	if reply := rc.command(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); get(reply, "ok") != 1.0 {
		t.Fatalf("ping while 100 connections stall = %v", reply)
	}
	open = append(open, rc.c)
	for _, c := range open {
		_ = c.Close()
	}
	// Every connection's goroutine ends once its connection is closed.
	for serving(stacks) {
		if time.Now().After(deadline) {
			t.Fatal("the server's connection goroutines did not end")
		}
		runtime.Gosched()
	}
	runtime.ReadMemStats(&after)

	// Per stalled connection: its 64 KiB read buffer and the first 64 KiB of the message,
	// with slack for the connection's own state. (The claims are 100 × 48 MB.)
	inUse := int64(stalled.HeapInuse) - int64(before.HeapInuse)
	const inUseBound = conns * 192 << 10
	t.Logf("100 connections claiming 48 MB each, stalled: heap in use +%d KiB", inUse>>10)
	if inUse > inUseBound {
		t.Errorf("100 stalled connections claiming 48 MB each grew the heap in use by %d MiB, want <= %d MiB", inUse>>20, inUseBound>>20)
	}
	// Allocated in all, with what the server and the test's logger allocate per connection.
	const allocBound = conns * 512 << 10
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("100 connections claiming 48 MB each: %d KiB allocated", got>>10)
	if got > allocBound {
		t.Errorf("100 connections claiming 48 MB each allocated %d MiB, want <= %d MiB", got>>20, allocBound>>20)
	}
}

// waiting counts the goroutines waiting in wire.readBody for the rest of a message.
func waiting(buf []byte) int {
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "embedded/wire.readBody(")
}

// serving reports whether a goroutine of the process is serving an embedded-server connection.
func serving(buf []byte) bool {
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "clientconn.(*Listener).serve(")
}
