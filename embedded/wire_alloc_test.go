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

// TestClaimedMessageLengthCostsNothing: 100 connections each claim a 48 MB message and send
// 1 KiB of it. The server must not allocate the claimed lengths (that was 4.8 GB of
// allocations, and 141 MiB more heap with the connections open): what it allocates follows
// what arrives. It keeps serving other clients meanwhile.
func TestClaimedMessageLengthCostsNothing(t *testing.T) {
	store := embeddedtest.Start(t)
	store.SkipIfReal(t)
	const conns = 100
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	msg := make([]byte, wire.HeaderSize+1<<10)
	binary.LittleEndian.PutUint32(msg, uint32(wire.DefaultMaxMessageSize))
	binary.LittleEndian.PutUint32(msg[12:], uint32(wire.OpMsg))
	var open []net.Conn
	for range conns {
		c, err := net.DialTimeout("tcp", store.Server.Addr(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	// The server still answers others while the 100 wait for their bytes.
	rc := dialRaw(t, store.Server.Addr())
	if reply := rc.command(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}}); get(reply, "ok") != 1.0 {
		t.Fatalf("ping while 100 connections stall = %v", reply)
	}
	open = append(open, rc.c)
	for _, c := range open {
		_ = c.Close()
	}
	// Every connection's goroutine has read its header, allocated and ended once no
	// goroutine serves a connection any more.
	deadline := time.Now().Add(testTimeout)
	stacks := make([]byte, 1<<20)
	for serving(stacks) {
		if time.Now().After(deadline) {
			t.Fatal("the server's connection goroutines did not end")
		}
		runtime.Gosched()
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// Per connection: its 64 KiB read buffer, the first 64 KiB of the message, and what the
	// server and the test's logger allocate for a connection, with slack. (The claimed
	// lengths would be 100 x 48 MB.)
	const bound = conns * 512 << 10
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("100 connections claiming 48 MB each: %d KiB allocated", got>>10)
	if got > bound {
		t.Errorf("100 connections claiming 48 MB each allocated %d MiB, want <= %d MiB", got>>20, bound>>20)
	}
}

// serving reports whether a goroutine of the process is serving an embedded-server connection.
func serving(buf []byte) bool {
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "clientconn.(*Listener).serve(")
}
