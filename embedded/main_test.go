package embedded_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/gameops/rollup/embedded"
)

// childDirEnv, when set, turns the test binary into a durable embedded server on that data
// directory (see TestKill9Durability): it prints "URI <uri>" on stdout and serves until
// killed.
const childDirEnv = "ROLLUP_EMBEDDED_TEST_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		os.Exit(runChildServer(dir))
	}
	os.Exit(m.Run())
}

func runChildServer(dir string) int {
	srv, err := embedded.New(embedded.Config{Listen: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		fmt.Fprintf(os.Stderr, "child: start: %v\n", err)
		return 1
	}
	fmt.Printf("URI %s\n", srv.URI())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := srv.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "child: run: %v\n", err)
		return 1
	}
	return 0
}
