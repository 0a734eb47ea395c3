package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	"github.com/sourcegraph/conc/pool"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/agentsim"
	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/embedded/blackpipe"
	"github.com/gameops/rollup/internal/app"
	"github.com/gameops/rollup/internal/mongoconn"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/store"
)

// IngestConfig is the shape of the end-to-end ingest benchmark.
type IngestConfig struct {
	Agents, LeavesPerAgent, Ticks int
	Durable                       bool   // the embedded server keeps a data directory
	URI                           string // benchmark this MongoDB instead of an embedded server
	Client                        string // how the agents send: ClientLoadGen or ClientAgentClient
	// PhaseProfile, if set, is the prefix of one CPU profile per measured phase:
	// PhaseProfile.ingest.N and PhaseProfile.raw.N for tick N, so each path's CPU is read apart.
	PhaseProfile string
	// RawFilter is the raw path's upsert filter: RawFilterPlain or RawFilterGuarded.
	RawFilter string
	// Conns is the load generator's connections, its requests in flight (0: benchConns).
	Conns int
	// Warmup ticks run both paths before the measured ticks, unreported: the first phase of
	// a fresh process otherwise runs on a small heap and pays several times the garbage
	// collections of the phases after it.
	Warmup int
}

// The agents' clients of the ingest benchmark.
const (
	// ClientLoadGen: persistent HTTP/1.1 connections with requests prepared before the
	// measured window, as an HTTP load generator (wrk, hey) sends them.
	ClientLoadGen = "loadgen"
	// ClientAgentClient: the agent package over net/http, encoding and sending in the window.
	ClientAgentClient = "agentclient"
)

// The raw path's filters.
const (
	// RawFilterPlain: the key and version < v, what a writer without rollup's guards sends
	// (the baseline of every figure in docs/benchmarks.md).
	RawFilterPlain = "plain"
	// RawFilterGuarded: the filter rollup sends (store.LeafFilter: the key, the project,
	// version < v, not a parent), so the ratio measures rollup's code alone, not the guards.
	RawFilterGuarded = "guarded"
)

// Validate checks the shape.
func (c IngestConfig) Validate() error {
	if c.Agents < 1 || c.LeavesPerAgent < 1 || c.Ticks < 1 {
		return errors.New("--agents, --leaves and --ticks must be positive")
	}
	if c.Client != ClientLoadGen && c.Client != ClientAgentClient {
		return fmt.Errorf("--client must be %s or %s, not %q", ClientLoadGen, ClientAgentClient, c.Client)
	}
	if c.Warmup < 0 {
		return errors.New("--warmup must not be negative")
	}
	if c.Conns < 0 || (c.Conns > 0 && c.Client != ClientLoadGen) {
		return errors.New("--conns must be positive (0: the default), and is the load generator's only")
	}
	if c.RawFilter != "" && c.RawFilter != RawFilterPlain && c.RawFilter != RawFilterGuarded {
		return fmt.Errorf("--raw-filter must be %s or %s, not %q", RawFilterPlain, RawFilterGuarded, c.RawFilter)
	}
	return nil
}

// benchConns bounds the requests in flight: the load generator's connections, as many as
// agentsim keeps submissions in flight.
const benchConns = agentsim.MaxInFlight

type ingestTick struct {
	leaves int
	ingest phaseStats // HTTP → durable leaves
	raw    phaseStats // raw driver bulk upserts of the same documents
	// resends are the load generator's requests sent again (a 503 of a busy store, ...).
	resends sendStats
}

// phaseStats is what one path cost for one tick.
type phaseStats struct {
	wall    time.Duration
	cpu     time.Duration // process CPU time (all goroutines)
	updates int           // update commands the store received
	alloc   uint64        // bytes allocated by the process
	gcs     uint32        // garbage collections that ended
}

func (p *phaseStats) add(o phaseStats) {
	p.wall += o.wall
	p.cpu += o.cpu
	p.updates += o.updates
	p.alloc += o.alloc
	p.gcs += o.gcs
}

// IngestResult is the ingest benchmark's measurement, per tick.
type IngestResult struct {
	cfg   IngestConfig
	ticks []ingestTick
}

// Ingest runs simulated agents -> HTTP API -> bulk writer -> store for cfg.Ticks ticks and,
// in the same run, raw driver bulk upserts of the same documents, against a fresh embedded
// server (or cfg.URI).
func Ingest(ctx context.Context, cfg IngestConfig) (IngestResult, error) {
	uri, stop, err := benchStore(ctx, cfg.URI, cfg.Durable)
	if err != nil {
		return IngestResult{cfg: cfg}, err
	}
	defer stop()
	ticks, err := benchIngest(ctx, uri, cfg)
	return IngestResult{cfg: cfg, ticks: ticks}, err
}

// Print writes the result as the command prints it.
func (r IngestResult) Print(w io.Writer) { printIngest(w, r.cfg, r.ticks) }

// Profile starts a CPU profile into cpuPath and, at stop, writes an allocation profile into
// memPath (either may be empty: no such profile).
func Profile(cpuPath, memPath string) (stop func() error, err error) {
	var cpu *os.File
	if cpuPath != "" {
		if cpu, err = os.Create(cpuPath); err != nil {
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			_ = cpu.Close()
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
	}
	if memPath != "" {
		runtime.MemProfileRate = 64 << 10
	}
	return func() error {
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				return fmt.Errorf("cpu profile: %w", err)
			}
		}
		if memPath != "" {
			return writeHeapProfile(memPath)
		}
		return nil
	}, nil
}

func printIngest(w io.Writer, cfg IngestConfig, ticks []ingestTick) {
	rawFilter := "key and version < v"
	if cfg.RawFilter == RawFilterGuarded {
		rawFilter = "rollup's guarded filter"
	}
	_, _ = fmt.Fprintf(w, "%d agents x %d leaves per tick, HTTP -> bulk writer -> store, vs raw driver bulk upserts (batches of %d, filter: %s); %d warm-up tick(s) not shown\n",
		cfg.Agents, cfg.LeavesPerAgent, bulk.DefaultMaxBatch, rawFilter, cfg.Warmup)
	_, _ = fmt.Fprintln(w, "tick  leaves   ingest leaves/s  raw leaves/s  ratio  CPU s (ingest/raw)  update cmds (ingest/raw)  bound ceil(leaves/batch)  MB allocated (ingest/raw)  GCs (ingest/raw)")
	var total ingestTick
	for i, t := range ticks {
		printIngestRow(w, fmt.Sprintf("%4d", i+1), t)
		total.leaves += t.leaves
		total.ingest.add(t.ingest)
		total.raw.add(t.raw)
	}
	if len(ticks) > 1 {
		printIngestRow(w, " all", total)
	}
	if cfg.Client != ClientLoadGen {
		return
	}
	// Ingest leaves/s include the waits before resends: say how much of the time they were.
	resent := false
	for i, t := range ticks {
		if t.resends.resends > 0 {
			_, _ = fmt.Fprintf(w, "tick %d: the load generator's agents sent again: %s\n", i+1, t.resends)
			resent = true
		}
	}
	if !resent {
		_, _ = fmt.Fprintln(w, "resends (an answer 503, 429, other 5xx or a transport failure, sent again after Retry-After): none")
	}
}

func printIngestRow(w io.Writer, label string, t ingestTick) {
	ir := float64(t.leaves) / t.ingest.wall.Seconds()
	rr := float64(t.leaves) / t.raw.wall.Seconds()
	bound := (t.leaves + bulk.DefaultMaxBatch - 1) / bulk.DefaultMaxBatch
	_, _ = fmt.Fprintf(w, "%s  %6d  %15.0f  %12.0f  %5.2f  %8.2f / %-8.2f  %10d / %-10d  %-24d  %10d / %-10d  %6d / %d\n", label, t.leaves, ir, rr, ir/rr,
		t.ingest.cpu.Seconds(), t.raw.cpu.Seconds(), t.ingest.updates, t.raw.updates, bound,
		t.ingest.alloc>>20, t.raw.alloc>>20, t.ingest.gcs, t.raw.gcs)
}

func benchIngest(ctx context.Context, uri string, cfg IngestConfig) ([]ingestTick, error) {
	log := zap.NewNop()
	// Everything the store sees passes through the black-pipe proxy, which counts commands.
	target, err := hostOf(uri)
	if err != nil {
		return nil, err
	}
	proxy := blackpipe.New(target, log)
	if err := proxy.Listen("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	// Its counters are all the benchmark reads: recording each command's body (a copy of every
	// 1,000-upsert batch, the newest kept) would cost both paths CPU and live heap that
	// neither pays in production.
	proxy.CountOnly()
	p := pool.New().WithContext(ctx).WithCancelOnError()
	pctx, stopAll := context.WithCancel(ctx)
	defer func() {
		stopAll()
		_ = p.Wait()
	}()
	p.Go(func(context.Context) error { return proxy.Run(pctx) })

	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + proxy.Addr() + "/?directConnection=true"))
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	dbName := fmt.Sprintf("rollup_bench_%d", time.Now().UnixNano())
	db := mongoconn.Database(client, dbName)
	defer func() { _ = db.Drop(context.Background()) }()
	if _, err := migrations.New(db, log).Up(ctx, migrations.UpOptions{}); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	token, err := api.CreateToken(ctx, db, "bench", "bench")
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	writer := bulk.New(db.Collection(store.CountsCollection), bulk.Options{}, log)
	p.Go(func(context.Context) error { return writer.Run(pctx) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	httpServer := &http.Server{Handler: api.NewServer(api.Config{DB: db, Sink: writer, Logger: log, TokenRPS: -1, TokenLeavesPerSecond: -1}).Handler(), ReadHeaderTimeout: 10 * time.Second}
	p.Go(func(context.Context) error { return app.RunHTTP(pctx, httpServer, ln) })

	var leaves []agentsim.Leaf
	for i := range cfg.Agents * cfg.LeavesPerAgent {
		leaves = append(leaves, agentsim.Leaf{ID: fmt.Sprintf("bench-p%07d", i), Type: "process"})
	}
	prepareTick, closeClient := ingestClient(ctx, cfg, ln.Addr().String(), token, leaves)
	defer closeClient()
	raw := client.Database(dbName).Collection("raw_counts")
	if err := copyIndexes(ctx, db.Collection(store.CountsCollection), raw); err != nil {
		return nil, err
	}

	return measureIngestTicks(cfg.Ticks, proxy, prepareTick, func(tick, now time.Time) error {
		return rawUpserts(ctx, raw, leaves, tick, now, cfg.RawFilter == RawFilterGuarded)
	}, len(leaves), cfg.Warmup, cfg.PhaseProfile)
}

// prepareTickFunc does, before the measured window, what the agents do on their own machines
// for one tick (the load generator encodes the requests then); the function it returns sends
// them and is what is measured.
type prepareTickFunc func(tick, observed time.Time) (func() (sendStats, error), error)

// ingestClient returns how the agents of cfg.Client send each tick's leaves to the API at
// addr, and what closes their connections. Both clients keep at most benchConns requests in
// flight (the load generator cfg.Conns when set).
func ingestClient(ctx context.Context, cfg IngestConfig, addr, token string, leaves []agentsim.Leaf) (prepareTickFunc, func()) {
	if cfg.Client == ClientAgentClient {
		transport := &http.Transport{MaxIdleConnsPerHost: benchConns, MaxIdleConns: benchConns}
		sim := agentsim.New(agentsim.Config{
			Client:  &agentclient.Client{BaseURL: "http://" + addr, Token: token, HTTP: &http.Client{Transport: transport, Timeout: time.Minute}},
			Project: "bench", Leaves: leaves, Agents: cfg.Agents, Seed: 7,
		})
		// agentclient resends by itself (up to its MaxAttempts); its resends are not counted.
		return func(tick, observed time.Time) (func() (sendStats, error), error) {
			return func() (sendStats, error) { return sendStats{}, sim.SubmitTick(ctx, tick, observed, 0) }, nil
		}, transport.CloseIdleConnections
	}
	conns := benchConns
	if cfg.Conns > 0 {
		conns = cfg.Conns
	}
	gen := newLoadGen(addr, token, "bench", leaves, cfg.Agents, conns, 7)
	return func(tick, observed time.Time) (func() (sendStats, error), error) {
		reqs, err := gen.Prepare(tick, observed)
		if err != nil {
			return nil, err
		}
		return func() (sendStats, error) { return gen.Send(ctx, reqs) }, nil
	}, gen.Close
}

// measureIngestTicks measures ticks ticks of leaves leaves each, ending at the current 5-minute
// boundary: each tick once through rollup (prepareTick) and once as raw upserts (rawTick),
// the store commands of each counted by proxy, the order alternating from tick to tick, after
// warmup ticks of both paths that are not reported. With a profile prefix, each measured phase's
// CPU is profiled into its own file (prefix.ingest.N, prefix.raw.N).
func measureIngestTicks(ticks int, proxy *blackpipe.Proxy, prepareTick prepareTickFunc, rawTick func(tick, now time.Time) error, leaves, warmup int, profile string) ([]ingestTick, error) {
	now := time.Now().UTC()
	first := now.Truncate(5 * time.Minute).Add(-time.Duration(warmup+ticks) * 5 * time.Minute)
	var out []ingestTick
	for k := -warmup; k < ticks; k++ {
		i := k // the measured tick's index; negative while warming up
		tick := first.Add(time.Duration(warmup+k) * 5 * time.Minute)
		prof := func(phase string) string {
			if i < 0 {
				return ""
			}
			return phaseProfile(profile, phase, i)
		}
		t := ingestTick{leaves: leaves}
		ingest := func() error {
			submit, err := prepareTick(tick, now)
			if err != nil {
				return err
			}
			t.ingest, err = measurePhase(proxy, prof("ingest"), func() error {
				var err error
				t.resends, err = submit()
				return err
			})
			return err
		}
		rawPhase := func() error {
			var err error
			t.raw, err = measurePhase(proxy, prof("raw"), func() error { return rawTick(tick, now) })
			return err
		}
		// Alternate which path goes first, so neither always inherits the other's leftovers
		// (the measured ticks in the same order whatever the warm-up).
		phases := []func() error{ingest, rawPhase}
		if i%2 != 0 {
			phases[0], phases[1] = phases[1], phases[0]
		}
		for _, phase := range phases {
			if err := phase(); err != nil {
				return nil, err
			}
		}
		if i >= 0 {
			out = append(out, t)
		}
	}
	return out, nil
}

// measurePhase runs write after a full garbage collection (neither path pays for the other's
// garbage) and returns its wall time, the process's CPU time, the update commands the proxy
// saw, and what the process allocated and collected meanwhile; a CPU profile of it goes to
// profile (none if empty).
func measurePhase(proxy *blackpipe.Proxy, profile string, write func() error) (phaseStats, error) {
	runtime.GC()
	proxy.ResetStats()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	stopProfile, err := Profile(profile, "")
	if err != nil {
		return phaseStats{}, err
	}
	cpu0 := processCPU()
	start := time.Now()
	err = write()
	p := phaseStats{wall: time.Since(start), cpu: processCPU() - cpu0, updates: proxy.Stats().Commands["update"]}
	runtime.ReadMemStats(&m1)
	p.alloc, p.gcs = m1.TotalAlloc-m0.TotalAlloc, m1.NumGC-m0.NumGC
	if perr := stopProfile(); err == nil {
		err = perr
	}
	return p, err
}

// phaseProfile is the file of tick i's phase profile under prefix ("" without a prefix).
func phaseProfile(prefix, phase string, i int) string {
	if prefix == "" {
		return ""
	}
	return prefix + "." + phase + "." + strconv.Itoa(i+1)
}

// processCPU is the user and system CPU time the process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// copyIndexes creates on to every index of from (except _id's): the raw path must maintain
// the same indexes as the counts collection the ingest path writes, or the comparison is off
// by their cost.
func copyIndexes(ctx context.Context, from, to *mongo.Collection) error {
	cur, err := from.Indexes().List(ctx)
	if err != nil {
		return fmt.Errorf("list indexes: %w", err)
	}
	var specs []struct {
		Name   string `bson:"name"`
		Key    bson.D `bson:"key"`
		Unique bool   `bson:"unique"`
	}
	if err := cur.All(ctx, &specs); err != nil {
		return fmt.Errorf("list indexes: %w", err)
	}
	for _, spec := range specs {
		if spec.Name == "_id_" {
			continue
		}
		if _, err := to.Indexes().CreateOne(ctx, mongo.IndexModel{
			Keys: spec.Key, Options: options.Index().SetName(spec.Name).SetUnique(spec.Unique),
		}); err != nil {
			return fmt.Errorf("raw index %s: %w", spec.Name, err)
		}
	}
	return nil
}

// rawUpserts writes the same leaf documents the ingest path writes (same fields, into a
// collection with the same indexes), with plain unordered driver bulk writes of 1,000 from as many
// goroutines as the bulk writer has workers by default (bulk.DefaultWorkers()), in key order.
// The filter is the key and version < v, or with guarded exactly rollup's (store.LeafFilter).
func rawUpserts(ctx context.Context, coll *mongo.Collection, leaves []agentsim.Leaf, tick, observed time.Time, guarded bool) error {
	ts := bson.NewDateTimeFromTime(tick)
	version := observed.UnixNano()
	p := pool.New().WithErrors().WithContext(ctx).WithMaxGoroutines(bulk.DefaultWorkers())
	for lo := 0; lo < len(leaves); lo += bulk.DefaultMaxBatch {
		hi := min(lo+bulk.DefaultMaxBatch, len(leaves))
		p.Go(func(ctx context.Context) error {
			models := make([]mongo.WriteModel, 0, hi-lo)
			submissionID := "raw-" + strconv.FormatInt(tick.Unix(), 10) + "-" + strconv.Itoa(lo)
			for i := lo; i < hi; i++ {
				filter := bson.D{{Key: "id", Value: leaves[i].ID}, {Key: "type", Value: leaves[i].Type}, {Key: "timestamp", Value: ts},
					{Key: "version", Value: bson.D{{Key: "$lt", Value: version}}}}
				if guarded {
					filter = store.LeafFilter(store.LeafWrite{ID: leaves[i].ID, Type: leaves[i].Type, Tick: tick, Project: "bench", Version: version})
				}
				models = append(models, mongo.NewUpdateOneModel().
					SetFilter(filter).
					SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "online", Value: agentsim.Online(7, i, observed)}, {Key: "version", Value: version},
						{Key: "project", Value: "bench"}, {Key: "submission_id", Value: submissionID}, {Key: "written_at", Value: bson.NewDateTimeFromTime(time.Now())}}}}).
					SetUpsert(true))
			}
			if _, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
				return fmt.Errorf("raw bulk write: %w", err)
			}
			return nil
		})
	}
	return p.Wait()
}

// writeHeapProfile writes the allocation profile (alloc_space shows what the run allocated).
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("memory profile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("memory profile: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("memory profile: %w", err)
	}
	return nil
}

// hostOf returns the host:port of a single-host MongoDB URI.
func hostOf(uri string) (string, error) {
	opts := options.Client().ApplyURI(uri)
	if len(opts.Hosts) != 1 {
		return "", fmt.Errorf("the benchmark proxies exactly one host, the URI has %d", len(opts.Hosts))
	}
	return opts.Hosts[0], nil
}
