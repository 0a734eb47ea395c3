package main

import (
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"syscall"
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
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := run(ctx, &env{stdout: os.Stdout, stderr: os.Stderr}, args)
		stop()
		os.Exit(exitCode(os.Stderr, err))
	}
	os.Exit(m.Run())
}
