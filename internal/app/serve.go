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

	"github.com/sourcegraph/conc"
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
	"github.com/gameops/rollup/lease"
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
	storeMonitor := bulk.NewStoreMonitor(0)
	client, err := connectStore(uri, storeMonitor)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("connect to store: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = client.Disconnect(dctx)
	}()
	a, err := newAppServer(cfg, client, storeMonitor, ln, certs, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	return a.run(ctx, cfg, ln, log, out)
}

// connectStore connects to the store at uri. A short heartbeat (the URI's heartbeatFrequencyMS
// wins) notices a store that came back soon; the driver's default would delay every
// component's recovery. Server selection gives up after 2 s (twice the heartbeat): every
// component retries with its own backoff, and agents and dashboards get their 503 sooner. The
// bulk writer follows the driver's view of the deployment (storeMonitor) to refuse writes as
// soon as no server takes them.
func connectStore(uri string, storeMonitor *bulk.StoreMonitor) (*mongo.Client, error) {
	return mongo.Connect(options.Client().SetHeartbeatInterval(time.Second).ApplyURI(uri).
		SetAppName("rollup").
		SetServerSelectionTimeout(2 * time.Second).SetServerMonitor(storeMonitor.ServerMonitor()))
}

// appServer is the components of `rollup serve` that use the store, wired together and not
// yet started.
type appServer struct {
	db         *mongo.Database
	st         *serveStatus
	trees      *treedb.Store
	writer     *bulk.Writer
	apiServer  *api.Server
	mux        *http.ServeMux
	httpServer *http.Server
	// baseURL is the API's URL; demoHTTP the client the demo reaches it with (nil: the default).
	baseURL  string
	demoHTTP *http.Client
	watcher  *watcher.Watcher
	// migrated is closed once the schema is in place.
	migrated      chan struct{}
	projectTotals *totals.Reader      // business metrics, unless --totals-max-projects 0
	enforcer      *retention.Enforcer // deletes what the retention policy no longer keeps, unless --retention=false
	probe         *metrics.Probe
}

// newAppServer builds the components on client's database: the bulk writer, the API and
// dashboard behind the HTTP server (TLS only with certs), the watcher, and the observability.
func newAppServer(cfg Config, client *mongo.Client, storeMonitor *bulk.StoreMonitor, ln net.Listener, certs *certfile.Reloader,
	log *zap.Logger) (*appServer, error) {
	db := mongoconn.Database(client, cfg.Database)
	a := &appServer{db: db, st: newServeStatus(cfg.Retention.Enabled), trees: treedb.New(db), migrated: make(chan struct{})}
	treeCache := treedb.NewCache(a.trees)
	// Every project's trees in memory: the API refuses ids of another project and interior nodes.
	directory := treedb.NewDirectory(a.trees, treedb.DirectoryOptions{})
	a.writer = bulk.New(db.Collection(store.CountsCollection), bulk.Options{AttemptTimeout: 10 * time.Second, StoreMonitor: storeMonitor,
		RecordOutages: true, Instance: cfg.InstanceID, Workers: cfg.BulkWorkers}, log)
	a.st.bulk = a.writer.Tracker()
	a.apiServer = api.NewServer(api.Config{DB: db, Sink: &gatedSink{open: a.migrated, next: a.writer}, TreeStore: a.trees, Trees: directory, Logger: log,
		TokenRPS: APILimit(cfg.TokenRPS), TokenLeavesPerSecond: APILimit(cfg.TokenLeavesPerS)})
	a.mux = http.NewServeMux()
	a.mux.Handle("/v1/", a.apiServer.Handler())
	a.mux.Handle("/", web.Handler())
	a.httpServer = &http.Server{Handler: a.mux, ReadHeaderTimeout: 10 * time.Second}
	a.baseURL = "http://" + ln.Addr().String()
	if certs != nil {
		a.httpServer.TLSConfig = certs.ServerConfig()
		a.baseURL, a.demoHTTP = "https://"+ln.Addr().String(), pinnedClient(certs)
	}

	parts, err := watcher.ParsePartitions(cfg.Partitions) // checked by Validate
	if err != nil {
		return nil, fmt.Errorf("watcher partitions: %w", err)
	}
	a.watcher = watcher.New(db, treeCache, watcher.Options{
		Partitions: parts, Leases: true, LeaseTTL: cfg.LeaseTTL, MaxPartitions: cfg.MaxPartitions,
		Owner: cfg.InstanceID, Status: a.st.watcher, Workers: cfg.RecomputeWorkers,
	}, log)
	if err := a.observe(cfg, client, log); err != nil {
		return nil, err
	}
	return a, nil
}

// observe builds the business metrics and the retention enforcer (each unless disabled) and
// serves Prometheus metrics and the health endpoints on the same listener as the API.
func (a *appServer) observe(cfg Config, client *mongo.Client, log *zap.Logger) error {
	reg := metrics.NewRegistry()
	sources := metrics.Sources{API: a.apiServer.Stats, Bulk: a.writer.Stats, Watcher: a.watcher.Stats,
		Progress: a.watcher.Progress, Leadership: a.watcher.Leadership, Components: a.st.states}
	if cfg.Totals.Enabled() {
		to := cfg.Totals.Options()
		to.Trees = a.trees // the directory loads every project's tree from it anyway
		a.projectTotals = totals.New(a.db, to, log.Named("totals"))
		sources.Totals = a.projectTotals.Snapshot
	}
	if cfg.Retention.Enabled {
		a.enforcer = retention.New(a.db, cfg.Retention.Options(cfg.InstanceID, a.st.retention), log.Named("retention"))
		sources.Retention = a.enforcer.Stats
	}
	if err := metrics.Register(reg, sources); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	health := &metrics.Health{Components: a.st.states}
	a.mux.Handle("/metrics", metrics.Handler(reg))
	a.mux.Handle("/healthz", health.Live())
	a.mux.Handle("/readyz", health.Ready())
	a.probe = &metrics.Probe{Ping: func(ctx context.Context) error { return client.Ping(ctx, readpref.Primary()) }, Tracker: a.st.store}
	return nil
}

// run starts the HTTP server at once, prints the API's URL on out, and runs the other
// components until ctx is done: migrations first, then the watcher, the retention enforcer and
// the demo once the schema is in place.
func (a *appServer) run(ctx context.Context, cfg Config, ln net.Listener, log *zap.Logger, out io.Writer) error {
	p := pool.New().WithContext(ctx).WithCancelOnError()
	if a.projectTotals != nil {
		p.Go(a.projectTotals.Run)
	}
	p.Go(func(ctx context.Context) error { return RunHTTP(ctx, a.httpServer, ln) })
	log.Info("api listening", zap.String("url", a.baseURL))
	_, _ = fmt.Fprintf(out, "rollup API: %s\n", a.baseURL)
	p.Go(a.probe.Run)
	p.Go(a.apiServer.Run) // writes the tokens' last-used times
	p.Go(a.writer.Run)
	if cfg.BulkWorkers == 0 {
		// The default writes in flight are the store's budget (by its cores, once migrated),
		// shared by the live instances (docs/scaling.md): counted from their heartbeats, 5
		// beats being live.
		live := lease.NewLiveCount(a.db, 3*time.Second, 5*watcher.DefaultHeartbeat, a.writer.ShareInFlight, log.Named("bulk"))
		p.Go(live.Run)
	}
	p.Go(func(ctx context.Context) error {
		if err := migrateAtStart(ctx, a.db, log.Named("migrations"), a.st.migrations); err != nil {
			return err
		}
		close(a.migrated)
		if cfg.BulkWorkers == 0 { // the store answers now: its cores size the shared budget
			a.writer.SizeByStore(ctx)
		}
		return nil
	})
	p.Go(func(ctx context.Context) error {
		if !waitFor(ctx, a.migrated) {
			return nil
		}
		a.st.watcher.NotReady("starting")
		return a.watcher.Run(ctx)
	})
	if a.enforcer != nil {
		p.Go(func(ctx context.Context) error {
			if !waitFor(ctx, a.migrated) {
				return nil
			}
			a.st.retention.NotReady("starting")
			return a.enforcer.Run(ctx)
		})
	}
	if cfg.Demo {
		p.Go(func(ctx context.Context) error { return a.runDemo(ctx, cfg, log, out) })
	}
	return p.Wait()
}

// runDemo waits for the schema, sets up the demo project and prints its token and dashboard
// link on out, then runs the demo agents until ctx is done.
func (a *appServer) runDemo(ctx context.Context, cfg Config, log *zap.Logger, out io.Writer) error {
	if !waitFor(ctx, a.migrated) {
		return nil
	}
	demo, err := startDemo(ctx, a.db, a.trees, a.baseURL, a.demoHTTP,
		demoOptions{agents: cfg.DemoAgents, backfill: cfg.DemoBackfill, viaAgent: cfg.DemoAgent}, log.Named("demo"))
	if err != nil || demo == nil {
		return err
	}
	_, _ = fmt.Fprintf(out, "demo project %q, token %s\ndashboard: %s/#token=%s&project=%s\n", demo.project, demo.token, a.baseURL, url.QueryEscape(demo.token), url.QueryEscape(demo.project))
	return demo.Run(ctx)
}

// RunHTTP serves srv on ln until ctx is done, then shuts it down gracefully within a bounded
// time. With srv.TLSConfig set it serves TLS only (its GetCertificate or Certificates); a plain
// HTTP request on that port is answered 400 "Client sent an HTTP request to an HTTPS server".
func RunHTTP(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	var serving conc.WaitGroup
	defer serving.Wait() // Serve has returned by then (Shutdown closed the listener)
	serving.Go(func() {
		err := errServePanicked
		defer func() { errc <- err }()
		if srv.TLSConfig != nil {
			err = srv.ServeTLS(ln, "", "")
			return
		}
		err = srv.Serve(ln)
	})
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

// errServePanicked is RunHTTP's error when Serve panicked; the panic is raised again as
// RunHTTP returns.
var errServePanicked = errors.New("http server panicked")

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
