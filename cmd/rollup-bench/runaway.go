package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/internal/bench"
)

// runRunaway runs the runaway-agent benchmark: a steady agent beside a flooding one.
func runRunaway(ctx context.Context, e *env, args []string) error {
	var cfg bench.RunawayConfig
	fs := e.flags("runaway", "usage: rollup-bench runaway [flags]\n\nFlags:\n", &cfg.URI)
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "length of each of the three phases")
	fs.IntVar(&cfg.NormalRate, "normal-rate", 20, "the normal agent's requests per second")
	fs.IntVar(&cfg.NormalLeaves, "normal-leaves", 100, "counts per normal request")
	fs.IntVar(&cfg.RunawayRate, "runaway-rate", 1000, "the runaway agent's requests per second")
	fs.IntVar(&cfg.RunawayLeaves, "runaway-leaves", 100, "counts per runaway request")
	fs.Float64Var(&cfg.TokenRPS, "token-rps", api.DefaultTokenRPS, "per-token requests per second of the limited phase (0 = off)")
	fs.Float64Var(&cfg.TokenLeavesPerS, "token-leaves-per-s", api.DefaultTokenLeavesPerSecond, "per-token counts per second of the limited phase (0 = off)")
	fs.DurationVar(&cfg.TokenBurst, "token-burst", api.LimitBurst, "how much of its rates an idle token may spend at once in the limited phase")
	fs.DurationVar(&cfg.Warmup, "warmup", 5*time.Second, "the normal agent alone for this long first, not reported (0 = none): the alone phase, the ratios' base, then runs on a warm process")
	if err := e.parse(fs, args, func() error { return cfg.Validate() }); err != nil {
		return usageError(err)
	}
	res, err := bench.Runaway(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench runaway: %w", err)
	}
	res.Print(e.stdout)
	return nil
}
