package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/sourcegraph/conc/pool"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.uber.org/zap"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/embedded/storage"
	"github.com/gameops/rollup/internal/certfile"
	"github.com/gameops/rollup/internal/mongoconn"
	"github.com/gameops/rollup/metrics"
	"github.com/gameops/rollup/metrics/totals"
	"github.com/gameops/rollup/retention"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree/treedb"
	"github.com/gameops/rollup/watcher"
	"github.com/gameops/rollup/web"
)

// Serve runs rollup with cfg (validated) until ctx ends, then shuts down gracefully. It
// prints the API's URL ("rollup API: http://...") and, in the demo, the demo's token and
// dashboard link on out. It returns nil after a shutdown and an error only for what waiting
// cannot fix (configuration errors, a port in use, a duplicate instance id...).
func Serve(ctx context.Context, cfg Config, log *zap.Logger, out io.Writer) error {
	p := pool.New().WithContext(ctx).WithCancelOnError()
	uri := cfg.MongoURI
	// The embedded store outlives the components that write to it: it stops only once they
	// have drained, and its failure stops them through the pool.
	storeCtx, stopStore := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStore()
	embeddedDir := ""
	if uri == "" {
		if !cfg.Demo {
			embeddedDir = cfg.DataDir
		}
		srv, err := embedded.New(embedded.Config{
			Listen: cfg.EmbeddedListen, DataDir: embeddedDir, Logger: log.Named("mongod"),
			Storage: storage.Options{OplogMaxBytes: int64(cfg.EmbeddedOplogMB) << 20},
		})
		if err != nil {
			return fmt.Errorf("start embedded server: %w", err)
		}
		uri = srv.URI()
		log.Info("embedded store started", zap.String("addr", srv.Addr()), zap.String("data", dirOrMemory(embeddedDir)))
		p.Go(func(context.Context) error { return srv.Run(storeCtx) })
	}
	if cfg.InstanceID == "" {
		var err error
		if cfg.InstanceID, err = DefaultInstanceID(embeddedDir, cfg.Listen); err != nil {
			stopStore()
			_ = p.Wait()
			return err
		}
	}
	log.Info("starting", cfg.LogFields()...)
	var certs *certfile.Reloader
	if cfg.TLSCert != "" {
		var err error
		if certs, err = certfile.Load(cfg.TLSCert, cfg.TLSKey, certfile.Options{Logger: log.Named("tls")}); err != nil {
			stopStore()
			_ = p.Wait()
			return fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		stopStore()
		_ = p.Wait()
		return fmt.Errorf("listen: %w", err)
	}
	p.Go(func(ctx context.Context) error {
		defer stopStore()
		return serveApp(ctx, cfg, uri, ln, certs, log, out)
	})
	if err := p.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// serveApp runs the components that use the store until ctx is done. The HTTP server starts
// first and never waits for the store: migrations, the watcher and the demo wait for it with
// backoff (see status.go) while /readyz says what waits and ingest answers 503.
// With certs the API is served over TLS only.
func serveApp(ctx context.Context, cfg Config, uri string, ln net.Listener, certs *certfile.Reloader, log *zap.Logger, out io.Writer) error {
	// A short heartbeat (the URI's heartbeatFrequencyMS wins) notices a store that came back
	// soon; the driver's default would delay every component's recovery. Server selection
	// gives up after 2 s (twice the heartbeat): every component retries with its own backoff,
	// and agents and dashboards get their 503 sooner. The bulk writer follows the driver's
	// view of the deployment (StoreMonitor) to refuse writes as soon as no server takes them.
	storeMonitor := bulk.NewStoreMonitor(0)
	client, err := mongo.Connect(options.Client().SetHeartbeatInterval(time.Second).ApplyURI(uri).
		SetAppName("rollup").
		SetServerSelectionTimeout(2 * time.Second).SetServerMonitor(storeMonitor.ServerMonitor()))
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("connect to store: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = client.Disconnect(dctx)
	}()
	db := mongoconn.Database(client, cfg.Database)

	st := newServeStatus(cfg.Retention.Enabled)
	trees := treedb.New(db)
	treeCache := treedb.NewCache(trees)
	// Every project's trees in memory: the API refuses ids of another project and interior nodes.
	directory := treedb.NewDirectory(trees, treedb.DirectoryOptions{})
	writer := bulk.New(db.Collection(store.CountsCollection), bulk.Options{AttemptTimeout: 10 * time.Second, StoreMonitor: storeMonitor}, log.Named("bulk"))
	st.bulk = writer.Tracker()
	migrated := make(chan struct{}) // closed once the schema is in place
	apiServer := api.NewServer(api.Config{DB: db, Sink: &gatedSink{open: migrated, next: writer}, TreeStore: trees, Trees: directory, Logger: log,
		TokenRPS: APILimit(cfg.TokenRPS), TokenLeavesPerSecond: APILimit(cfg.TokenLeavesPerS)})
	mux := http.NewServeMux()
	mux.Handle("/v1/", apiServer.Handler())
	mux.Handle("/", web.Handler())
	httpServer := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	baseURL, demoHTTP := "http://"+ln.Addr().String(), (*http.Client)(nil)
	if certs != nil {
		httpServer.TLSConfig = certs.ServerConfig()
		baseURL, demoHTTP = "https://"+ln.Addr().String(), pinnedClient(certs)
	}

	parts, err := watcher.ParsePartitions(cfg.Partitions) // checked by Validate
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("watcher partitions: %w", err)
	}
	w := watcher.New(db, treeCache, watcher.Options{
		Partitions: parts, Leases: true, LeaseTTL: cfg.LeaseTTL, MaxPartitions: cfg.MaxPartitions,
		Owner: cfg.InstanceID, Status: st.watcher,
	}, log)

	// Observability: Prometheus metrics and health endpoints on the same listener.
	reg := metrics.NewRegistry()
	sources := metrics.Sources{API: apiServer.Stats, Bulk: writer.Stats, Watcher: w.Stats,
		Progress: w.Progress, Leadership: w.Leadership, Components: st.states}
	var projectTotals *totals.Reader // business metrics, unless --totals-max-projects 0
	if cfg.Totals.Enabled() {
		to := cfg.Totals.Options()
		to.Trees = trees // the directory loads every project's tree from it anyway
		projectTotals = totals.New(db, to, log.Named("totals"))
		sources.Totals = projectTotals.Snapshot
	}
	var enforcer *retention.Enforcer // deletes what the retention policy no longer keeps, unless --retention=false
	if cfg.Retention.Enabled {
		enforcer = retention.New(db, cfg.Retention.Options(cfg.InstanceID, st.retention), log.Named("retention"))
		sources.Retention = enforcer.Stats
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
	p.Go(func(ctx context.Context) error { return RunHTTP(ctx, httpServer, ln) })
	log.Info("api listening", zap.String("url", baseURL))
	_, _ = fmt.Fprintf(out, "rollup API: %s\n", baseURL)
	p.Go(probe.Run)
	p.Go(apiServer.Run) // writes the tokens' last-used times
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
	if enforcer != nil {
		p.Go(func(ctx context.Context) error {
			if !waitFor(ctx, migrated) {
				return nil
			}
			st.retention.NotReady("starting")
			return enforcer.Run(ctx)
		})
	}
	if cfg.Demo {
		p.Go(func(ctx context.Context) error {
			if !waitFor(ctx, migrated) {
				return nil
			}
			demo, err := startDemo(ctx, db, trees, baseURL, demoHTTP, cfg.DemoAgents, cfg.DemoAgent, log.Named("demo"))
			if err != nil || demo == nil {
				return err
			}
			_, _ = fmt.Fprintf(out, "demo project %q, token %s\ndashboard: %s/#token=%s&project=%s\n", demo.project, demo.token, baseURL, url.QueryEscape(demo.token), url.QueryEscape(demo.project))
			return demo.Run(ctx)
		})
	}
	return p.Wait()
}

// RunHTTP serves srv on ln until ctx is done, then shuts it down gracefully within a bounded
// time. With srv.TLSConfig set it serves TLS only (its GetCertificate or Certificates); a plain
// HTTP request on that port is answered 400 "Client sent an HTTP request to an HTTPS server".
func RunHTTP(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() {
		if srv.TLSConfig != nil {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
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

// pinnedClient is the HTTP client of the demo's in-process agents under TLS: it trusts
// exactly the certificate served now (whatever its names and issuer), as the agents reach
// the server by its listening address.
func pinnedClient(certs *certfile.Reloader) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by the pin below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, certs.Certificate().Certificate[0]) {
				return errors.New("demo agent: the server's certificate is not the one rollup serves")
			}
			return nil
		},
	}
	return &http.Client{Transport: tr, Timeout: agentclient.DefaultHTTPTimeout}
}

func dirOrMemory(dir string) string {
	if dir == "" {
		return "(memory)"
	}
	return dir
}
