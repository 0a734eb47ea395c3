package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/gameops/rollup/internal/bench"
)

// runIngest runs the end-to-end ingest benchmark against raw driver upserts, with optional
// profiles of the whole run.
func runIngest(ctx context.Context, e *env, args []string) error {
	var cfg bench.IngestConfig
	var cpuProfile, memProfile string
	fs := e.flags("ingest", "usage: rollup-bench ingest [flags]\n\nFlags:\n", &cfg.URI)
	fs.IntVar(&cfg.Agents, "agents", 10_000, "simulated agents per tick")
	fs.IntVar(&cfg.LeavesPerAgent, "leaves", 10, "leaves per agent")
	fs.IntVar(&cfg.Ticks, "ticks", 3, "ticks to run")
	fs.IntVar(&cfg.Warmup, "warmup", 1, "ticks of both paths run first and not reported (0: none, as before 2026-11-28; the first phase of a fresh process then pays several times the garbage collections of the others)")
	fs.BoolVar(&cfg.Durable, "durable", false, "use a data directory (fsync before every acknowledgement)")
	fs.StringVar(&cfg.Client, "client", bench.ClientLoadGen, "how the agents send: loadgen (persistent HTTP/1.1 connections, as wrk) or agentclient (the agent package over net/http)")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.IntVar(&cfg.Conns, "conns", 0, "the load generator's connections, its requests in flight (0: 256, as many as agentsim keeps in flight; loadgen only)")
	fs.StringVar(&cfg.RawFilter, "raw-filter", bench.RawFilterPlain, "the raw path's upsert filter: plain (the key and version < v) or guarded (rollup's: also the project and not a parent), to measure rollup's code without its guards' cost")
	fs.StringVar(&cfg.PhaseProfile, "phaseprofile", "", "write a CPU profile of each measured phase to PREFIX.ingest.N and PREFIX.raw.N (tick N), to read each path's CPU apart; not with --cpuprofile")
	fs.StringVar(&memProfile, "memprofile", "", "write an allocation profile of the whole run to this file")
	if err := e.parse(fs, args, func() error {
		if cpuProfile != "" && cfg.PhaseProfile != "" {
			return errors.New("--cpuprofile and --phaseprofile cannot both be set (one CPU profile at a time)")
		}
		return cfg.Validate()
	}); err != nil {
		return usageError(err)
	}
	stop, err := bench.Profile(cpuProfile, memProfile)
	if err != nil {
		return err
	}
	res, err := bench.Ingest(ctx, cfg)
	if perr := stop(); perr != nil {
		_, _ = fmt.Fprintln(e.stderr, perr)
	}
	if err != nil {
		return fmt.Errorf("bench ingest: %w", err)
	}
	res.Print(e.stdout)
	return nil
}
