package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"testing"
)

// childArgsEnv makes the test binary run `rollup` with these (JSON-encoded) arguments instead
// of the tests, so a test can run — and kill -9 — a real rollup process.
const childArgsEnv = "ROLLUP_TEST_CHILD_ARGS"

func TestMain(m *testing.M) {
	if raw := os.Getenv(childArgsEnv); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			os.Exit(3)
		}
		runFn := run
		if len(args) > 0 && args[0] == stuckCommand {
			runFn = runStuck
		}
		os.Exit(runMain(&env{stdout: os.Stdout, stderr: os.Stderr}, args, runFn))
	}
	os.Exit(m.Run())
}

// stuckCommand makes a child process run runStuck instead of a subcommand.
const stuckCommand = "test-stuck-in-shutdown"

// runStuck is a command whose shutdown never ends: it prints "running", and once its context
// is cancelled prints "shutting down" and blocks forever.
func runStuck(ctx context.Context, e *env, _ []string) error {
	_, _ = fmt.Fprintln(e.stdout, "running")
	<-ctx.Done()
	_, _ = fmt.Fprintln(e.stdout, "shutting down")
	select {}
}

// parseCase is one row of a parser's test table: the command line, and either the config it
// must give or a part of the error it must give (wantErr).
type parseCase[C comparable] struct {
	args    []string
	want    C
	wantErr string
}

// checkParse runs parse on every case's command line and checks the config or the error.
func checkParse[C comparable](t *testing.T, parse func(*env, []string) (C, error), tests []parseCase[C]) {
	t.Helper()
	for _, tc := range tests {
		var out, errOut strings.Builder
		got, err := parse(&env{stdout: &out, stderr: &errOut}, tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err = %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: got %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
}

// TestVersion: `rollup version` prints the module version, the revision and the Go version
// from the build info, and refuses arguments.
func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"checkout", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "69d6559"}, {Key: "vcs.time", Value: "2026-11-28T06:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			"rollup v1.2.3 (69d6559, modified, 2026-11-28T06:00:00Z) go1.26.8\n"},
		{"no vcs", debug.BuildInfo{GoVersion: "go1.26.8"}, "rollup (devel) (unknown) go1.26.8\n"},
	} {
		var b strings.Builder
		printVersion(&b, &tc.info)
		if b.String() != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, b.String(), tc.want)
		}
	}
	var out, errb strings.Builder
	if code := runMain(&env{stdout: &out, stderr: &errb}, []string{"version"}, run); code != 0 || !strings.HasPrefix(out.String(), "rollup ") {
		t.Errorf("rollup version: exit %d, %q %q", code, out.String(), errb.String())
	}
	if code := runMain(&env{stdout: &out, stderr: &errb}, []string{"version", "x"}, run); code != 2 {
		t.Errorf("rollup version x: exit %d, want 2", code)
	}
}
