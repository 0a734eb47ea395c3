package testctx

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// Without a binary deadline (go test -timeout 0), waits end this long after they start.
const noDeadline = 10 * time.Minute

// Deadline returns when t's waits must end: the test binary's deadline less a tenth of the
// time left (at least 1 s left), so that a wait that runs out fails the test with its message
// before the binary's timeout panics; or noDeadline from now without a binary deadline.
func Deadline(t testing.TB) time.Time {
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			left := time.Until(d)
			return d.Add(-max(left/10, min(left, time.Second)))
		}
	}
	return time.Now().Add(noDeadline)
}

// Context returns t.Context() (canceled just before t's cleanups run) with Deadline(t).
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithDeadline(t.Context(), Deadline(t))
	t.Cleanup(cancel)
	return ctx
}

// WaitFor polls cond every 5 ms until it holds, and fails t naming what it waited for if
// Deadline(t) passes first. It is for conditions nothing signals (a stored document, another
// process's state), never a substitute for a signal the test could wait on.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := Deadline(t)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		tm := time.NewTimer(5 * time.Millisecond) // a bounded poll interval
		<-tm.C
	}
}

// Window is how long a test holds a fixed window (a fault, an outage, a wait that proves
// nothing happens): Full normally, Short under go test -short. Tests name their windows as
// package variables of this type, so every fixed wait of a package is in one place; D reads
// the flag when the test runs (not at package initialization, before flags are parsed).
type Window struct{ Full, Short time.Duration }

// D is the window's length in this run.
func (w Window) D() time.Duration {
	if testing.Short() {
		return w.Short
	}
	return w.Full
}

// SeedsEnv names the environment variable that sets how many seeds every randomized
// cross-check runs (Seeds).
const SeedsEnv = "ROLLUP_TEST_SEEDS"

// Seeds is how many seeds a randomized cross-check runs: def, or ROLLUP_TEST_SEEDS when it
// is set (a positive integer; anything else fails t). A test's def is what covers its code
// under go test -race in the suite's time; a longer search sets ROLLUP_TEST_SEEDS.
func Seeds(t testing.TB, def int) int {
	t.Helper()
	v := os.Getenv(SeedsEnv)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", SeedsEnv, v)
	}
	return n
}
