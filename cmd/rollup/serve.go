package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/sourcegraph/conc/pool"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/metrics"
	"github.com/gameops/rollup/metrics/totals"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree/treedb"
	"github.com/gameops/rollup/watcher"
	"github.com/gameops/rollup/web"
)

const serveUsage = `usage: rollup serve [flags]

Run rollup: the ingest and read API, the dashboard (at /), the bulk writer, the watcher that
keeps parent and root totals, and (with --demo) simulated agents. Without
--mongodb-uri it starts the embedded MongoDB-compatible server in-process (the embedded
default): durable in --data, or in memory with --demo. Pending migrations are applied at start.
The HTTP port answers at once (/healthz 200, /readyz 503 until ready); store faults are waited
out with backoff, never fatal; only configuration errors end it (exit status 1).

Examples:
  rollup serve --demo                                   # in memory, demo project, token and agents
  rollup serve --data ./rollup-data                     # embedded store, durable
  rollup serve --mongodb-uri 'mongodb://db1,db2,db3/?replicaSet=rs0' --listen :8080

Flags:
`

// serveConfig is the parsed configuration of the serve command.
type serveConfig struct {
	mongoURI     string
	database     string
	dataDir      string
	demo         bool
	demoAgents   int
	embeddedAddr string
	listen       string
	logLevel     string
	// partitions splits the watcher's work ("" = one partition; "hash:N"; "projects:a,b;c").
	partitions    string
	leaseTTL      time.Duration
	maxPartitions int
	// totals are the business metrics' settings (serve_totals.go).
	totals totalsConfig
	// instanceID names this instance in watcher leases ("" = the default, see instanceID).
	instanceID string
	// sources says where each setting came from (flag, environment, config file, default).
	sources *settings
}

// logFields describe the configuration for the start-up log line: every setting, the
// MongoDB URI as its hosts only.
func (c serveConfig) logFields() []zap.Field {
	uri := redactURI(c.mongoURI)
	if uri == "" {
		uri = "(embedded)"
	}
	return append([]zap.Field{
		zap.String("mongodb_uri", uri), zap.String("database", c.database), zap.String("data", c.dataDir),
		zap.Bool("demo", c.demo), zap.Int("demo_agents", c.demoAgents), zap.String("embedded_listen", c.embeddedAddr),
		zap.String("listen", c.listen), zap.String("log_level", c.logLevel), zap.String("instance_id", c.instanceID),
	}, c.totals.logFields()...)
}

func parseServe(e *env, args []string) (serveConfig, error) {
	return parseServeEnv(e, args, os.LookupEnv)
}

// parseServeEnv parses serve's settings from args, lookupEnv and the --config file, and
// validates them; errors name the setting and where its value came from.
func parseServeEnv(e *env, args []string, lookupEnv func(string) (string, bool)) (serveConfig, error) {
	var c serveConfig
	fs := newConfigFlagSet(e, "serve", serveUsage)
	fs.StringVar(&c.mongoURI, "mongodb-uri", "", "MongoDB connection string (env ROLLUP_MONGODB_URI); empty starts the embedded server")
	fs.StringVar(&c.database, "database", store.DefaultDatabase, "database name")
	fs.StringVar(&c.dataDir, "data", "rollup-data", "data directory of the embedded server")
	fs.BoolVar(&c.demo, "demo", false, "demo mode: embedded server in memory, a demo project, its token and simulated agents")
	fs.IntVar(&c.demoAgents, "demo-agents", 20, "simulated agents in --demo")
	fs.StringVar(&c.embeddedAddr, "embedded-listen", "127.0.0.1:0", "address of the embedded server (port 0 picks a free one)")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "HTTP address of the API and the dashboard")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.partitions, "watcher-partitions", "", `watcher partitions: "" (one), "hash:N" (by project hash) or "projects:a,b;c"; every instance must use the same`)
	fs.DurationVar(&c.leaseTTL, "lease-ttl", watcher.DefaultLeaseTTL, "watcher lease TTL: a standby takes over a partition this long after its leader dies")
	fs.IntVar(&c.maxPartitions, "max-partitions", 0, "most partitions this instance leads (0 = all it can; set ≈ partitions ÷ instances to spread the work)")
	c.totals.register(fs)
	fs.StringVar(&c.instanceID, "instance-id", "", "stable id of this instance in watcher leases: a restart with the same id leads again at once; "+
		"never share one between live processes (default: kept in --data for the embedded store, else host@listen)")
	src, err := parseConfigFlags(fs, args, lookupEnv)
	c.sources = src
	if err != nil {
		return c, err
	}
	return c, c.validate()
}

// validate checks the settings together; an error names the setting and its source.
func (c serveConfig) validate() error {
	s := c.sources
	switch {
	case c.demo && c.mongoURI != "":
		return s.errorf("mongodb-uri", "--demo runs on the embedded server: unset --mongodb-uri (or drop --demo)")
	case c.demoAgents < 1:
		return s.errorf("demo-agents", "must be at least 1, got %d", c.demoAgents)
	case c.mongoURI == "" && !c.demo && c.dataDir == "":
		return s.errorf("data", "the embedded server needs a data directory (or pass --demo for an in-memory store)")
	}
	if err := checkMongoURI(c.mongoURI); err != nil {
		return s.errorf("mongodb-uri", "%w", err)
	}
	if c.mongoURI != "" {
		if err := bulk.CheckClientOptions(options.Client().ApplyURI(c.mongoURI)); err != nil {
			return s.errorf("mongodb-uri", "%w", err)
		}
	}
	if err := checkDatabaseName(c.database); err != nil {
		return s.errorf("database", "%w", err)
	}
	if err := checkListenAddr(c.listen); err != nil {
		return s.errorf("listen", "%w", err)
	}
	if c.mongoURI == "" {
		if err := checkListenAddr(c.embeddedAddr); err != nil {
			return s.errorf("embedded-listen", "%w", err)
		}
	}
	if _, err := zapcore.ParseLevel(c.logLevel); err != nil {
		return s.errorf("log-level", "want debug, info, warn or error, got %q", c.logLevel)
	}
	if _, err := watcher.ParsePartitions(c.partitions); err != nil {
		return s.errorf("watcher-partitions", "%w", err)
	}
	if c.leaseTTL < time.Second {
		return s.errorf("lease-ttl", "must be at least 1s, got %s", c.leaseTTL)
	}
	if c.maxPartitions < 0 {
		return s.errorf("max-partitions", "must not be negative, got %d", c.maxPartitions)
	}
	if err := checkInstanceID(c.instanceID); err != nil {
		return s.errorf("instance-id", "%w", err)
	}
	return c.totals.validate(s)
}

func runServe(ctx context.Context, e *env, args []string) error {
	cfg, err := parseServe(e, args)
	if err != nil {
		return usageError(err)
	}
	// JSON logs in production, console in the demo.
	log, err := metrics.NewLogger(cfg.logLevel, !cfg.demo, e.stderr)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	defer func() { _ = log.Sync() }()

	p := pool.New().WithContext(ctx).WithCancelOnError()
	uri := cfg.mongoURI
	// The embedded store outlives the components that write to it: it stops only once they
	// have drained, and its failure stops them through the pool.
	storeCtx, stopStore := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStore()
	embeddedDir := ""
	if uri == "" {
		if !cfg.demo {
			embeddedDir = cfg.dataDir
		}
		srv, err := embedded.New(embedded.Config{Listen: cfg.embeddedAddr, DataDir: embeddedDir, Logger: log.Named("mongod")})
		if err != nil {
			return fmt.Errorf("start embedded server: %w", err)
		}
		uri = srv.URI()
		log.Info("embedded store started", zap.String("addr", srv.Addr()), zap.String("data", dirOrMemory(embeddedDir)))
		p.Go(func(context.Context) error { return srv.Run(storeCtx) })
	}
	if cfg.instanceID == "" {
		if cfg.instanceID, err = defaultInstanceID(embeddedDir, cfg.listen); err != nil {
			stopStore()
			_ = p.Wait()
			return err
		}
	}
	log.Info("starting", cfg.logFields()...)
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		stopStore()
		_ = p.Wait()
		return fmt.Errorf("listen: %w", err)
	}
	p.Go(func(ctx context.Context) error {
		defer stopStore()
		return serveApp(ctx, e, log, cfg, uri, ln)
	})
	if err := p.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// serveApp runs the components that use the store until ctx is done. The HTTP server starts
// first and never waits for the store: migrations, the watcher and the demo wait for it with
// backoff (see serve_start.go) while /readyz says what waits and ingest answers 503.
func serveApp(ctx context.Context, e *env, log *zap.Logger, cfg serveConfig, uri string, ln net.Listener) error {
	// A short heartbeat (the URI's heartbeatFrequencyMS wins) notices a store that came back
	// soon; the driver's default would delay every component's recovery.
	client, err := mongo.Connect(options.Client().SetHeartbeatInterval(time.Second).ApplyURI(uri).
		SetAppName("rollup").
		SetServerSelectionTimeout(5 * time.Second))
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("connect to store: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = client.Disconnect(dctx)
	}()
	db := client.Database(cfg.database, options.Database().SetWriteConcern(&writeconcern.WriteConcern{W: "majority", Journal: boolPtr(true)}))

	st := newServeStatus()
	trees := treedb.New(db)
	treeCache := treedb.NewCache(trees)
	// Every project's trees in memory: the API refuses ids of another project and interior nodes.
	directory := treedb.NewDirectory(trees, treedb.DirectoryOptions{})
	writer := bulk.New(db.Collection(store.CountsCollection), bulk.Options{AttemptTimeout: 10 * time.Second}, log.Named("bulk"))
	st.bulk = writer.Tracker()
	migrated := make(chan struct{}) // closed once the schema is in place
	apiServer := api.NewServer(api.Config{DB: db, Sink: &gatedSink{open: migrated, next: writer}, TreeStore: trees, Trees: directory, Logger: log})
	mux := http.NewServeMux()
	mux.Handle("/v1/", apiServer.Handler())
	mux.Handle("/", web.Handler())
	httpServer := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	parts, err := watcher.ParsePartitions(cfg.partitions) // validated in parseServe
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("watcher partitions: %w", err)
	}
	w := watcher.New(db, treeCache, watcher.Options{
		Partitions: parts, Leases: true, LeaseTTL: cfg.leaseTTL, MaxPartitions: cfg.maxPartitions,
		Owner: cfg.instanceID, Status: st.watcher,
	}, log)

	// Observability: Prometheus metrics and health endpoints on the same listener.
	reg := metrics.NewRegistry()
	sources := metrics.Sources{API: apiServer.Stats, Bulk: writer.Stats, Watcher: w.Stats,
		Progress: w.Progress, Leadership: w.Leadership, Components: st.states}
	var projectTotals *totals.Reader // business metrics, unless --totals-max-projects 0
	if cfg.totals.enabled() {
		projectTotals = totals.New(db, cfg.totals.options(), log.Named("totals"))
		sources.Totals = projectTotals.Snapshot
	}
	if err := metrics.Register(reg, sources); err != nil {
		_ = ln.Close()
		return fmt.Errorf("register metrics: %w", err)
	}
	health := &metrics.Health{Components: st.states}
	mux.Handle("/metrics", metrics.Handler(reg))
	mux.Handle("/healthz", health.Live())
	mux.Handle("/readyz", health.Ready())
	probe := &metrics.Probe{Ping: func(ctx context.Context) error { return client.Ping(ctx, readpref.Primary()) }, Tracker: st.store}

	p := pool.New().WithContext(ctx).WithCancelOnError()
	if projectTotals != nil {
		p.Go(projectTotals.Run)
	}
	p.Go(func(ctx context.Context) error { return runHTTP(ctx, httpServer, ln) })
	baseURL := "http://" + ln.Addr().String()
	log.Info("api listening", zap.String("url", baseURL))
	_, _ = fmt.Fprintf(e.stdout, "rollup API: %s\n", baseURL)
	p.Go(probe.Run)
	p.Go(writer.Run)
	p.Go(func(ctx context.Context) error {
		if err := migrateAtStart(ctx, db, log.Named("migrations"), st.migrations); err != nil {
			return err
		}
		close(migrated)
		return nil
	})
	p.Go(func(ctx context.Context) error {
		if !waitFor(ctx, migrated) {
			return nil
		}
		st.watcher.NotReady("starting")
		return w.Run(ctx)
	})
	if cfg.demo {
		p.Go(func(ctx context.Context) error {
			if !waitFor(ctx, migrated) {
				return nil
			}
			demo, err := startDemo(ctx, db, trees, baseURL, cfg.demoAgents, log.Named("demo"))
			if err != nil || demo == nil {
				return err
			}
			_, _ = fmt.Fprintf(e.stdout, "demo project %q, token %s\ndashboard: %s/#token=%s&project=%s\n", demo.project, demo.token, baseURL, url.QueryEscape(demo.token), url.QueryEscape(demo.project))
			return demo.Run(ctx)
		})
	}
	return p.Wait()
}

// runHTTP serves until ctx is done, then shuts down gracefully within a bounded time.
func runHTTP(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	return nil
}

func boolPtr(b bool) *bool { return &b }

func dirOrMemory(dir string) string {
	if dir == "" {
		return "(memory)"
	}
	return dir
}
