package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
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
