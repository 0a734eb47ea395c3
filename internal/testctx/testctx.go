package testctx

import (
	"context"
	"testing"
	"time"

	etestctx "github.com/gameops/rollup/embedded/testctx"
)

// Deadline returns when t's waits must end: the test binary's deadline less a margin
// (embedded/testctx.Deadline).
func Deadline(t testing.TB) time.Time { return etestctx.Deadline(t) }

// Context returns t.Context() with Deadline(t) (embedded/testctx.Context).
func Context(t testing.TB) context.Context { return etestctx.Context(t) }

// WaitFor polls cond until it holds, and fails t naming what it waited for if Deadline(t)
// passes first (embedded/testctx.WaitFor): the repository's one poll helper.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	etestctx.WaitFor(t, what, cond)
}

// Window is a fixed window of a test: Full normally, Short under -short
// (embedded/testctx.Window).
type Window = etestctx.Window

// Seeds is how many seeds a randomized cross-check runs: def, or ROLLUP_TEST_SEEDS
// (embedded/testctx.Seeds).
func Seeds(t testing.TB, def int) int {
	t.Helper()
	return etestctx.Seeds(t, def)
}
