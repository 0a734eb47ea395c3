package main

import (
	"context"
	"fmt"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/internal/app"
	"github.com/gameops/rollup/metrics"
	"github.com/gameops/rollup/metrics/totals"
	"github.com/gameops/rollup/recompute"
	"github.com/gameops/rollup/retention"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/watcher"
)

const serveUsage = `usage: rollup serve [flags]

Run rollup: the ingest and read API, the dashboard (at /), the bulk writer, the watcher that
keeps parent and root totals, retention (one instance, holding a lease, deletes what the
policy of 'rollup retention' no longer keeps), and (with --demo) simulated agents. Without
--mongodb-uri it starts the embedded MongoDB-compatible server in-process (the embedded
default): durable in --data, or in memory with --demo. Pending migrations are applied at start.
The HTTP port answers at once (/healthz 200, /readyz 503 until ready); store faults are waited
out with backoff, never fatal; only configuration errors end it (exit status 1).

Examples:
  rollup serve --demo                                   # in memory, demo project, token and agents
  rollup serve --demo --demo-agent                      # the same, the agents running 'rollup agent''s code
  rollup serve --data ./rollup-data                     # embedded store, durable
  rollup serve --mongodb-uri 'mongodb://db1,db2,db3/?replicaSet=rs0' --listen :8080
  rollup serve --data ./rollup-data --listen :8443 --tls-cert tls.crt --tls-key tls.key   # HTTPS only

Flags:
`

// serveConfig is serve's parsed configuration and where each setting came from.
type serveConfig struct {
	app.Config
	source func(setting string) string
}

// parseServe parses serve's settings from args, the environment and the --config file, and
// validates them; errors name the setting and where its value came from.
func parseServe(e *env, args []string) (serveConfig, error) {
	var c app.Config
	fs := e.flags("serve", serveUsage)
	fs.StringVar(&c.MongoURI, "mongodb-uri", "", "MongoDB connection string; empty starts the embedded server")
	fs.StringVar(&c.Database, "database", store.DefaultDatabase, "database name")
	fs.StringVar(&c.DataDir, "data", "rollup-data", "data directory of the embedded server")
	fs.BoolVar(&c.Demo, "demo", false, "demo mode: embedded server in memory, a demo project, its token and simulated agents")
	fs.IntVar(&c.DemoAgents, "demo-agents", 20, "simulated agents in --demo")
	fs.IntVar(&c.DemoBackfill, "demo-backfill", app.DefaultDemoBackfill, "past 5-minute ticks the --demo agents report at start, the charts' history (0 to 288)")
	fs.BoolVar(&c.DemoAgent, "demo-agent", false, "with --demo: run the simulated agents through 'rollup agent' (its sources, on-disk spool in a temporary directory, and sender)")
	fs.StringVar(&c.EmbeddedListen, "embedded-listen", "127.0.0.1:0", "address of the embedded server (port 0 picks a free one)")
	fs.IntVar(&c.EmbeddedOplogMB, "embedded-oplog-size-mb", embedded.DefaultOplogSizeMB, "the embedded server's retained oplog in MiB (see rollup mongod --oplog-size-mb)")
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "HTTP address of the API and the dashboard")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM certificate (then its chain) of the API: it serves HTTPS only; a renewal written to the file is served without a restart")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.Float64Var(&c.TokenRPS, "token-rps", api.DefaultTokenRPS, "requests per second one token may make, ingest and reads, with a burst of 10 s of it; past it 429 + Retry-After (0 = no limit)")
	fs.Float64Var(&c.TokenLeavesPerS, "token-leaves-per-s", api.DefaultTokenLeavesPerSecond, "counts per second one token may submit, with a burst of 10 s of it; past it 429 + Retry-After (0 = no limit)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.Partitions, "watcher-partitions", "", `watcher partitions: "" (one), "hash:N" (by project hash) or "projects:a,b;c"; every instance must use the same`)
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", watcher.DefaultLeaseTTL, "watcher lease TTL: a standby takes over a partition this long after its leader dies")
	fs.IntVar(&c.MaxPartitions, "max-partitions", 0, "most partitions this instance leads (0 = all it can; set ≈ partitions ÷ instances to spread the work)")
	fs.IntVar(&c.BulkWorkers, "bulk-workers", 0, fmt.Sprintf("leaf bulk writes in flight at once (0 = half the cores, %d to %d: %d here; 1 to %d)", store.MinWritesInFlight, store.MaxDefaultWritesInFlight, bulk.DefaultWorkers(), app.MaxWorkers))
	fs.IntVar(&c.RecomputeWorkers, "recompute-workers", 0, fmt.Sprintf("chunks of one level of parents the watcher writes at once (0 = half the cores, %d to %d: %d here; 1 to %d)", store.MinWritesInFlight, store.MaxDefaultWritesInFlight, recompute.DefaultWorkers(), app.MaxWorkers))
	fs.StringVar(&c.InstanceID, "instance-id", "", "stable id of this instance in watcher leases: a restart with the same id leads again at once; "+
		"never share one between live processes (default: kept in --data for the embedded store, else host@listen)")
	fs.DurationVar(&c.Totals.Grace, "totals-grace", totals.DefaultGrace, "business metrics: a tick is complete this long after it ends (agents reported, the watcher rolled it up)")
	fs.DurationVar(&c.Totals.Refresh, "totals-refresh", totals.DefaultInterval, "business metrics: how often the last complete tick's totals are read from the store")
	fs.IntVar(&c.Totals.MaxProjects, "totals-max-projects", totals.DefaultMaxProjects, "business metrics: most projects exported, the first by name (0 turns the business metrics off)")
	fs.StringVar(&c.Totals.Groups, "totals-groups", "", `business metrics: projects whose groups (the root's children) are exported too, comma-separated, or "*" for all`)
	fs.IntVar(&c.Totals.MaxGroups, "totals-max-groups", totals.DefaultMaxGroups, "business metrics: most groups exported per project, the first by id")
	fs.BoolVar(&c.Retention.Enabled, "retention", true, "enforce the retention policy ('rollup retention show'): the instance holding the retention lease deletes what it no longer keeps; false: this instance never deletes")
	fs.DurationVar(&c.Retention.Interval, "retention-interval", retention.DefaultInterval, "retention: time between two passes over every project")
	fs.IntVar(&c.Retention.Batch, "retention-batch", retention.DefaultBatch, "retention: most documents one delete removes")
	fs.IntVar(&c.Retention.Rate, "retention-rate", retention.DefaultRate, "retention: most documents deleted per second (0: no limit)")
	err := e.parse(fs, args)
	sc := serveConfig{Config: c, source: fs.Source}
	if err != nil {
		return sc, err
	}
	return sc, fs.Explain(c.Validate())
}

func runServe(ctx context.Context, e *env, args []string) error {
	cfg, err := parseServe(e, args)
	if err != nil {
		return usageError(err)
	}
	// JSON logs in production, console in the demo.
	log, err := metrics.NewLogger(cfg.LogLevel, !cfg.Demo, e.stderr)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	defer func() { _ = log.Sync() }()
	return app.Serve(ctx, cfg.Config, log, e.stdout)
}
