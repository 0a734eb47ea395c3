package watcher

import (
	"context"
	"fmt"

	"go.uber.org/zap"
)

// recoverWindow recomputes, from the collection, the leaves written since s.from (all leaves
// when s.from is zero): the window whose events the stream can no longer deliver. A lost
// history is a warning; a start without a checkpoint is normal (the first start of a
// deployment, or one whose checkpoints were removed: every stored leaf is recomputed, so
// nothing is lost) and says so at info level.
func (w *Watcher) recoverWindow(ctx context.Context, s *streamState) error {
	if s.lost {
		w.log.Warn("replaying leaves the change stream cannot deliver",
			zap.String("reason", s.reason), zap.Time("written_since", s.from), zap.Time("until", w.now().UTC()))
	}
	n, err := w.engine.LeavesWrittenSince(ctx, s.from, w.part.projectFilter(), w.part.owns)
	if err != nil {
		return fmt.Errorf("replay lost window: %w", err)
	}
	switch {
	case s.lost:
		w.stats.replays.Add(1)
		w.log.Warn("lost window replayed", zap.String("reason", s.reason), zap.Time("written_since", s.from), zap.Int64("leaves", n))
	case n > 0:
		w.stats.replays.Add(1)
		w.log.Info("no checkpoint: recomputed the parents of every stored leaf", zap.Int64("leaves", n))
	default:
		w.log.Info("no checkpoint and no leaves: watching from now")
	}
	return nil
}
