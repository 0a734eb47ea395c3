package testnet

import (
	"net"
	"strconv"
	"sync"
	"testing"
)

// TestFreeAddr: addresses handed out at once, from many goroutines, are loopback, distinct,
// below the ephemeral range when it leaves room, and free to listen on.
func TestFreeAddr(t *testing.T) {
	const n = 200
	addrs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			a, err := FreeAddr()
			if err != nil {
				t.Error(err)
			}
			addrs[i] = a
		})
	}
	wg.Wait()
	lo, hi := belowEphemeral()
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
		host, p, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("%q: not a loopback address (%v)", a, err)
		}
		port, _ := strconv.Atoi(p)
		if hi > lo && (port < lo || port >= hi) {
			t.Errorf("%s: port outside [%d, %d), below the ephemeral range", a, lo, hi)
		}
	}
	ln, err := net.Listen("tcp", addrs[0])
	if err != nil {
		t.Fatalf("listen on a handed-out address: %v", err)
	}
	_ = ln.Close()
}
