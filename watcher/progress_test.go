package watcher

import (
	"context"
	"testing"
	"time"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/tree"
)

// TestProgress checks that the recompute latencies, the stream position and the checkpoint
// are recorded as the watcher processes leaves, and that the position keeps up with an idle
// stream.
func TestProgress(t *testing.T) {
	e := newEnv(t)
	const project = "proj"
	t0 := baseTick()
	nodes := tree.Generate(project, 1, 2, 3)
	e.trees.Add(t, project, t0.Add(-24*time.Hour), nodes)
	tr, _, _ := e.trees.TreeAt(context.Background(), project, t0)

	w := e.newWatcher(Options{CheckpointInterval: time.Millisecond})
	if p := w.Progress(); p.Recompute.Count != 0 || len(p.Streams) != 0 {
		t.Fatalf("progress before Run = %+v, want empty", p)
	}
	// Taken before Run: with a 1 ms interval it may save a checkpoint at once, before any leaf.
	start := time.Now()
	e.start(w)
	// With no checkpoint the watcher opens its stream, replays the recent window and saves a
	// checkpoint: leaves written before the stream opened are recomputed by that replay, not
	// by a burst, and no burst would ever be recorded (on a loaded CI machine this test once
	// waited so until its deadline). So the leaves are written once the stream is open.
	testctx.WaitFor(t, "the stream open (its first checkpoint)", func() bool {
		p := w.Progress()
		return len(p.Streams) == 1 && !p.Streams[0].CheckpointSavedAt.IsZero()
	})
	var items []bulk.Item
	for i, l := range tr.Leaves() {
		items = append(items, item(project, l.ID, l.Type, t0, int64(i+1), 100))
	}
	e.submit(items...)
	e.waitCorrect(project)
	testctx.WaitFor(t, "a recomputed burst and a checkpoint", func() bool {
		p := w.Progress()
		return p.Recompute.Count > 0 && len(p.Streams) == 1 && !p.Streams[0].CheckpointSavedAt.IsZero()
	})
	p := w.Progress()
	if p.Recompute.Sum <= 0 || p.Recompute.Sum > time.Since(start).Seconds() {
		t.Errorf("recompute sum %v s, want in (0, %v]", p.Recompute.Sum, time.Since(start).Seconds())
	}
	s := p.Streams[0]
	if s.Checkpoint != DefaultName {
		t.Errorf("checkpoint name %q, want %q", s.Checkpoint, DefaultName)
	}
	// Cluster times are whole seconds: allow the second the test started in.
	lo := start.Truncate(time.Second).Add(-time.Second)
	if s.Position.Before(lo) || s.Position.After(time.Now()) {
		t.Errorf("position %v, want within [%v, now]", s.Position, lo)
	}
	if s.CheckpointPosition.Before(lo) || s.CheckpointPosition.After(s.Position) {
		t.Errorf("checkpoint position %v, want within [%v, position %v]", s.CheckpointPosition, lo, s.Position)
	}
	if s.CheckpointSavedAt.Before(start.Add(-time.Millisecond)) || s.CheckpointSavedAt.After(time.Now()) {
		t.Errorf("checkpoint saved at %v, want since %v", s.CheckpointSavedAt, start)
	}
	// Idle: the position follows the cluster time without new leaves.
	bursts := p.Recompute.Count
	testctx.WaitFor(t, "the idle stream's position to advance", func() bool {
		return w.Progress().Streams[0].Position.After(s.Position)
	})
	if got := w.Progress().Recompute.Count; got != bursts {
		t.Errorf("bursts %d after idling, want %d", got, bursts)
	}
}

func TestProgressRecord(t *testing.T) {
	var p progress
	p.position("a", nil) // not decodable: ignored
	p.burst(30 * time.Millisecond)
	p.checkpoint("b", checkpoint{SavedAt: time.Unix(50, 0).UTC()})
	got := p.snapshot()
	if got.Recompute.Count != 1 || got.Recompute.Sum != 0.03 {
		t.Errorf("recompute %+v, want one burst of 0.03 s", got.Recompute)
	}
	if len(got.Streams) != 1 || got.Streams[0].Checkpoint != "b" || !got.Streams[0].CheckpointSavedAt.Equal(time.Unix(50, 0)) ||
		!got.Streams[0].CheckpointPosition.IsZero() || !got.Streams[0].Position.IsZero() {
		t.Errorf("streams %+v, want b saved at 50 with no positions", got.Streams)
	}
}
