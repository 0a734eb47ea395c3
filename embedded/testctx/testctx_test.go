package testctx

import (
	"testing"
	"time"
)

// TestDeadline: the deadline is before the binary's, with a margin, and in the future.
func TestDeadline(t *testing.T) {
	d := Deadline(t)
	if !d.After(time.Now()) {
		t.Fatalf("deadline %v is not in the future", d)
	}
	if bd, ok := t.Deadline(); ok && !d.Before(bd) {
		t.Fatalf("deadline %v is not before the binary's %v", d, bd)
	}
	ctx := Context(t)
	if cd, ok := ctx.Deadline(); !ok || !cd.Equal(d) && cd.Sub(d) > time.Second {
		t.Fatalf("context deadline %v, %v; want about %v", cd, ok, d)
	}
}

// fakeTB is a testing.TB with a chosen binary deadline.
type fakeTB struct {
	testing.TB
	deadline time.Time
	ok       bool
}

func (f fakeTB) Deadline() (time.Time, bool) { return f.deadline, f.ok }

func TestDeadlineMargins(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		left     time.Duration
		ok       bool
		min, max time.Duration // of Deadline − now
	}{
		{10 * time.Minute, true, 8*time.Minute + 50*time.Second, 9*time.Minute + 10*time.Millisecond},
		{5 * time.Second, true, 3 * time.Second, 4*time.Second + 10*time.Millisecond},
		{500 * time.Millisecond, true, -time.Second, 10 * time.Millisecond},
		{0, false, noDeadline - time.Second, noDeadline + time.Second},
	} {
		got := Deadline(fakeTB{TB: t, deadline: now.Add(tc.left), ok: tc.ok}).Sub(now)
		if got < tc.min || got > tc.max {
			t.Errorf("%v left (%v): deadline in %v, want in [%v, %v]", tc.left, tc.ok, got, tc.min, tc.max)
		}
	}
}

func TestSeeds(t *testing.T) {
	t.Setenv(SeedsEnv, "")
	if got := Seeds(t, 3); got != 3 {
		t.Errorf("unset: %d seeds, want the default 3", got)
	}
	t.Setenv(SeedsEnv, "40")
	if got := Seeds(t, 3); got != 40 {
		t.Errorf("%s=40: %d seeds, want 40", SeedsEnv, got)
	}
	for _, bad := range []string{"0", "-2", "x"} {
		t.Setenv(SeedsEnv, bad)
		f := &fatalTB{TB: t}
		Seeds(f, 3)
		if !f.failed {
			t.Errorf("%s=%q: no failure", SeedsEnv, bad)
		}
	}
}

// fatalTB records Fatalf instead of stopping the test.
type fatalTB struct {
	testing.TB
	failed bool
}

func (f *fatalTB) Helper()               {}
func (f *fatalTB) Fatalf(string, ...any) { f.failed = true }
