package watcher

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/recompute"
	"github.com/gameops/rollup/tree"
)

// TestCrashSafety stops the watcher at random points — abandoning a batch between two levels
// of parent writes or between the parents and their summaries as a crash would, or
// cancelling its context — while leaves keep coming, restarts it, and checks every (node,
// tick) against a full recompute of the final leaves, and every hourly and daily summary
// against a naive summary of the parents.
// Each seed is reproducible in what it submits and where it crashes.
func TestCrashSafety(t *testing.T) {
	seeds := 8
	if testing.Short() {
		seeds = 3
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			e := newEnv(t)
			const project = "proj"
			t0 := baseTick()
			e.trees.Add(t, project, t0.Add(-time.Hour), tree.Generate(project, 2, 3, 4))
			tr, _, _ := e.trees.TreeAt(context.Background(), project, t0)
			leaves := tr.Leaves()
			ticks := []time.Time{t0, t0.Add(-tick), t0.Add(-2 * tick)}
			var version int64
			submitRandom := func() {
				n := 1 + rng.IntN(12)
				items := make([]bulk.Item, 0, n)
				seen := map[string]bool{}
				for range n {
					l := leaves[rng.IntN(len(leaves))]
					at := ticks[rng.IntN(len(ticks))]
					key := fmt.Sprint(l.ID, at)
					if seen[key] {
						continue
					}
					seen[key] = true
					version++
					v := version
					if rng.IntN(5) == 0 {
						v -= int64(rng.IntN(20)) // sometimes an older, late version
					}
					items = append(items, item(project, l.ID, l.Type, at, int64(rng.IntN(1000)), v))
				}
				e.submit(items...)
			}
			for run := range 6 {
				// A crash between two levels of parent writes, or between the parents and
				// their hourly and daily summaries.
				crashAfter, tiersAfter := int64(rng.IntN(12)), int64(1<<62)
				if rng.IntN(2) == 0 {
					crashAfter, tiersAfter = 1<<62, int64(rng.IntN(3))
				}
				var levels, tiers atomic.Int64
				w := e.newWatcher(Options{ChunkSize: 2, CheckpointInterval: time.Millisecond, ShutdownTimeout: time.Second,
					Knobs: &Knobs{Recompute: recompute.Knobs{
						BeforeLevel: func() bool { return levels.Add(1) > crashAfter },
						BeforeTiers: func() bool { return tiers.Add(1) > tiersAfter },
					}}})
				r := e.start(w)
				for range 1 + rng.IntN(6) {
					submitRandom()
				}
				if rng.IntN(2) == 0 {
					// Let it crash if it gets there, else stop it gracefully.
					testctx.WaitFor(t, "watcher progress", func() bool {
						return levels.Load() > crashAfter || tiers.Load() > tiersAfter || w.Stats().Batches > 0
					})
				}
				err := r.stop()
				if err != nil && !errors.Is(err, recompute.ErrCrashed) {
					t.Fatalf("run %d: %v", run, err)
				}
			}
			submitRandom()
			r := e.start(e.newWatcher(Options{CheckpointInterval: time.Millisecond}))
			e.waitCorrect(project)
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
