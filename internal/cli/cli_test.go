package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/gameops/rollup/internal/testctx"
)

// TestExitCode: 0 ok, 2 a usage error however wrapped, 1 anything else (a forced exit too);
// errors are printed after the command's name.
func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		out  string
	}{
		{nil, 0, ""},
		{fmt.Errorf("%w: --from: bad", ErrUsage), 2, "rollup: usage: --from: bad\n"},
		{errors.New("connect: refused"), 1, "rollup: connect: refused\n"},
		{ErrForced, 1, "rollup: second signal: exiting without finishing the shutdown\n"},
	} {
		var b strings.Builder
		if got := ExitCode("rollup", &b, tc.err); got != tc.code || b.String() != tc.out {
			t.Errorf("ExitCode(%v) = %d %q, want %d %q", tc.err, got, b.String(), tc.code, tc.out)
		}
	}
}

// TestMainStatus runs the function with a live context and returns its status.
func TestMainStatus(t *testing.T) {
	var b strings.Builder
	code := Main("rollup-bench", &b, func(ctx context.Context) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: no benchmark", ErrUsage)
	})
	if code != 2 || b.String() != "rollup-bench: usage: no benchmark\n" {
		t.Fatalf("Main = %d %q", code, b.String())
	}
}

// TestMainSignal: the first SIGINT cancels run's context and says so on stderr; Main returns
// run's status once the signal watcher has returned too.
func TestMainSignal(t *testing.T) {
	var b strings.Builder
	code := Main("rollup", &b, func(ctx context.Context) error {
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-testctx.Context(t).Done():
			return errors.New("the signal did not cancel the context")
		}
	})
	if code != 1 || !strings.HasPrefix(b.String(), "rollup: interrupt: shutting down (send it again to exit at once)\n") {
		t.Fatalf("Main = %d %q", code, b.String())
	}
}
