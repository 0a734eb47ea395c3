package app

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/retry"
	"github.com/gameops/rollup/tree/treedb"
)

// serveStatus holds the trackers of serve's components, as /readyz and /metrics show them.
type serveStatus struct {
	store, migrations, watcher *status.Tracker
	bulk                       *status.Tracker // the bulk writer's own (Writer.Tracker), set once it exists
	retention                  *status.Tracker // nil when this instance does not enforce retention
}

func newServeStatus(retention bool) *serveStatus {
	s := &serveStatus{
		store:      status.New("store", "starting"),
		migrations: status.New("migrations", "applying migrations"),
		watcher:    status.New("watcher", "waiting for migrations"),
	}
	if retention {
		s.retention = status.New("retention", "waiting for migrations")
	}
	return s
}

func (s *serveStatus) states() []status.State {
	return status.States(s.store, s.migrations, s.watcher, s.bulk, s.retention)
}

// gatedSink refuses writes (503, resend later) until open is closed: leaves must not be
// written before the unique index exists.
type gatedSink struct {
	open <-chan struct{}
	next api.Sink
}

var _ api.Sink = (*gatedSink)(nil)

// Submit passes items on once the gate is open.
func (g *gatedSink) Submit(ctx context.Context, items []bulk.Item) ([]bulk.Result, error) {
	select {
	case <-g.open:
		return g.next.Submit(ctx, items)
	default:
		return nil, fmt.Errorf("schema migrations not applied yet: %w", bulk.ErrUnavailable)
	}
}

// The writer's store gate: during an outage the API answers 503 before any store work,
// with the writer's Retry-After (api.StoreGate).
var _ api.StoreGate = (*gatedSink)(nil)

// Available is the writer's (when next is a StoreGate): nil unless the store is known down.
func (g *gatedSink) Available(ctx context.Context) error {
	if sg, ok := g.next.(api.StoreGate); ok {
		return sg.Available(ctx)
	}
	return nil
}

// RetryAfter is the writer's suggestion (0 while the store is up).
func (g *gatedSink) RetryAfter() time.Duration {
	if sg, ok := g.next.(api.StoreGate); ok {
		return sg.RetryAfter()
	}
	return 0
}

// migrateAtStart applies pending migrations (under the migration lock; none is taken when
// nothing is pending) and checks the schema, retrying store errors
// with backoff until ctx ends (then it returns nil); a permanent error (a conflicting or
// missing index) is returned for the operator.
func migrateAtStart(ctx context.Context, db *mongo.Database, log *zap.Logger, tr *status.Tracker) error {
	m := migrations.New(db, log)
	err := retry.Do(ctx, retry.Policy{Tracker: tr, What: "apply migrations", Log: log}, func(ctx context.Context) error {
		// Nothing pending (every start but an upgrade's): no lock is taken, so a process
		// killed while it held the lock does not hold this start back until the lock expires.
		pending, err := m.Pending(ctx)
		if err != nil {
			return err
		}
		if pending > 0 {
			// A short lock wait: a held lock shows in /readyz with its holder, then is retried.
			report, err := m.Up(ctx, migrations.UpOptions{LockWait: 5 * time.Second})
			if err != nil {
				return err
			}
			if !report.UpToDate() {
				log.Info("migrations applied", zap.Int("steps", len(report.Applied)), zap.Int("duplicates_removed", report.RemovedCount()))
			}
		}
		return migrations.CheckSchema(ctx, db)
	})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// startDemo sets the demo up, retrying store errors with backoff; nil, nil when ctx ended.
func startDemo(ctx context.Context, db *mongo.Database, trees *treedb.Store, baseURL string, hc *http.Client, o demoOptions, log *zap.Logger) (*demo, error) {
	var d *demo
	err := retry.Do(ctx, retry.Policy{What: "set up the demo", Log: log}, func(ctx context.Context) error {
		var err error
		d, err = setupDemo(ctx, db, trees, baseURL, hc, o, log)
		return err
	})
	if ctx.Err() != nil {
		return nil, nil
	}
	return d, err
}

// waitFor waits until c is closed (true) or ctx is done (false).
func waitFor(ctx context.Context, c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	case <-ctx.Done():
		return false
	}
}
