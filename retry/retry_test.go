package retry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/internal/status"
)

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}
	tests := []struct {
		attempt  int
		min, max time.Duration
	}{
		{0, 50 * time.Millisecond, 100 * time.Millisecond},
		{1, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 100 * time.Millisecond, 200 * time.Millisecond},
		{4, 400 * time.Millisecond, 800 * time.Millisecond},
		{5, 800 * time.Millisecond, 1600 * time.Millisecond},
		{6, time.Second, 2 * time.Second},
		{64, time.Second, 2 * time.Second},
		{1 << 30, time.Second, 2 * time.Second},
	}
	for _, tc := range tests {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := b.Delay(tc.attempt)
			if d < tc.min || d > tc.max {
				t.Fatalf("Delay(%d) = %v, want in [%v, %v]", tc.attempt, d, tc.min, tc.max)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("Delay(%d): %d distinct values in 200 draws, want jitter", tc.attempt, len(seen))
		}
	}
	if d := (Backoff{}).Delay(100); d < DefaultMax/2 || d > DefaultMax {
		t.Errorf("zero Backoff: Delay(100) = %v, want the default cap", d)
	}
}

type configError struct{}

func (configError) Error() string   { return "bad config" }
func (configError) Permanent() bool { return true }

func TestIsPermanent(t *testing.T) {
	cmdErr := func(code int32, labels ...string) error {
		return mongo.CommandError{Code: code, Message: "x", Labels: labels}
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"marked", Permanent(errors.New("x")), true},
		{"marked, wrapped", fmt.Errorf("start: %w", Permanent(errors.New("x"))), true},
		{"type with Permanent()", fmt.Errorf("a: %w", configError{}), true},
		{"Unauthorized", cmdErr(13), true},
		{"AuthenticationFailed", cmdErr(18), true},
		{"NotImplemented", fmt.Errorf("open change stream: %w", cmdErr(238)), true},
		{"change streams need a replica set", cmdErr(40573), true},
		{"driver refuses a value", mongo.MarshalError{Value: 1, Err: errors.New("bad")}, true},
		{"NotWritablePrimary", cmdErr(10107, "RetryableWriteError"), false},
		{"InterruptedDueToReplStateChange", cmdErr(11602), false},
		{"PrimarySteppedDown", cmdErr(189), false},
		{"ShutdownInProgress", cmdErr(91), false},
		{"write exception with a step-down code", mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Code: 64}}, false},
		{"duplicate key", mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: 11000}}}, false},
		{"canceled", context.Canceled, false},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), false},
		{"server selection", mongo.ErrClientDisconnected, false},
		{"unknown", errors.New("something else"), false},
	}
	for _, tc := range tests {
		if got := IsPermanent(tc.err); got != tc.want {
			t.Errorf("%s: IsPermanent(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestDo(t *testing.T) {
	fast := Backoff{Base: time.Millisecond, Max: 2 * time.Millisecond}
	t.Run("transient errors are retried until success", func(t *testing.T) {
		tr := status.New("c", "starting")
		var states []status.State
		calls := 0
		err := Do(context.Background(), Policy{Backoff: fast, Tracker: tr, What: "op"}, func(context.Context) error {
			calls++
			states = append(states, tr.State())
			if calls < 5 {
				return mongo.CommandError{Code: 10107, Message: "not primary"}
			}
			return nil
		})
		if err != nil || calls != 5 {
			t.Fatalf("Do = %v after %d calls, want nil after 5", err, calls)
		}
		if s := states[2]; s.Ready || !strings.HasPrefix(s.Reason, "op: ") || !strings.Contains(s.Reason, "not primary") {
			t.Errorf("state during the failures = %+v", s)
		}
		if s := tr.State(); !s.Ready {
			t.Errorf("state after success = %+v", s)
		}
	})
	t.Run("a permanent error stops at once", func(t *testing.T) {
		tr := status.New("c", "starting")
		calls := 0
		err := Do(context.Background(), Policy{Backoff: fast, Tracker: tr, What: "op"}, func(context.Context) error {
			calls++
			return mongo.CommandError{Code: 13, Message: "not authorized"}
		})
		if calls != 1 || !IsPermanent(err) {
			t.Fatalf("Do = %v after %d calls, want the permanent error after 1", err, calls)
		}
		if s := tr.State(); s.Ready || !strings.HasPrefix(s.Reason, "op: ") || !strings.Contains(s.Reason, "not authorized") {
			t.Errorf("state = %+v", s)
		}
	})
	t.Run("the context ends the retries", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		err := Do(ctx, Policy{Backoff: Backoff{Base: time.Hour, Max: time.Hour}}, func(context.Context) error {
			calls++
			cancel()
			return errors.New("down")
		})
		if !errors.Is(err, context.Canceled) || calls != 1 {
			t.Fatalf("Do = %v after %d calls, want context.Canceled after 1", err, calls)
		}
	})
}

// TestBound: the bounded context has no deadline (the driver then retries once, not until
// it), ends after its bound with ErrBound as the cause, and ends with its parent.
func TestBound(t *testing.T) {
	parent, cancelParent := context.WithTimeout(context.Background(), time.Hour)
	defer cancelParent()
	ctx, cancel := Bound(parent, 20*time.Millisecond)
	defer cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("the bounded context has a deadline")
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not ended after its bound")
	}
	if !errors.Is(context.Cause(ctx), ErrBound) || !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("cause %v, err %v", context.Cause(ctx), ctx.Err())
	}

	p2, cancelP2 := context.WithCancelCause(context.Background())
	ctx2, cancel2 := Bound(p2, time.Hour)
	defer cancel2()
	boom := errors.New("parent gone")
	cancelP2(boom)
	select {
	case <-ctx2.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not ended with its parent")
	}
	if !errors.Is(context.Cause(ctx2), boom) {
		t.Fatalf("cause %v, want the parent's", context.Cause(ctx2))
	}
}
