package main

import (
	"strings"
	"testing"
)

// TestStoreFlagsHideTheURI: a URI from the environment (with a password) is used, but --help
// never prints it, for every command that works on a deployment.
func TestStoreFlagsHideTheURI(t *testing.T) {
	const uri = "mongodb://user:s3cret@db1/?replicaSet=rs0"
	e := func(out *strings.Builder) *env {
		return &env{stdout: out, stderr: out, lookupEnv: mapEnv(map[string]string{"ROLLUP_MONGODB_URI": uri})}
	}
	for _, name := range []string{"serve", "migrate", "token", "tree", "replay", "verify"} {
		var out strings.Builder
		if err := run(t.Context(), e(&out), []string{name, "--help"}); err != nil {
			t.Fatalf("%s --help: %v", name, err)
		}
		if strings.Contains(out.String(), "s3cret") || !strings.Contains(out.String(), "env ROLLUP_MONGODB_URI") {
			t.Fatalf("%s --help reveals the URI or misses its variable:\n%s", name, out.String())
		}
	}
	var out strings.Builder
	c, err := parseToken(e(&out), []string{"list", "--project", "p"})
	if err != nil || c.store.uri != uri {
		t.Fatalf("uri = %q, %v; want the environment's", c.store.uri, err)
	}
	c, err = parseToken(e(&out), []string{"list", "--project", "p", "--mongodb-uri", "mongodb://db2"})
	if err != nil || c.store.uri != "mongodb://db2" {
		t.Fatalf("uri = %q, %v; want the flag's", c.store.uri, err)
	}
}
