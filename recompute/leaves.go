package recompute

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/store"
)

// LeavesWrittenSince feeds every leaf written at or after from (all leaves when from is zero)
// through the normal recompute, in rounds of Options.ReplayChunk leaves, and returns how many
// documents it read: the window a change stream can no longer deliver. projects narrows the
// query on the server (nil: any project) and owns keeps the leaves of the caller's projects.
func (e *Engine) LeavesWrittenSince(ctx context.Context, from time.Time, projects bson.D, owns func(project string) bool) (int64, error) {
	var n int64
	batch := make([]store.Leaf, 0, e.opts.ReplayChunk)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := e.Leaves(ctx, batch); err != nil {
			return err
		}
		batch = batch[:0]
		return nil
	}
	err := e.counts.LeavesWrittenSince(ctx, from, projects, func(l store.Leaf, err error) error {
		n++
		if err != nil {
			e.stats.invalid.Add(1)
			return nil
		}
		if owns != nil && !owns(l.Project) {
			return nil
		}
		batch = append(batch, l)
		if len(batch) >= e.opts.ReplayChunk {
			return flush()
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	return n, flush()
}
