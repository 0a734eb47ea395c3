package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/internal/status"
)

// Backoff is a capped exponential backoff with jitter.
type Backoff struct {
	// Base is the first delay (default 100ms).
	Base time.Duration
	// Max caps the delay (default 2s).
	Max time.Duration
}

// Defaults of Backoff.
const (
	DefaultBase = 100 * time.Millisecond
	DefaultMax  = 2 * time.Second
)

// Delay returns the wait before retry number attempt (1 for the first retry): Base doubled
// each attempt up to Max, drawn uniformly from its upper half so that instances spread out.
func (b Backoff) Delay(attempt int) time.Duration {
	base, capped := b.Base, b.Max
	if base <= 0 {
		base = DefaultBase
	}
	if capped <= 0 {
		capped = DefaultMax
	}
	d := capped
	if attempt < 1 {
		attempt = 1
	}
	if attempt < 31 && base<<(attempt-1) < capped {
		d = base << (attempt - 1)
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// Wait sleeps Delay(attempt), or less when ctx ends first (then it returns ctx's error).
func (b Backoff) Wait(ctx context.Context, attempt int) error {
	t := time.NewTimer(b.Delay(attempt))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// permanentError marks an error as permanent.
type permanentError struct{ err error }

func (e permanentError) Error() string   { return e.err.Error() }
func (e permanentError) Unwrap() error   { return e.err }
func (e permanentError) Permanent() bool { return true }

// Permanent marks err as one that retrying cannot fix (nil stays nil).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// permanentCodes are server error codes that a retry cannot fix: the deployment or the
// credentials are wrong, or the store lacks a feature rollup needs.
var permanentCodes = map[int32]string{
	13:    "Unauthorized",
	18:    "AuthenticationFailed",
	59:    "CommandNotFound",
	73:    "InvalidNamespace",
	115:   "CommandNotSupported",
	166:   "CommandNotSupportedOnView",
	238:   "NotImplemented",
	40573: "change streams need a replica set",
}

// IsPermanent reports whether err is a configuration or programming error (see the package
// comment); nil and context errors are not.
func IsPermanent(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var p interface{ Permanent() bool }
	if errors.As(err, &p) && p.Permanent() {
		return true
	}
	var ia mongo.InvalidArgumentError
	var me mongo.MarshalError
	if errors.As(err, &ia) || errors.As(err, &me) {
		return true
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		for code := range permanentCodes {
			if se.HasErrorCode(int(code)) {
				return true
			}
		}
	}
	return false
}

// Policy says how Do retries and where it reports.
type Policy struct {
	// Backoff spaces the attempts.
	Backoff Backoff
	// Tracker is told Ready after a success and NotReady (with What and the error) after a
	// failure; nil reports nowhere.
	Tracker *status.Tracker
	// What names the operation in reasons and logs ("apply migrations").
	What string
	// Log gets a warning at the first failure and every LogEvery after, and a note at
	// recovery (nil: no logs).
	Log *zap.Logger
	// LogEvery spaces the warnings of a long outage (default: the package's LogEvery).
	LogEvery time.Duration
}

// Do calls op until it returns nil, a permanent error (returned as is) or ctx ends (ctx's
// error is returned). Between failures it waits p.Backoff.
func Do(ctx context.Context, p Policy, op func(context.Context) error) error {
	log := p.Log
	if log == nil {
		log = zap.NewNop()
	}
	warn := Throttle{Every: p.LogEvery}
	var first time.Time
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil {
			p.Tracker.Ready()
			if attempt > 1 {
				log.Info(p.What+": recovered", zap.Int("attempts", attempt), zap.Duration("after", time.Since(first)))
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if IsPermanent(err) {
			p.Tracker.NotReady(fmt.Sprintf("%s: %v", p.What, err))
			return err
		}
		now := time.Now()
		if attempt == 1 {
			first = now
		}
		p.Tracker.NotReady(fmt.Sprintf("%s: %v", p.What, err))
		if warn.Allow(now) {
			log.Warn(p.What+" failed; retrying", zap.Int("attempt", attempt), zap.Duration("failing_for", now.Sub(first)), zap.Error(err))
		}
		if err := p.Backoff.Wait(ctx, attempt); err != nil {
			return err
		}
	}
}
