package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gameops/rollup/internal/bench"
)

// rollupBuild is the rollup binary the scale tests run, built once by builtRollup into a
// directory TestMain removes.
var rollupBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if rollupBuild.dir != "" {
		_ = os.RemoveAll(rollupBuild.dir)
	}
	os.Exit(code)
}

// builtRollup returns an env.launcher that runs a rollup binary built from ./cmd/rollup
// (once per test binary) whatever --rollup says, as scale runs it in a checkout.
func builtRollup(t *testing.T) func(string) (bench.Launcher, error) {
	t.Helper()
	rollupBuild.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			rollupBuild.err = err
			return
		}
		if rollupBuild.dir, err = os.MkdirTemp("", "rollup-bench-test"); err != nil {
			rollupBuild.err = err
			return
		}
		rollupBuild.path = filepath.Join(rollupBuild.dir, "rollup")
		out, err := exec.Command(goTool, "build", "-o", rollupBuild.path, "github.com/gameops/rollup/cmd/rollup").CombinedOutput()
		if err != nil {
			rollupBuild.err = errors.New(string(out))
		}
	})
	if rollupBuild.err != nil {
		t.Fatalf("building rollup: %v", rollupBuild.err)
	}
	return func(string) (bench.Launcher, error) { return rollupLauncher(rollupBuild.path) }
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

// TestExitCodes: no benchmark or an unknown one is a usage error (2), help succeeds (0), and
// every benchmark's --help succeeds without running it.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 2},
		{[]string{"nope"}, 2},
		{[]string{"help"}, 0},
		{[]string{"--help"}, 0},
		{[]string{"mongod", "--n", "0"}, 2},
		{[]string{"scale", "--rollup", filepath.Join(t.TempDir(), "missing")}, 2},
		{[]string{"mongod", "--help"}, 0},
		{[]string{"changestream", "--help"}, 0},
		{[]string{"ingest", "--help"}, 0},
		{[]string{"baselines", "--help"}, 0},
		{[]string{"scale", "--help"}, 0},
		{[]string{"runaway", "--help"}, 0},
	} {
		var out, errOut strings.Builder
		if code := runMain(&env{stdout: &out, stderr: &errOut}, tc.args, run); code != tc.want {
			t.Errorf("%v: exit %d, want %d\n%s", tc.args, code, tc.want, errOut.String())
		}
	}
}

// TestFindRollup: --rollup names the binary (an error naming the flag when it is not one);
// without it, a rollup next to the executable, else on PATH, else an error naming the flag.
func TestFindRollup(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "rollup")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findRollup(fake); err != nil || got != fake {
		t.Errorf("--rollup %s: %q, %v", fake, got, err)
	}
	if _, err := findRollup(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "--rollup") {
		t.Errorf("--rollup missing: err %v, want one naming --rollup", err)
	}
	t.Setenv("PATH", dir)
	if got, err := findRollup(""); err != nil || got != fake {
		t.Errorf("rollup on PATH: %q, %v", got, err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := findRollup(""); err == nil || !strings.Contains(err.Error(), "--rollup") {
		t.Errorf("no rollup anywhere: err %v, want one naming --rollup", err)
	}
}
