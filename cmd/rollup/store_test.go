package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

// TestStoreFlagsHideTheURI: a URI from the environment (with a password) is used, but --help
// never prints it.
func TestStoreFlagsHideTheURI(t *testing.T) {
	const uri = "mongodb://user:s3cret@db1/?replicaSet=rs0"
	t.Setenv("ROLLUP_MONGODB_URI", uri)
	var s storeFlags
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	s.register(fs)
	fs.PrintDefaults()
	if strings.Contains(out.String(), "s3cret") {
		t.Fatalf("help output reveals the URI:\n%s", out.String())
	}
	if err := fs.Parse(nil); err != nil || s.uri != uri {
		t.Fatalf("uri = %q, %v; want the environment's", s.uri, err)
	}
	if err := fs.Parse([]string{"--mongodb-uri", "mongodb://db2"}); err != nil || s.uri != "mongodb://db2" {
		t.Fatalf("uri = %q, %v; want the flag's", s.uri, err)
	}
}
