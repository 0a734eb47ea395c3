package watcher

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/recompute"
	"github.com/gameops/rollup/tree"
)

// TestSimulation runs concurrent agents (duplicate, late and orphan submissions) against a
// watcher that is restarted (crashed or stopped) between rounds, with a tree edit effective
// from a later tick and a Replay running concurrently with the watcher and the agents. At the
// end every (node, tick) must equal a full recompute of the final leaves. Each seed fixes the
// agents' plans and the crash points; the interleaving is up to the scheduler.
func TestSimulation(t *testing.T) {
	seeds := 4
	if testing.Short() {
		seeds = 2
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			simulate(t, seed)
		})
	}
}

func simulate(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	e := newEnv(t)
	const project = "sim"
	t0 := baseTick()
	v1 := tree.Generate(project, 3, 3, 3)
	e.trees.add(t, project, t0.Add(-24*time.Hour), v1)
	editAt := t0.Add(2 * tick)
	// Version 2: a server moves to another group, a process is added, another removed.
	var v2 []tree.Node
	for _, n := range v1 {
		switch n.ID {
		case "g01-s0001":
			n.Parent = "g02"
		case "g03-s0003-p03":
			continue
		}
		v2 = append(v2, n)
	}
	v2 = append(v2, tree.Node{ID: "g02-s0002-p04", Type: tree.TypeProcess, Parent: "g02-s0002"})

	var version atomic.Int64
	// agent submits plans: each round an agent picks random leaves of the tick's tree (or an
	// orphan), sometimes re-sends its previous submission (duplicate) or an older version
	// (late), for ticks up to maxTick.
	agent := func(rng *rand.Rand, maxTick time.Time, n int) {
		var last []bulk.Item
		for range n {
			if len(last) > 0 && rng.IntN(4) == 0 {
				e.submit(last...) // duplicate
				continue
			}
			at := maxTick.Add(-time.Duration(rng.IntN(4)) * tick)
			tr, _, _ := e.trees.TreeAt(context.Background(), project, at)
			leaves := tr.Leaves()
			var items []bulk.Item
			seen := map[string]bool{}
			for range 1 + rng.IntN(6) {
				l := leaves[rng.IntN(len(leaves))]
				if rng.IntN(20) == 0 {
					l = tree.Node{ID: "orphan-" + fmt.Sprint(rng.IntN(3)), Type: tree.TypeProcess}
				}
				if seen[l.ID] {
					continue
				}
				seen[l.ID] = true
				v := version.Add(1)
				if rng.IntN(6) == 0 {
					v -= int64(1 + rng.IntN(30)) // a late, older observation
				}
				items = append(items, item(project, l.ID, l.Type, at, int64(rng.IntN(50)), v))
			}
			e.submit(items...)
			last = items
		}
	}
	runAgents := func(maxTick time.Time) {
		var wg sync.WaitGroup
		for range 4 {
			arng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
			n := 3 + rng.IntN(5)
			wg.Go(func() { agent(arng, maxTick, n) })
		}
		wg.Wait()
	}

	for round := range 5 {
		maxTick := t0.Add(time.Duration(round) * tick)
		if round == 1 {
			e.trees.add(t, project, editAt, v2) // before any leaf of editAt exists
		}
		opts := Options{ChunkSize: 3, CheckpointInterval: time.Millisecond, MaxAwait: 20 * time.Millisecond}
		crashAfter := int64(rng.IntN(20))
		crashes := rng.IntN(2) == 0
		var levels atomic.Int64
		if crashes {
			opts.Knobs = &Knobs{Recompute: recompute.Knobs{BeforeLevel: func() bool { return levels.Add(1) > crashAfter }}}
		}
		w := e.newWatcher(opts)
		r := e.start(w)
		if round == 3 {
			var wg sync.WaitGroup
			var rst recompute.ReplayStats
			var rerr error
			wg.Go(func() {
				rst, rerr = recompute.Replay(context.Background(), e.db, e.trees, project, t0.Add(-10*tick), t0.Add(10*tick), recompute.ReplayOptions{Options: recompute.Options{ChunkSize: 2}})
			})
			runAgents(maxTick)
			wg.Wait()
			if rerr != nil {
				t.Fatalf("replay: %v", rerr)
			}
			if rst.Ticks == 0 {
				t.Fatalf("replay saw no tick: %+v", rst)
			}
		} else {
			runAgents(maxTick)
		}
		if err := r.stop(); err != nil && !errors.Is(err, recompute.ErrCrashed) {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	r := e.start(e.newWatcher(Options{MaxAwait: 20 * time.Millisecond}))
	e.waitCorrect(project)
	if st := r.w.Stats(); st.Invalid != 0 {
		t.Fatalf("invalid documents: %+v", st)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}
