package lease

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"
)

// LiveCount counts the live instances of a database (CountLive over the last window) every
// interval and reports each new count: the bulk writer shares its writes in flight by it.
// A failed count keeps the last one reported.
type LiveCount struct {
	db            *mongo.Database
	every, window time.Duration
	report        func(n int)
	now           func() time.Time
	log           *zap.Logger
}

// NewLiveCount returns a LiveCount of db that calls report with each new count.
func NewLiveCount(db *mongo.Database, every, window time.Duration, report func(n int), log *zap.Logger) *LiveCount {
	return &LiveCount{db: db, every: every, window: window, report: report, now: time.Now, log: log}
}

// Run counts until ctx is done.
func (c *LiveCount) Run(ctx context.Context) error {
	t := time.NewTicker(c.every)
	defer t.Stop()
	last := 0
	for {
		n, err := CountLive(ctx, c.db, c.now().Add(-c.window))
		switch {
		case err != nil:
			c.log.Debug("live instances not counted; the last count stands", zap.Error(err))
		case n != last:
			c.report(n)
			c.log.Info("live instances counted", zap.Int("instances", n))
			last = n
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
