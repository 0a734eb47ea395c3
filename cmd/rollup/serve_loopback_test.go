package main

import (
	"strings"
	"testing"
)

// TestServeEmbeddedStoreLoopback: serve's in-process store has no authentication, so it
// listens on loopback (by default, and any --embedded-listen beyond it is refused, naming
// the flag and rollup mongod --auth); with --mongodb-uri the flag does not matter.
func TestServeEmbeddedStoreLoopback(t *testing.T) {
	parse := func(args ...string) (serveConfig, error) {
		var out strings.Builder
		return parseServe(&env{stdout: &out, stderr: &out, lookupEnv: mapEnv(nil)}, args)
	}
	c, err := parse()
	if err != nil || c.EmbeddedListen != "127.0.0.1:0" {
		t.Fatalf("default --embedded-listen %q (%v), want 127.0.0.1:0", c.EmbeddedListen, err)
	}
	for _, ok := range []string{"127.0.0.1:27018", "[::1]:0", "localhost:0"} {
		if _, err := parse("--embedded-listen", ok); err != nil {
			t.Errorf("--embedded-listen %s: %v", ok, err)
		}
	}
	for _, bad := range []string{"0.0.0.0:27017", ":27017", "[::]:0", "192.0.2.1:27017", "example.com:27017"} {
		_, err := parse("--embedded-listen", bad)
		if err == nil || !strings.Contains(err.Error(), "--embedded-listen (from flag)") || !strings.Contains(err.Error(), "loopback only") || !strings.Contains(err.Error(), "rollup mongod --auth") {
			t.Errorf("--embedded-listen %s: %v, want a refusal naming loopback and rollup mongod --auth", bad, err)
		}
	}
	if _, err := parse("--embedded-listen", "0.0.0.0:27017", "--mongodb-uri", "mongodb://h/?replicaSet=rs0"); err != nil {
		t.Errorf("--embedded-listen beyond loopback with --mongodb-uri (unused): %v", err)
	}
}
