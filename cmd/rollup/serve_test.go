package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gameops/rollup/internal/app"
	"github.com/gameops/rollup/internal/settings"
)

// mapEnv is a LookupEnv over a map.
func mapEnv(m map[string]string) settings.LookupEnv {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// writeFile writes text to a new file in a test directory and returns its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseServeConfig(t *testing.T) {
	file := writeFile(t, "serve.yaml", "listen: ':9000'\nlog-level: debug\ndatabase: fromfile\n")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(serveConfig) bool
		wantErr []string
	}{
		{"defaults", nil, nil, func(c serveConfig) bool {
			return c.Listen == "127.0.0.1:8080" && c.Database == "rollup" && c.MongoURI == "" && c.DataDir == "rollup-data" && c.DemoAgents == 20 &&
				c.DemoBackfill == app.DefaultDemoBackfill
		}, nil},
		{"env", nil, map[string]string{"ROLLUP_MONGODB_URI": "mongodb://a,b/?replicaSet=rs0", "ROLLUP_LISTEN": ":8081"}, func(c serveConfig) bool {
			return c.MongoURI == "mongodb://a,b/?replicaSet=rs0" && c.Listen == ":8081"
		}, nil},
		{"flag > env > file", []string{"--config", file, "--listen", ":1"}, map[string]string{"ROLLUP_LISTEN": ":2", "ROLLUP_LOG_LEVEL": "warn"}, func(c serveConfig) bool {
			return c.Listen == ":1" && c.LogLevel == "warn" && c.Database == "fromfile" && c.source("database") == "config file "+file+" line 3"
		}, nil},
		{"demo with a URI from the environment", []string{"--demo"}, map[string]string{"ROLLUP_MONGODB_URI": "mongodb://a"}, nil,
			[]string{"--mongodb-uri (from environment variable ROLLUP_MONGODB_URI)", "--demo"}},
		{"bad listen from the file", []string{"--config", writeFile(t, "bad.yaml", "listen: nowhere\n")}, nil, nil,
			[]string{"--listen (from config file", "line 1", "host:port"}},
		{"bad log level", []string{"--log-level", "loud"}, nil, nil, []string{"--log-level (from flag)", `"loud"`}},
		{"demo agent without the demo", []string{"--demo-agent"}, nil, nil, []string{"--demo-agent (from flag)", "add --demo"}},
		{"bad demo agents", nil, map[string]string{"ROLLUP_DEMO_AGENTS": "0"}, nil, []string{"--demo-agents (from environment variable ROLLUP_DEMO_AGENTS)"}},
		{"demo backfill from the environment", []string{"--demo"}, map[string]string{"ROLLUP_DEMO_BACKFILL": "2"}, func(c serveConfig) bool {
			return c.DemoBackfill == 2
		}, nil},
		{"workers from the environment", nil, map[string]string{"ROLLUP_BULK_WORKERS": "8", "ROLLUP_RECOMPUTE_WORKERS": "4"}, func(c serveConfig) bool {
			return c.BulkWorkers == 8 && c.RecomputeWorkers == 4
		}, nil},
		{"too many bulk workers", []string{"--bulk-workers", "65"}, nil, nil, []string{"--bulk-workers (from flag)", "want 0 (the default) to 64"}},
		{"negative recompute workers", []string{"--recompute-workers", "-1"}, nil, nil, []string{"--recompute-workers (from flag)", "got -1"}},
		{"negative demo backfill", []string{"--demo-backfill", "-1"}, nil, nil, []string{"--demo-backfill (from flag)", "want 0 to 288"}},
		{"unparsable demo agents", nil, map[string]string{"ROLLUP_DEMO_AGENTS": "x"}, nil, []string{"--demo-agents (from environment variable ROLLUP_DEMO_AGENTS)"}},
		{"bad database", []string{"--database", "a.b"}, nil, nil, []string{"--database (from flag)"}},
		{"URI not echoed", nil, map[string]string{"ROLLUP_MONGODB_URI": "mongodb://u:hunter2/x@h"}, nil, []string{"--mongodb-uri (from environment"}},
		{"empty data dir", []string{"--data", ""}, nil, nil, []string{"--data (from flag)"}},
		{"client timeout in the URI", []string{"--mongodb-uri", "mongodb://h/?timeoutMS=5000"}, nil, nil,
			[]string{"--mongodb-uri (from flag)", "timeoutMS=5000", "retry"}},
		{"unknown file key", []string{"--config", writeFile(t, "typo.yaml", "lisen: ':1'\n")}, nil, nil, []string{`unknown setting "lisen"`}},
		{"argument", []string{"extra"}, nil, nil, []string{`unexpected argument "extra"`}},
		{"instance id: flag > env", []string{"--instance-id", "a-1"}, map[string]string{"ROLLUP_INSTANCE_ID": "b"}, func(c serveConfig) bool {
			return c.InstanceID == "a-1"
		}, nil},
		{"instance id from the environment", nil, map[string]string{"ROLLUP_INSTANCE_ID": "pod-7"}, func(c serveConfig) bool {
			return c.InstanceID == "pod-7" && c.source("instance-id") == "environment variable ROLLUP_INSTANCE_ID"
		}, nil},
		{"instance id with a space", []string{"--instance-id", "a b"}, nil, nil, []string{"--instance-id (from flag)", "space"}},
		{"instance id too long", []string{"--instance-id", strings.Repeat("x", 201)}, nil, nil, []string{"--instance-id (from flag)", "at most 200"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			c, err := parseServe(&env{stdout: &out, stderr: &out, lookupEnv: mapEnv(tc.env)}, tc.args)
			if tc.wantErr == nil {
				if err != nil || !tc.check(c) {
					t.Fatalf("got %+v, %v", c, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; config %+v", c)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

func TestParseServeHelp(t *testing.T) {
	var out strings.Builder
	_, err := parseServe(&env{stdout: &out, stderr: &out, lookupEnv: mapEnv(map[string]string{"ROLLUP_MONGODB_URI": "mongodb://u:hunter2@h"})}, []string{"--help"})
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err %v, want flag.ErrHelp", err)
	}
	for _, w := range []string{"--config", "env ROLLUP_MONGODB_URI", "env ROLLUP_TOTALS_GROUPS", "flag > environment > file > default"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("help lacks %q", w)
		}
	}
	if strings.Contains(out.String(), "hunter2") {
		t.Error("help shows the URI of the environment")
	}
}
