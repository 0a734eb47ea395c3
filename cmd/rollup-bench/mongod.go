package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gameops/rollup/internal/bench"
)

// runMongod runs the embedded server's bulk-upsert benchmark.
func runMongod(ctx context.Context, e *env, args []string) error {
	var cfg bench.MongodConfig
	fs := e.flags("mongod", "usage: rollup-bench mongod [flags]\n\nFlags:\n", &cfg.URI)
	fs.IntVar(&cfg.N, "n", 1_000_000, "documents to upsert")
	fs.IntVar(&cfg.Batch, "batch", 1000, "upserts per unordered bulk write")
	fs.BoolVar(&cfg.Durable, "durable", false, "use a data directory (every write fsync'd before it is acknowledged)")
	if err := e.parse(fs, args, func() error { return cfg.Validate() }); err != nil {
		return usageError(err)
	}
	res, err := bench.Mongod(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench mongod: %w", err)
	}
	res.Print(e.stdout)
	return nil
}

// runChangeStream runs the change-stream throughput and latency benchmark.
func runChangeStream(ctx context.Context, e *env, args []string) error {
	var cfg bench.ChangeStreamConfig
	fs := e.flags("changestream", "usage: rollup-bench changestream [flags]\n\nFlags:\n", &cfg.URI)
	fs.IntVar(&cfg.Backlog, "backlog", 200_000, "events the consumer drains while writers keep upserting (throughput)")
	fs.IntVar(&cfg.Rate, "rate", 10_000, "writes per second during the latency phase")
	fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "length of the latency phase")
	if err := e.parse(fs, args, func() error { return cfg.Validate() }); err != nil {
		return usageError(err)
	}
	res, err := bench.ChangeStream(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench changestream: %w", err)
	}
	res.Print(e.stdout)
	return nil
}
