package testnet

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// handedOut holds the ports FreeAddr has returned in this process: a port is handed out once.
// It is package state on purpose: ports belong to the process (and the machine), and tests
// that never see each other (the soak's seeds, cmd/rollup's parallel tests) must share it.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreeAddr returns a loopback address ("127.0.0.1:port") that was free a moment ago, for a
// listener the test stops and starts again on the same address. While it is stopped, nothing
// else may take the port, or the test's clients reach another process: with two soak seeds
// given one store port, a seed found the other's empty store and its serve exited on a
// duplicate instance id. So the port is one FreeAddr never returned before in this process
// (tests run at once), taken below the kernel's ephemeral range when there is room: a listener
// on port 0 and an outgoing connection, of any process, get ports from that range.
func FreeAddr() (string, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	lo, hi := belowEphemeral()
	for try := 0; try < 1000; try++ {
		port := 0
		if hi > lo {
			port = lo + rand.IntN(hi-lo)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // in use: another one
		}
		got := ln.Addr().(*net.TCPAddr).Port
		if err := ln.Close(); err != nil {
			return "", err
		}
		if !handedOut.ports[got] {
			handedOut.ports[got] = true
			return net.JoinHostPort("127.0.0.1", strconv.Itoa(got)), nil
		}
	}
	return "", errors.New("no free loopback port in 1000 tries")
}

// belowEphemeral returns the ports [lo, hi) below the ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), or lo == hi when there is no room for them.
func belowEphemeral() (lo, hi int) {
	const lowest = 10000
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(raw))
	if len(f) != 2 {
		return 0, 0
	}
	first, err := strconv.Atoi(f[0])
	if err != nil || first < lowest+1000 {
		return 0, 0
	}
	return lowest, first
}
