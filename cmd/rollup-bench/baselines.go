package main

import (
	"context"
	"fmt"

	"github.com/gameops/rollup/internal/bench"
)

// baselinesUsage is the help of rollup-bench baselines.
const baselinesUsage = `usage: rollup-bench baselines [flags]

Runs three designs of parent totals in the same run on the same store, each on its own database
and behind its own counting proxy, fed by the same simulated agents (each agent submits the
leaves of one parent at a time, every leaf once per tick):
  original     one upsert per leaf (no unique index) + an $inc of its delta on every ancestor,
               unordered bulks of --original-batch ops, a failed batch retried whole
  reaggregate  leaf upserts in bulks of --batch on the unique key, then per tick one $group per
               level over the tick's leaves and the parents written
  rollup       bulk.Writer + the watcher, as rollup serve runs them
Reports leaves/s, freshness (last leaf acknowledged -> root correct, p50/p99 over ticks),
store commands and bytes per tick, write ops per tick, and whether every parent total is right.
--faults arms a failCommand closeConnection on the next leaf update of each design every tick.

Examples:
  rollup-bench baselines                              # 20 groups, 1,000 servers, 100,000 leaves, 3 ticks
  rollup-bench baselines --faults
  rollup-bench scale --leaves 100000 --ticks 5
  rollup-bench scale --projects 1000 --leaves 1000 --instances 2 --partitions 4
  rollup-bench baselines --ticks 1 --original-batch 1       # the original's one command per write
  rollup-bench baselines --groups 2 --servers 10 --processes 10 --ticks 1 --faults

Flags:
`

// runBaselines runs rollup against the original design and a per-tick re-aggregation.
func runBaselines(ctx context.Context, e *env, args []string) error {
	var cfg bench.BaselinesConfig
	fs := e.flags("baselines", baselinesUsage, &cfg.URI)
	fs.IntVar(&cfg.Groups, "groups", 20, "groups under the root")
	fs.IntVar(&cfg.Servers, "servers", 1000, "servers in all, split evenly over the groups")
	fs.IntVar(&cfg.Processes, "processes", 100, "processes (leaves) per server")
	fs.IntVar(&cfg.Agents, "agents", 100, "concurrent simulated agents")
	fs.IntVar(&cfg.Ticks, "ticks", 3, "ticks to run")
	fs.IntVar(&cfg.Batch, "batch", 1000, "ops per unordered bulk write of the reaggregate design, and leaves per batch of both baselines")
	fs.IntVar(&cfg.OriginalBatch, "original-batch", 1000, "ops per unordered bulk write of the original design (1: one command per write, as the original system sent them)")
	fs.BoolVar(&cfg.Faults, "faults", false, "close the connection of one leaf update per design and tick (configureFailPoint; an external store needs enableTestCommands=1)")
	if err := e.parse(fs, args, func() error { return cfg.Validate() }); err != nil {
		return usageError(err)
	}
	res, err := bench.Baselines(ctx, cfg, e.stderr)
	if err != nil {
		return fmt.Errorf("bench baselines: %w", err)
	}
	res.Print(e.stdout)
	return nil
}
