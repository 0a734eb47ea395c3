package retry

import (
	"context"
	"errors"
	"time"
)

// ErrBound is the cause of a context from Bound that ran out of time.
var ErrBound = errors.New("operation took too long")

// Bound returns a context that ends when parent does or d after the call, whichever comes
// first, and that has no deadline (parent's deadline, if any, is dropped; its values are
// kept). Use it for store commands that must not take long: driver v2 retries a retryable
// command for as long as its context has a deadline — a loop during an election or while
// connections are dropped — but exactly once without one. context.Cause of a context that ran
// out of time is ErrBound. The cancel function releases the timer; call it when done.
func Bound(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	stop := context.AfterFunc(parent, func() { cancel(context.Cause(parent)) })
	t := time.AfterFunc(d, func() { cancel(ErrBound) })
	return ctx, func() {
		t.Stop()
		stop()
		cancel(context.Canceled)
	}
}
