package app

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/lease"
)

// Timing of inFlightShare: how often it counts the live instances, and how recent a
// heartbeat counts as live (the watcher beats every second).
const (
	shareInterval = 3 * time.Second
	shareWindow   = 5 * time.Second
)

// inFlightShare splits the bulk writer's default writes in flight with the other live
// instances of the database (bulk.Writer.ShareInFlight): n instances sharing one store keep
// about as many leaf batches in flight as one alone, so the watcher's reads and parent writes
// do not queue behind n times as many (docs/benchmarks.md, "Several instances at rest, after
// the session's merges"). It counts the instances that beat in the last shareWindow every
// shareInterval; a failed count keeps the last share.
type inFlightShare struct {
	db     *mongo.Database
	writer *bulk.Writer
	now    func() time.Time
	log    *zap.Logger
}

// Run counts until ctx is done.
func (s *inFlightShare) Run(ctx context.Context) error {
	t := time.NewTicker(shareInterval)
	defer t.Stop()
	last := 0
	for {
		n, err := lease.CountLive(ctx, s.db, s.now().Add(-shareWindow))
		switch {
		case err != nil:
			s.log.Debug("live instances not counted; the writes in flight stay shared as they were", zap.Error(err))
		case n != last:
			s.writer.ShareInFlight(n)
			s.log.Info("writes in flight shared with the live instances", zap.Int("instances", n))
			last = n
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
