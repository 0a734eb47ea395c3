package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/embeddedtest"
)

// mongodInProcess runs `rollup mongod args...` in the test process until the test ends and
// returns the URI it prints.
func mongodInProcess(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, logs := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, &env{stdout: stdout, stderr: logs}, append([]string{"mongod"}, args...)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mongod: %v", err)
		}
		if t.Failed() {
			t.Logf("mongod logs:\n%s", logs.String())
		}
	})
	var uri string
	waitUntil(t, 30*time.Second, "the URI line", func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("mongod exited before serving: %v\n%s", err, logs.String())
		default:
		}
		uri, _, _ = strings.Cut(stdout.String(), "\n")
		return strings.HasPrefix(uri, "mongodb://") && strings.Contains(stdout.String(), "\n")
	})
	return uri
}

// withUser puts user:password into a mongodb:// URI and adds authSource=admin and extra.
func withUser(uri, user, password, extra string) string {
	return strings.Replace(uri, "mongodb://", "mongodb://"+url.UserPassword(user, password).String()+"@", 1) + "&authSource=admin" + extra
}

// writeUsersFile writes a --users file with mode perm.
func writeUsersFile(t *testing.T, dir, content string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, "users.yaml")
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMongodBadSecurityInput: malformed or mismatched TLS files, bad --users files and
// listening beyond loopback without --auth each fail start-up with a usage error that names
// the file or the flag to pass.
func TestMongodBadSecurityInput(t *testing.T) {
	dir := t.TempDir()
	f := embeddedtest.WriteTLSFiles(t, dir)
	otherKey := filepath.Join(dir, "other-key.pem")
	embeddedtest.WriteKey(t, otherKey, embeddedtest.NewKey(t))
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	usersDir := func(content string, perm os.FileMode) string { return writeUsersFile(t, t.TempDir(), content, perm) }
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"malformed certificate", []string{"--tls-cert", garbage, "--tls-key", f.KeyFile}, garbage},
		{"malformed key", []string{"--tls-cert", f.CertFile, "--tls-key", garbage}, garbage},
		{"mismatched key", []string{"--tls-cert", f.CertFile, "--tls-key", otherKey}, otherKey + " and certificate " + f.CertFile},
		{"certificate without key", []string{"--tls-cert", f.CertFile}, "both --tls-cert and --tls-key"},
		{"missing users file", []string{"--users", filepath.Join(dir, "none.yaml")}, "none.yaml"},
		{"unknown users field", []string{"--users", usersDir("users:\n  - user: a\n    pasword: x\n", 0o600)}, "field pasword not found"},
		{"users without password or credentials", []string{"--users", usersDir("users:\n  - user: a\n", 0o600)}, "exactly one of a password or SCRAM-SHA-256 credentials"},
		{"bad credentials", []string{"--users", usersDir("users:\n  - user: a\n    credentials:\n      SCRAM-SHA-256: {iterationCount: 15000, salt: 'c2FsdA==', storedKey: '!', serverKey: ''}\n", 0o600)}, "storedKey"},
		{"passwords readable by others", []string{"--users", usersDir("users:\n  - user: a\n    password: x\n", 0o644)}, "chmod 600"},
		{"beyond loopback without auth", []string{"--listen", "0.0.0.0:0"}, "refusing to listen on 0.0.0.0:0 without --auth; pass --insecure-no-auth to override"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := append([]string{"mongod", "--memory", "--listen", "127.0.0.1:0"}, tc.args...)
			err := run(ctx, &env{stdout: &syncBuffer{}, stderr: &syncBuffer{}}, args)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("mongod %v = %v, want a usage error with %q", tc.args, err, tc.want)
			}
		})
	}
}

// TestMongodTLSAuth runs `rollup mongod --auth --users FILE --tls-cert --tls-key` and
// connects the Go driver with tls=true and the user's password (a wrong one gets code 18),
// then the official Python and Node drivers when installed (.ci/run installs them).
func TestMongodTLSAuth(t *testing.T) {
	dir := t.TempDir()
	f := embeddedtest.WriteTLSFiles(t, dir)
	users := writeUsersFile(t, dir, "users:\n  - user: alice\n    password: \"s3cret pass\"\n", 0o600)
	uri := mongodInProcess(t, "--listen", "127.0.0.1:0", "--memory", "--auth", "--users", users,
		"--tls-cert", f.CertFile, "--tls-key", f.KeyFile, "--log-level", "warn")
	if !strings.Contains(uri, "tls=true") {
		t.Fatalf("URI %q lacks tls=true", uri)
	}
	good := withUser(uri, "alice", "s3cret pass", "&tlsCAFile="+url.QueryEscape(f.CAFile))
	bad := withUser(uri, "alice", "wrong", "&tlsCAFile="+url.QueryEscape(f.CAFile))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	check := func(uri string) error {
		c, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
		if err != nil {
			return err
		}
		defer func() { _ = c.Disconnect(context.Background()) }()
		coll := c.Database("rollup_clients").Collection("go")
		if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: "go"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: 1}}}}, options.UpdateOne().SetUpsert(true)); err != nil {
			return err
		}
		return coll.FindOne(ctx, bson.D{{Key: "_id", Value: "go"}}).Err()
	}
	if err := check(good); err != nil {
		t.Fatalf("Go driver, right password over TLS: %v", err)
	}
	var ce mongo.CommandError
	if err := check(bad); !errors.As(err, &ce) || ce.Code != 18 {
		t.Fatalf("Go driver, wrong password: %v, want code 18", err)
	}

	t.Run("pymongo", func(t *testing.T) {
		python := findPython(t)
		out, err := exec.CommandContext(ctx, python, "testdata/mongod-clients/check.py", good, bad).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "1\n18" {
			t.Fatalf("PyMongo: %v\n%s", err, out)
		}
	})
	t.Run("node", func(t *testing.T) {
		if err := exec.CommandContext(ctx, "node", "-e", "require('mongodb')").Run(); err != nil {
			t.Skipf("node or its mongodb package is absent (%v): npm install mongodb@6.22.0 and set NODE_PATH, as .ci/run does", err)
		}
		out, err := exec.CommandContext(ctx, "node", "testdata/mongod-clients/check.js", good, bad).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "1\n18" {
			t.Fatalf("Node driver: %v\n%s", err, out)
		}
	})
}

// findPython returns a python3 that imports pymongo (Debian's python3-pymongo installs for
// /usr/bin/python3, which may not be the python3 on PATH), or skips the test.
func findPython(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import pymongo").Run() == nil {
			return p
		}
	}
	t.Skip("no python3 with pymongo: apt-get install python3-pymongo, as .ci/run does")
	return ""
}

// TestServeOnSecuredMongod: rollup serve runs on a `rollup mongod --auth --tls-cert …` store
// given a URI with the user's password, tls=true and tlsCAFile: it becomes ready (migrations,
// change streams and writes all pass authentication).
func TestServeOnSecuredMongod(t *testing.T) {
	dir := t.TempDir()
	f := embeddedtest.WriteTLSFiles(t, dir)
	users := writeUsersFile(t, dir, "users:\n  - user: rollup\n    password: \"serve's password\"\n", 0o600)
	uri := mongodInProcess(t, "--listen", "127.0.0.1:0", "--memory", "--auth", "--users", users,
		"--tls-cert", f.CertFile, "--tls-key", f.KeyFile, "--log-level", "warn")
	s := serveInProcess(t, "--mongodb-uri", withUser(uri, "rollup", "serve's password", "&tlsCAFile="+url.QueryEscape(f.CAFile)),
		"--listen", "127.0.0.1:0", "--log-level", "warn")
	waitUntil(t, 30*time.Second, "serve on the secured store to be ready", func() bool {
		code, _ := readyz(s.url)
		return code == http.StatusOK
	})
}
