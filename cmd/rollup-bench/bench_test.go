package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIngestCLI runs `rollup-bench ingest` end to end on a small shape with both clients: every
// answer is checked inside the run (all items applied), the report has one row per tick plus
// the total, and the command counts respect the bound.
func TestIngestCLI(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		usage   bool
		wantOut []string
	}{
		{"loadgen", []string{"--agents", "20", "--leaves", "5", "--ticks", "2"}, false,
			[]string{"20 agents x 5 leaves", "1 warm-up tick(s) not shown", "   1     100", "   2     100", " all     200", "1 / 1", "resends (an answer 503, 429, other 5xx or a transport failure, sent again after Retry-After): none"}},
		{"large answers (chunked)", []string{"--agents", "2", "--leaves", "200", "--ticks", "1"}, false,
			[]string{"   1     400"}},
		{"agentclient", []string{"--agents", "20", "--leaves", "5", "--ticks", "1", "--client", "agentclient"}, false,
			[]string{"   1     100", "1 / 1"}},
		{"guarded raw filter", []string{"--agents", "20", "--leaves", "5", "--ticks", "1", "--raw-filter", "guarded"}, false,
			[]string{"filter: rollup's guarded filter", "   1     100", "1 / 1"}},
		{"more connections", []string{"--agents", "20", "--leaves", "5", "--ticks", "1", "--conns", "512"}, false,
			[]string{"   1     100"}},
		{"negative connections", []string{"--conns", "-1"}, true, nil},
		{"connections of agentclient", []string{"--conns", "8", "--client", "agentclient"}, true, nil},
		{"no warm-up", []string{"--agents", "20", "--leaves", "5", "--ticks", "1", "--warmup", "0"}, false,
			[]string{"0 warm-up tick(s) not shown", "   1     100"}},
		{"negative warm-up", []string{"--warmup", "-1"}, true, nil},
		{"unknown raw filter", []string{"--raw-filter", "loose"}, true, nil},
		{"both profiles", []string{"--cpuprofile", "a.out", "--phaseprofile", "b"}, true, nil},
		{"unknown client", []string{"--client", "curl"}, true, nil},
		{"zero agents", []string{"--agents", "0"}, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkCLI(t, append([]string{"ingest"}, tc.args...), tc.usage, tc.wantOut)
		})
	}
}

// TestIngestPhaseProfiles: --phaseprofile writes one CPU profile per measured phase and tick
// (ingest and raw apart), each a gzipped pprof profile.
func TestIngestPhaseProfiles(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "ph")
	checkCLI(t, []string{"ingest", "--agents", "20", "--leaves", "5", "--ticks", "2", "--phaseprofile", prefix}, false,
		[]string{" all     200"})
	for _, name := range []string{"ingest.1", "raw.1", "ingest.2", "raw.2"} {
		b, err := os.ReadFile(prefix + "." + name)
		if err != nil {
			t.Fatalf("phase profile %s: %v", name, err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("phase profile %s: %d bytes, not a gzipped pprof profile", name, len(b))
		}
	}
	if matches, _ := filepath.Glob(prefix + ".*.3"); len(matches) > 0 {
		t.Errorf("profiles of a tick that did not run: %v", matches)
	}
}

// TestBaselinesCLI runs `rollup-bench baselines` on a tiny tree, and refuses wrong shapes.
func TestBaselinesCLI(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		usage   bool
		wantOut []string
	}{
		{"run", []string{"--groups", "1", "--servers", "2", "--processes", "3", "--ticks", "1"}, false,
			[]string{"6 leaves", "original", "reaggregate", "rollup", "1/1 ticks"}},
		{"servers not a multiple of groups", []string{"--groups", "2", "--servers", "3"}, true, nil},
		{"zero ticks", []string{"--ticks", "0"}, true, nil},
		{"unknown flag", []string{"--nope"}, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkCLI(t, append([]string{"baselines"}, tc.args...), tc.usage, tc.wantOut)
		})
	}
}

// TestScaleCLI runs `rollup-bench scale` small with its store and serve as real child processes
// of a rollup binary built for the test (rollup mongod, rollup serve): the report has the warm-up and measured ticks, the agents'
// resends, serve's and the store's peak RSS, and every parent of the last tick checked; with
// --serve-log-level debug --logs DIR, serve's log has the watcher's burst lines.
func TestScaleCLI(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		usage   bool
		wantOut []string
		// wantLog is a string serve-1-1.log must hold (the run gets --logs DIR).
		wantLog string
	}{
		{"subprocesses", []string{"--leaves", "200", "--ticks", "1", "--serve-log-level", "debug"}, false,
			[]string{"1 project(s) × (1 groups × 2 servers × 100 processes)", "rollup mongod --memory", "warm ", "serve peak RSS", "store peak RSS", "every parent correct",
				"resends  wait%", "agents: no resends"}, `"msg":"burst written"`},
		{"two projects, two instances", []string{"--projects", "2", "--leaves", "10", "--ticks", "1", "--instances", "2", "--partitions", "2"}, false,
			[]string{"2 project(s)", "serve instances per phase: 2", "every parent correct"}, ""},
		{"phases", []string{"--leaves", "10", "--ticks", "1", "--instances", "1,2"}, false,
			[]string{"phase 2: 2 serve instance(s)", "by serve instances"}, ""},
		{"instances not a list of numbers", []string{"--instances", "1;2"}, true, nil, ""},
		{"leaves not a multiple of 100", []string{"--leaves", "150"}, true, nil, ""},
		{"zero ticks", []string{"--ticks", "0"}, true, nil, ""},
		{"too many instances", []string{"--instances", "20"}, true, nil, ""},
		{"unknown serve log level", []string{"--serve-log-level", "verbose"}, true, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			args := append([]string{"scale"}, tc.args...)
			dir := t.TempDir()
			if tc.wantLog != "" {
				args = append(args, "--logs", dir)
			}
			err := run(ctx, &env{stdout: &stdout, stderr: &stderr, launcher: builtRollup(t)}, args)
			if tc.usage {
				if !errors.Is(err, errUsage) {
					t.Fatalf("err %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			for _, want := range tc.wantOut {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, stdout.String())
				}
			}
			if tc.wantLog != "" {
				b, err := os.ReadFile(filepath.Join(dir, "serve-1-1.log"))
				if err != nil || !strings.Contains(string(b), tc.wantLog) {
					t.Errorf("serve log (%v) lacks %q:\n%s", err, tc.wantLog, b)
				}
			}
		})
	}
}
