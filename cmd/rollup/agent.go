package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sourcegraph/conc/pool"
	"go.uber.org/zap"

	"github.com/gameops/rollup/agent"
	"github.com/gameops/rollup/internal/app"
	"github.com/gameops/rollup/internal/settings"
	"github.com/gameops/rollup/metrics"
)

const agentUsage = `usage: rollup agent --config FILE [--once] [--metrics-listen ADDR]

Run the ready-made agent beside a host's or a zone's game servers: every tick it reads one
project's leaf counts from the sources of FILE (a Prometheus text exposition scraped from a
local URL, the JSON output of a command, a JSON file the game server rewrites), writes the
tick to its on-disk spool (fsync'd, bounded in size), then sends the spool to rollup oldest
first (POST /v1/counts) after a random start jitter. While rollup answers 503, 429 or
nothing, ticks wait in the spool and go out when it returns, with their original
observed_at, so a resend never double counts; ticks older than the API's late-data window
(24h) are dropped, counted and logged. A leaf with bad source data is missing from its tick,
never 0. SIGHUP reloads FILE (a bad new file is logged and the old one kept). Its /metrics
show the last tick sent, the spool depth and the send errors by status.

Examples:
  rollup agent --config /etc/rollup/agent.yaml --metrics-listen 127.0.0.1:9465
  rollup agent --config agent.yaml --once     # one tick, then exit (1 if ticks stay spooled)

A config file (docs/agent.md lists every key):
  url: http://rollup:8080
  token_file: /etc/rollup/token
  project: mygame
  spool: {dir: /var/lib/rollup-agent, max_mb: 64}
  sources:
    - name: gameservers
      prometheus: {url: "http://127.0.0.1:9100/metrics", metric: game_players_online, label: server_id}
      leaves: [g01-s0001-p01, g01-s0001-p02]
    - name: lobby
      exec: {command: [/usr/local/bin/lobby-counts, --json], timeout: 10s}
      leaves: [g01-lobby]

Flags:
`

// agentConfig is the parsed command line of rollup agent.
type agentConfig struct {
	config, metricsListen, logLevel string
	once                            bool
}

func parseAgent(e *env, args []string) (agentConfig, error) {
	var c agentConfig
	fs := e.flags("agent", agentUsage)
	fs.OwnConfig("the agent's YAML file: server, token, project, spool and sources (required)")
	fs.StringVar(&c.metricsListen, "metrics-listen", "", `address of /metrics and /healthz, such as 127.0.0.1:9465 ("": none)`)
	fs.BoolVar(&c.once, "once", false, "sample one tick, send the whole spool, and exit (status 1 if ticks stay spooled)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	if err := e.parse(fs, args); err != nil {
		return c, err
	}
	c.config = fs.Lookup(settings.ConfigFlag).Value.String()
	if c.config == "" {
		return c, fs.Errorf(settings.ConfigFlag, "is required: the agent's YAML file (docs/agent.md)")
	}
	if c.metricsListen != "" {
		if err := settings.CheckListenAddr(c.metricsListen); err != nil {
			return c, fs.Errorf("metrics-listen", "%w", err)
		}
	}
	return c, nil
}

func runAgent(ctx context.Context, e *env, args []string) error {
	c, err := parseAgent(e, args)
	if err != nil {
		return usageError(err)
	}
	log, err := metrics.NewLogger(c.logLevel, true, e.stderr)
	if err != nil {
		return fmt.Errorf("%w: --log-level: %w", errUsage, err)
	}
	defer func() { _ = log.Sync() }()
	file, err := agent.LoadFile(c.config)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	st, err := file.Build()
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	spool, err := agent.OpenSpool(file.Spool.Dir, int64(file.Spool.MaxMB)<<20, log.Named("spool"))
	if err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	stats := &agent.Stats{}
	a := agent.New(agent.Options{
		Settings: st, Spool: spool, Logger: log.Named("agent"), Stats: stats, Reloads: hup,
		Reload: func() (agent.Settings, error) { return reloadAgent(c.config, file.Spool, log) },
	})
	n, bytes := spool.Depth()
	log.Info("agent starting", zap.String("project", file.Project), zap.String("url", hostOnly(file.URL)),
		zap.Int("sources", len(file.Sources)), zap.Duration("tick", file.Tick), zap.String("spool", file.Spool.Dir),
		zap.Int("spooled_ticks", n), zap.Int64("spooled_bytes", bytes), zap.Bool("once", c.once))
	if c.once {
		return a.Once(ctx)
	}
	p := pool.New().WithErrors().WithContext(ctx).WithCancelOnError()
	if c.metricsListen != "" {
		reg := metrics.NewRegistry()
		reg.MustRegister(agent.NewCollector(stats, spool))
		mux := http.NewServeMux()
		mux.Handle("/metrics", metrics.Handler(reg))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		ln, err := net.Listen("tcp", c.metricsListen)
		if err != nil {
			return fmt.Errorf("--metrics-listen: %w", err)
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		p.Go(func(ctx context.Context) error { return app.RunHTTP(ctx, srv, ln) })
	}
	p.Go(a.Run)
	return p.Wait()
}

// reloadAgent reads the config file again for SIGHUP. The spool's settings only change with
// a restart (the running spool holds ticks that must not be lost).
func reloadAgent(path string, spool agent.SpoolFile, log *zap.Logger) (agent.Settings, error) {
	f, err := agent.LoadFile(path)
	if err != nil {
		return agent.Settings{}, err
	}
	if f.Spool != spool {
		log.Warn("the spool's settings change with a restart only: the running spool stays", zap.String("dir", spool.Dir), zap.Int("max_mb", spool.MaxMB))
	}
	return f.Build()
}

// hostOnly is a URL's scheme and host, for logs (never its user info).
func hostOnly(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	return u.Scheme + "://" + u.Host
}
