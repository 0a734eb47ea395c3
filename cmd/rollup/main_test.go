package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
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

// checkCLI runs the command line args in process and checks it fails with a usage error
// (usage) or succeeds with every wantOut string in its standard output.
func checkCLI(t *testing.T, args []string, usage bool, wantOut []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, &env{stdout: &stdout, stderr: &stderr}, args)
	if usage {
		if !errors.Is(err, errUsage) {
			t.Fatalf("err %v, want a usage error", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, s := range wantOut {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, stdout.String())
		}
	}
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
