package watcher

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/gameops/rollup/store"
)

// lostEventTimeout bounds the write of a history-lost event (a timer, not a deadline: no
// driver retry loop).
const lostEventTimeout = 5 * time.Second

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
		w.log.Warn("lost window replayed", zap.String("reason", s.reason), zap.Time("written_since", s.from), zap.Int64("leaves", n))
		w.recordLost(ctx, s.from, n)
		// Counted once recorded (or its recording failed and was logged): whoever sees the
		// count finds the event.
		w.stats.replays.Add(1)
	case n > 0:
		w.stats.replays.Add(1)
		w.log.Info("no checkpoint: recomputed the parents of every stored leaf", zap.Int64("leaves", n))
	default:
		w.log.Info("no checkpoint and no leaves: watching from now")
	}
	return nil
}

// recordLost records the replay of a lost window as an event (store.EventHistoryLost, for
// every project: one stream carries many), so the dashboard and Grafana show it on the chart.
// Its key is the checkpoint's id and the window's start, so a second leader or a retry of the
// same replay stores it once. A failure to record is logged, never fatal: the replay is done.
func (w *Watcher) recordLost(ctx context.Context, from time.Time, leaves int64) {
	id := w.part.id(w.opts.Name)
	until := w.now().UTC()
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := time.AfterFunc(lostEventTimeout, cancel)
	defer func() {
		t.Stop()
		cancel()
	}()
	err := store.NewEvents(w.db).RecordOnce(rctx, store.EventHistoryLost+"/"+id+"/"+from.UTC().Format(time.RFC3339Nano), store.Event{
		Kind: store.EventHistoryLost, At: from.UTC(), End: until, Title: "change stream history lost",
		Text: fmt.Sprintf("the watcher of %s could not resume its change stream (the oplog no longer held its position) and replayed %d leaves written since %s",
			id, leaves, from.UTC().Format(time.RFC3339)),
	})
	if err != nil {
		w.log.Warn("could not record the history-lost replay as an event", zap.Error(err))
	}
}
