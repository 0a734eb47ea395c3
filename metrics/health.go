package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gameops/rollup/internal/status"
)

// DefaultCheckTimeout bounds the readiness checks when Health.Timeout is zero.
const DefaultCheckTimeout = 2 * time.Second

// Health serves /healthz and /readyz. A nil check is not run (and not listed).
type Health struct {
	// Ping checks that the store is reachable, e.g. client.Ping(ctx, readpref.Primary()).
	Ping func(ctx context.Context) error
	// Pending returns the number of migration steps not applied yet
	// (migrations.Migrator.Pending); ready needs 0.
	Pending func(ctx context.Context) (int, error)
	// Running reports whether the watcher runs (RunFlag.Running).
	Running func() bool
	// Components are the long-lived components' progress trackers; a component that is not
	// ready makes /readyz answer 503 and is named with its reason and since when.
	Components func() []status.State
	// Timeout bounds all the checks of one /readyz request (default DefaultCheckTimeout).
	Timeout time.Duration
}

// Check is one readiness check in the /readyz answer.
type Check struct {
	// Name is "store", "migrations" or "watcher".
	Name string `json:"name"`
	// OK says the check passed.
	OK bool `json:"ok"`
	// Error says why it did not.
	Error string `json:"error,omitempty"`
}

// Readiness is the /readyz answer.
type Readiness struct {
	// Ready is true when every check passed (the status is then 200, else 503).
	Ready bool `json:"ready"`
	// NotReady names the checks that failed, in Checks order.
	NotReady []string `json:"not_ready,omitempty"`
	// Checks are the checks run.
	Checks []Check `json:"checks"`
	// Components are the components' states (Health.Components), ready or not.
	Components []status.State `json:"components,omitempty"`
}

// Live returns the /healthz handler: 200 while the process serves HTTP.
func (h *Health) Live() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
	})
}

// Ready returns the /readyz handler: 200 when every check passes, else 503; the JSON body is
// a Readiness naming what is not ready.
func (h *Health) Ready() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rd := h.Check(r.Context())
		status := http.StatusOK
		if !rd.Ready {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, rd)
	})
}

// Check runs the readiness checks at once, bounded together by Timeout.
func (h *Health) Check(ctx context.Context) Readiness {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var checks []func() Check
	if h.Ping != nil {
		checks = append(checks, func() Check {
			return result("store", h.Ping(ctx))
		})
	}
	if h.Pending != nil {
		checks = append(checks, func() Check {
			n, err := h.Pending(ctx)
			if err == nil && n > 0 {
				err = fmt.Errorf("%d migration steps pending; run rollup migrate up", n)
			}
			return result("migrations", err)
		})
	}
	if h.Running != nil {
		checks = append(checks, func() Check {
			if !h.Running() {
				return Check{Name: "watcher", Error: "the watcher is not running"}
			}
			return Check{Name: "watcher", OK: true}
		})
	}
	rd := Readiness{Ready: true, Checks: make([]Check, len(checks))}
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() { rd.Checks[i] = c() })
	}
	wg.Wait()
	for _, c := range rd.Checks {
		if !c.OK {
			rd.Ready = false
			rd.NotReady = append(rd.NotReady, c.Name)
		}
	}
	if h.Components != nil {
		rd.Components = h.Components()
		for _, c := range rd.Components {
			if !c.Ready {
				rd.Ready = false
				rd.NotReady = append(rd.NotReady, c.Component)
			}
		}
	}
	return rd
}

func result(name string, err error) Check {
	if err != nil {
		return Check{Name: name, Error: err.Error()}
	}
	return Check{Name: name, OK: true}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a write error means the client went away
}

// RunFlag tracks whether a component's Run is executing, for Health.Running.
type RunFlag struct {
	n atomic.Int32
}

// Wrap returns run marked as running while it executes.
func (f *RunFlag) Wrap(run func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		f.n.Add(1)
		defer f.n.Add(-1)
		return run(ctx)
	}
}

// Running reports whether a wrapped Run is executing.
func (f *RunFlag) Running() bool { return f.n.Load() > 0 }
