package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/conc/pool"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/gameops/rollup/agentsim"
	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/embedded/blackpipe"
	"github.com/gameops/rollup/embedded/storage"
	"github.com/gameops/rollup/internal/app"
	"github.com/gameops/rollup/internal/mongoconn"
	"github.com/gameops/rollup/metrics"
	"github.com/gameops/rollup/metrics/totals"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/retention"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// The scale benchmark (`rollup-bench scale`) runs rollup as it is deployed — `rollup mongod`
// (or a given MongoDB), the trees imported as `rollup tree import` imports them, tokens, and
// one or more `rollup serve` processes — and plays every agent of one or many projects
// against serve's HTTP API, tick after tick. Per tick it measures ingest (first request sent →
// last answer checked), the time from each project's last acknowledged leaf to its root being
// correct, the store commands serve sent (through a counting black-pipe proxy between serve
// and the store), and the CPU time and resident memory of serve and of the store (from
// /proc). It drives the system only through its public entry points (the commands' code
// paths, the HTTP API, the driver), so it measures whatever serve's internals become.

// ScaleConfig is the shape of the scale benchmark.
type ScaleConfig struct {
	Projects int
	// Groups, Servers and Processes shape each project's tree: Groups groups under the root,
	// Servers servers per group, Processes processes (the leaves) per server. One agent per
	// server submits its processes in one request.
	Groups, Servers, Processes int
	// Ticks are measured after one warm-up tick (which loads the trees into serve).
	Ticks int
	// Instances lists the phases of the run: each phase starts that many serve processes
	// sharing the store, runs a warm-up tick and Ticks measured ticks, and stops them; agents
	// are split evenly between a phase's instances (request i goes to instance i mod n).
	// Several phases ("1,2,1,2") compare instance counts in one run, on the same store and
	// trees, interleaved.
	Instances []int
	// Partitions splits the watcher's projects by hash (--watcher-partitions hash:N); each
	// instance leads at most ceil(Partitions/n) of them (--max-partitions). 0: one partition.
	Partitions int
	// InProcess runs the store and serve (app.Serve, as `rollup serve` calls it) inside this
	// process instead of as subprocesses: CPU and memory are then not theirs alone, but a
	// profile of this process (--cpuprofile) covers them.
	InProcess bool
	// URI is a MongoDB to run against instead of a fresh `rollup mongod --memory`.
	URI string
	// Launch runs `rollup args...` (required unless InProcess).
	Launch Launcher
	// Dir receives the children's logs (default: a temporary directory, kept on failure).
	Dir string
	// ServeLogLevel is serve's --log-level (default warn): debug shows the watcher's
	// "burst written" lines in Dir's serve logs. In-process, serve logs to Dir/serve-P-I.log.
	ServeLogLevel string
	// BulkWorkers and RecomputeWorkers are serve's --bulk-workers and --recompute-workers
	// (0: serve's defaults).
	BulkWorkers, RecomputeWorkers int
	// Poll is the interval of the root reads (default 5ms): the resolution of the freshness.
	Poll time.Duration
	// RootWait bounds the wait for the roots of a tick (default 5 minutes).
	RootWait time.Duration
	// Shuffle sends the agents' requests in a seeded random order (agents report in no
	// particular order); false sends them project by project, server by server.
	Shuffle bool
	// CPUProfile receives a CPU profile of this process from the first measured tick's
	// start to the last tick's roots (the warm-up excluded); MemProfile an allocation and
	// heap profile after the last tick ("": none).
	CPUProfile, MemProfile string
	// MutexProfile and BlockProfile receive Go's mutex contention and blocking profiles
	// of this process (with InProcess: of serve and the store too), sampled from the first
	// measured tick's start and written after the last tick ("": none). They find the
	// serial parts: the locks every core waits on.
	MutexProfile, BlockProfile string
	// CPUs pins the store and each serve instance to CPU sets (--cpus; through taskset):
	// empty, nothing is pinned. Not with InProcess; no store set with URI.
	CPUs CPUSets
}

// Defaults of ScaleConfig.
const (
	DefaultScalePoll     = 5 * time.Millisecond
	DefaultScaleRootWait = 5 * time.Minute
	DefaultServeLogLevel = "warn"
	// scaleServersPerGroup is the group size ScaleShape picks.
	scaleServersPerGroup = 50
	// scaleProcesses is the processes per server (leaves per agent request) ScaleShape picks.
	scaleProcesses = 100
	scaleSeed      = 7
)

// ScaleShape returns the tree shape of a project of leaves leaves: 100 processes per server
// (fewer in a project of fewer than 100 leaves), servers in groups of 50 (fewer when the
// servers do not divide so): 10,000 leaves are 2 groups × 50 servers × 100 processes,
// 1,000,000 are 200 × 50 × 100.
func ScaleShape(leaves int) (groups, servers, processes int, err error) {
	switch {
	case leaves < 1:
		return 0, 0, 0, errors.New("--leaves must be positive")
	case leaves <= scaleProcesses:
		return 1, 1, leaves, nil
	case leaves%scaleProcesses != 0:
		return 0, 0, 0, fmt.Errorf("--leaves (%d) must be at most %d or a multiple of %d (processes per server)", leaves, scaleProcesses, scaleProcesses)
	}
	total := leaves / scaleProcesses
	groups = (total + scaleServersPerGroup - 1) / scaleServersPerGroup
	for total%groups != 0 {
		groups++
	}
	return groups, total / groups, scaleProcesses, nil
}

// Validate checks the shape.
func (c ScaleConfig) Validate() error {
	switch {
	case c.Projects < 1 || c.Groups < 1 || c.Servers < 1 || c.Processes < 1:
		return errors.New("--projects, --groups, --servers and --processes must be positive")
	case c.Projects > 100_000:
		return errors.New("--projects must be at most 100000")
	case c.Ticks < 1:
		return errors.New("--ticks must be positive")
	case len(c.Instances) == 0 || len(c.Instances) > 8:
		return errors.New("--instances must list 1 to 8 phases")
	case slices.ContainsFunc(c.Instances, func(n int) bool { return n < 1 || n > 16 }):
		return errors.New("--instances must be 1 to 16 serve processes per phase")
	case c.Partitions < 0 || c.Partitions > 64:
		return errors.New("--partitions must be 0 to 64")
	case !c.InProcess && c.Launch == nil:
		return errors.New("the scale benchmark needs a launcher for its subprocesses")
	case c.InProcess && !c.CPUs.Empty():
		return errors.New("--cpus pins the store and serve subprocesses: not with --inprocess (run the whole command under taskset -c instead)")
	case c.BulkWorkers < 0 || c.BulkWorkers > app.MaxWorkers:
		return fmt.Errorf("--bulk-workers must be 0 (serve's default) to %d", app.MaxWorkers)
	case c.RecomputeWorkers < 0 || c.RecomputeWorkers > app.MaxWorkers:
		return fmt.Errorf("--recompute-workers must be 0 (serve's default) to %d", app.MaxWorkers)
	case c.URI != "" && c.CPUs.Store != "":
		return errors.New("--cpus store=: the store is --mongodb-uri's, not started by the benchmark: pin serve only")
	}
	if c.ServeLogLevel != "" {
		if _, err := zapcore.ParseLevel(c.ServeLogLevel); err != nil {
			return fmt.Errorf("--serve-log-level: want debug, info, warn or error, got %q", c.ServeLogLevel)
		}
	}
	return nil
}

// Leaves returns the leaves of one project.
func (c ScaleConfig) Leaves() int { return c.Groups * c.Servers * c.Processes }

// oplogMB is the embedded store's retained oplog for the run, in MiB: about 1 KiB per leaf
// of a tick (a leaf's entry and its share of the parents' take about half of that), so the
// oplog holds two ticks and a watcher that falls a tick behind (a lease lost under load)
// resumes its stream instead of replaying the window from the leaves, as an operator sizes
// a MongoDB oplog for the longest lag (docs/capacity.md); never below the default.
func (c ScaleConfig) oplogMB() int {
	return max(embedded.DefaultOplogSizeMB, c.Leaves()*max(c.Projects, 1)>>10)
}

// scaleProject is one project of the benchmark: its tree, token, leaves and agents.
type scaleProject struct {
	name   string
	token  string
	tree   *tree.Tree
	leaves []agentsim.Leaf // in tree order; agent k owns leaves[k*P : (k+1)*P]
	first  int             // global index of leaves[0] (for agentsim.Online)
}

// scaleNodes returns a project's tree: root (the project), groups, servers, processes. Ids
// carry the project when prefix is set (node ids are unique per deployment).
func scaleNodes(project, prefix string, groups, servers, processes int) []tree.Node {
	nodes := make([]tree.Node, 0, 1+groups*(1+servers*(1+processes)))
	nodes = append(nodes, tree.Node{ID: project, Type: tree.TypeProject})
	gw, sw, pw := len(strconv.Itoa(groups)), len(strconv.Itoa(servers)), len(strconv.Itoa(processes))
	for g := 1; g <= groups; g++ {
		gid := fmt.Sprintf("%sg%0*d", prefix, gw, g)
		nodes = append(nodes, tree.Node{ID: gid, Type: tree.TypeGroup, Parent: project})
		for s := 1; s <= servers; s++ {
			sid := fmt.Sprintf("%s-s%0*d", gid, sw, s)
			nodes = append(nodes, tree.Node{ID: sid, Type: tree.TypeServer, Parent: gid})
			for p := 1; p <= processes; p++ {
				nodes = append(nodes, tree.Node{ID: fmt.Sprintf("%s-p%0*d", sid, pw, p), Type: tree.TypeProcess, Parent: sid})
			}
		}
	}
	return nodes
}

// scaleTick is one tick's measurements.
type scaleTick struct {
	warm     bool
	leaves   int
	ingest   time.Duration   // first request sent → last answer checked (resends included)
	resends  sendStats       // requests the agents sent again, and their waits
	settled  time.Duration   // first request sent → every root correct
	fresh    []time.Duration // per project: its last answer checked → its root correct
	notFresh int             // projects whose root was not correct within RootWait
	stats    blackpipe.Stats // serve's store commands from the tick's start until every root was correct
	serveCPU time.Duration   // every serve instance (0 in-process)
	storeCPU time.Duration   // the store (0 in-process or external)
	selfCPU  time.Duration   // this process: load generator, proxy, root reads (and, in-process, everything)
	serveRSS int64           // sum over instances after the tick
	metrics  map[string]float64
	checked  *parentCheck // the last tick's full check of every parent
	timeline tickTimeline // last leaf write -> parent writes by level (stored written_at)
}

// parentCheck is the comparison of every parent document of a tick with its leaves.
type parentCheck struct {
	parents, wrong, missing int
}

// ScaleResult is the scale benchmark's measurement.
type ScaleResult struct {
	cfg       ScaleConfig
	storeDesc string
	imports   []time.Duration // per project
	nodes     int             // per project
	treeBytes int64           // heap of one project's tree as treedb loads it
	idleCmds  blackpipe.Stats // commands of 2 s without load (background)
	idle      time.Duration
	phases    []scalePhase
	storePeak int64
	logDir    string
}

// scalePhase is one phase's measurements: its serve instances and their ticks.
type scalePhase struct {
	instances  int
	ticks      []scaleTick
	serveStart int64 // serve RSS once ready (sum over instances)
	servePeak  int64 // sum over instances of VmHWM
}

// scaleMetricNames are the serve metrics read after every tick.
var scaleMetricNames = []string{
	"rollup_watcher_parent_writes_total", "rollup_watcher_events_total", "rollup_watcher_batches_total",
	"rollup_watcher_conflicts_total", "rollup_watcher_history_lost_replays_total", "rollup_watcher_orphans_total",
	"rollup_bulk_batches_total", "go_memstats_heap_inuse_bytes",
}

// serveInstance is one running serve.
type serveInstance struct {
	api  string // base URL
	proc *child // nil in-process
	gen  *loadGen
	// done is closed when the instance has ended (a subprocess exited, app.Serve returned);
	// exited then says how.
	done   <-chan struct{}
	exited func() error
}

// Scale runs the scale benchmark, printing progress lines on progress (nil: none).
func Scale(ctx context.Context, cfg ScaleConfig, progress io.Writer) (ScaleResult, error) {
	if progress == nil {
		progress = io.Discard
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultScalePoll
	}
	if cfg.RootWait <= 0 {
		cfg.RootWait = DefaultScaleRootWait
	}
	if cfg.ServeLogLevel == "" {
		cfg.ServeLogLevel = DefaultServeLogLevel
	}
	res := ScaleResult{cfg: cfg}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "rollup-bench-scale-*")
		if err != nil {
			return res, fmt.Errorf("log dir: %w", err)
		}
		dir = d
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("log dir: %w", err)
	}
	res.logDir = dir
	r := &scaleRun{cfg: cfg, progress: progress, dir: dir, res: &res, http: &http.Client{Timeout: 30 * time.Second}}
	err := r.run(ctx)
	if err == nil && cfg.Dir == "" {
		_ = os.RemoveAll(dir)
		res.logDir = ""
	}
	return res, err
}

// scaleRun is one run's state.
type scaleRun struct {
	cfg      ScaleConfig
	progress io.Writer
	dir      string
	res      *ScaleResult
	http     *http.Client

	store    *child // nil when in-process or external
	proxy    *blackpipe.Proxy
	direct   *mongo.Client // to the store, not through the proxy: the harness's own reads
	db       *mongo.Database
	dbName   string
	projects []*scaleProject
	serves   []*serveInstance
	// taskset is the taskset program's path when --cpus pins anything.
	taskset string
	// profiling is the CPU profile's file while it runs.
	profiling *os.File
	// contention is set once the mutex and block profiles sample (the first measured tick).
	contention bool
}

func (r *scaleRun) logf(format string, args ...any) {
	_, _ = fmt.Fprintf(r.progress, format+"\n", args...)
}

func (r *scaleRun) run(ctx context.Context) error {
	log := zap.NewNop()
	// Everything runs under one pool; cleanup runs in reverse order of start.
	var cleanups []func()
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}()
	pctx, stopAll := context.WithCancel(ctx)
	p := pool.New().WithContext(pctx)
	cleanups = append(cleanups, func() { stopAll(); _ = p.Wait() })
	cleanups = append(cleanups, func() {
		if r.profiling != nil {
			pprof.StopCPUProfile()
			_ = r.profiling.Close()
		}
		if r.contention { // a run that failed: stop sampling, write nothing
			runtime.SetMutexProfileFraction(0)
			runtime.SetBlockProfileRate(0)
		}
	})

	if !r.cfg.CPUs.Empty() {
		ts, err := exec.LookPath("taskset")
		if err != nil {
			return fmt.Errorf("--cpus needs taskset (util-linux) on the PATH: %w", err)
		}
		r.taskset = ts
	}

	uri, err := r.startStore(ctx, log, &cleanups)
	if err != nil {
		return err
	}
	if err := r.connect(ctx, uri, log, &cleanups); err != nil {
		return err
	}

	// What an operator does before starting serve: migrate, import the trees, create tokens.
	if _, err := migrations.New(r.db, log).Up(ctx, migrations.UpOptions{}); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	now := time.Now().UTC()
	perPhase := r.cfg.Ticks + 1
	first := tree.AlignTick(now, tree.DefaultTick).Add(-time.Duration(len(r.cfg.Instances)*perPhase+1) * tree.DefaultTick)
	if err := r.importTrees(ctx, first); err != nil {
		return err
	}
	if r.cfg.MemProfile != "" {
		runtime.MemProfileRate = 64 << 10
	}
	for pi, n := range r.cfg.Instances {
		if err := r.runPhase(ctx, p, pi, n, first, &cleanups); err != nil {
			return err
		}
	}
	return r.finish()
}

// startStore starts the store of the run (an embedded server in this process with
// --inprocess, else a `rollup mongod --memory` subprocess; nothing with --mongodb-uri),
// adds what stops it to cleanups and returns its URI.
func (r *scaleRun) startStore(ctx context.Context, log *zap.Logger, cleanups *[]func()) (string, error) {
	uri := r.cfg.URI
	switch {
	case uri != "":
		r.res.storeDesc = "external MongoDB"
	case r.cfg.InProcess:
		srv, err := embedded.New(embedded.Config{Listen: "127.0.0.1:0", Logger: log,
			Storage: storage.Options{OplogMaxBytes: int64(r.cfg.oplogMB()) << 20}})
		if err != nil {
			return "", fmt.Errorf("start embedded server: %w", err)
		}
		sctx, stopStore := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() { _ = srv.Run(sctx); close(done) }()
		*cleanups = append(*cleanups, func() { stopStore(); <-done })
		uri = srv.URI()
		r.res.storeDesc = "embedded server in this process (memory)"
	default:
		c, line, err := startChild(ctx, pinned(r.cfg.Launch, r.taskset, r.cfg.CPUs.Store), r.dir, "mongod", "mongodb://", "mongod", "--listen", "127.0.0.1:0", "--memory", "--log-level", "warn",
			"--oplog-size-mb", strconv.Itoa(r.cfg.oplogMB()))
		if err != nil {
			return "", err
		}
		r.store = c
		*cleanups = append(*cleanups, c.stop)
		uri = "mongodb://" + line
		r.res.storeDesc = fmt.Sprintf("rollup mongod --memory --oplog-size-mb %d (pid %d)", r.cfg.oplogMB(), c.pid())
		if r.cfg.CPUs.Store != "" {
			r.res.storeDesc += " on CPUs " + r.cfg.CPUs.Store
		}
	}
	return uri, nil
}

// connect puts the counting black-pipe proxy in front of the store at uri, connects the
// harness's own client to the store directly and names the run's database; cleanups get what
// stops the proxy, disconnects and drops the database.
func (r *scaleRun) connect(ctx context.Context, uri string, log *zap.Logger, cleanups *[]func()) error {
	target, err := hostOf(uri)
	if err != nil {
		return err
	}
	r.proxy = blackpipe.New(target, log)
	r.proxy.CountOnly() // its counters are all we read: no body copies in this process
	if err := r.proxy.Listen("127.0.0.1:0"); err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	proxyCtx, stopProxy := context.WithCancel(context.WithoutCancel(ctx))
	proxyDone := make(chan struct{})
	go func() { _ = r.proxy.Run(proxyCtx); close(proxyDone) }()
	*cleanups = append(*cleanups, func() { stopProxy(); <-proxyDone })

	r.direct, err = mongo.Connect(options.Client().ApplyURI(uri).SetDirect(true).SetAppName("bench-harness"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	*cleanups = append(*cleanups, func() { _ = r.direct.Disconnect(context.Background()) })
	r.dbName = fmt.Sprintf("rollup_scale_%d", time.Now().UnixNano())
	r.db = mongoconn.Database(r.direct, r.dbName)
	*cleanups = append(*cleanups, func() {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = r.db.Drop(dctx)
	})
	return nil
}

// runPhase runs phase pi: n serve instances started, the idle store commands measured before
// the first phase, then a warm-up tick and the measured ticks (each phase's ticks follow the
// previous phase's, from first), and
// the phase's result appended; the instances are stopped after it.
func (r *scaleRun) runPhase(ctx context.Context, p *pool.ContextPool, pi, n int, first time.Time, cleanups *[]func()) error {
	perPhase := r.cfg.Ticks + 1
	ph := scalePhase{instances: n}
	stopServes, err := r.startServes(ctx, p, n, pi, &ph, cleanups)
	if err != nil {
		return err
	}
	if pi == 0 {
		if err := r.measureIdle(ctx); err != nil {
			return err
		}
	}
	if len(r.cfg.Instances) > 1 {
		r.logf("phase %d: %d serve instance(s)", pi+1, n)
	}
	for i := range perPhase {
		tick := first.Add(time.Duration(pi*perPhase+i) * tree.DefaultTick)
		t, err := r.runTick(ctx, tick, i == 0, i == r.cfg.Ticks, pi == len(r.cfg.Instances)-1)
		if err != nil {
			return fmt.Errorf("phase %d, tick %d: %w", pi+1, i, err)
		}
		ph.ticks = append(ph.ticks, t)
		r.printTickProgress(i, t)
	}
	for _, s := range r.serves {
		if s.proc != nil {
			_, peak := procMem(s.proc.pid())
			ph.servePeak += peak
		}
	}
	r.res.phases = append(r.res.phases, ph)
	stopServes()
	return nil
}

// finish writes the heap and contention profiles asked for and reads the store's peak RSS.
func (r *scaleRun) finish() error {
	if r.cfg.MemProfile != "" {
		if err := writeHeapProfile(r.cfg.MemProfile); err != nil {
			return err
		}
	}
	if err := r.writeContentionProfiles(); err != nil {
		return err
	}
	if r.store != nil {
		_, r.res.storePeak = procMem(r.store.pid())
	}
	return nil
}

// importTrees imports every project's tree effective from the tick at effective, through
// treedb as `rollup tree import` does, creates each project's ingest token, and measures how
// much heap one project's tree takes once loaded as serve loads it.
func (r *scaleRun) importTrees(ctx context.Context, effective time.Time) error {
	trees := treedb.New(r.db)
	multi := r.cfg.Projects > 1
	pw := len(strconv.Itoa(r.cfg.Projects))
	leavesPer := r.cfg.Leaves()
	started := time.Now()
	for i := range r.cfg.Projects {
		name, prefix := "bench", ""
		if multi {
			name = fmt.Sprintf("p%0*d", pw, i+1)
			prefix = name + "-"
		}
		nodes := scaleNodes(name, prefix, r.cfg.Groups, r.cfg.Servers, r.cfg.Processes)
		t0 := time.Now()
		if _, err := trees.Import(ctx, name, nodes, effective); err != nil {
			return fmt.Errorf("import tree of %s: %w", name, err)
		}
		r.res.imports = append(r.res.imports, time.Since(t0))
		t, err := tree.Build(name, nodes)
		if err != nil {
			return fmt.Errorf("tree of %s: %w", name, err)
		}
		token, err := api.CreateToken(ctx, r.db, name, "bench")
		if err != nil {
			return fmt.Errorf("token of %s: %w", name, err)
		}
		r.projects = append(r.projects, &scaleProject{name: name, token: token, tree: t, leaves: agentsim.LeavesOf(t), first: i * leavesPer})
		r.res.nodes = len(nodes)
		if (i+1)%100 == 0 || i+1 == r.cfg.Projects && r.cfg.Projects > 1 {
			r.logf("imported %d/%d trees (%s; the last took %s)", i+1, r.cfg.Projects, time.Since(started).Round(time.Millisecond), r.res.imports[i].Round(time.Millisecond))
		}
	}
	if r.cfg.Projects == 1 {
		r.logf("imported the tree: %d nodes in %s", r.res.nodes, r.res.imports[0].Round(time.Millisecond))
	}
	// The heap of a tree as serve holds it: loaded by a fresh treedb.Store (strings decoded
	// from BSON, not shared with our nodes).
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	loaded, err := treedb.New(r.db).Load(ctx, r.projects[0].name, 1)
	if err != nil {
		return fmt.Errorf("load tree: %w", err)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(loaded)
	r.res.treeBytes = int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
	return nil
}

// startServes starts phase's n serve instances and waits until each is ready (/readyz 200:
// its watcher partitions are led); stop stops them (a graceful shutdown, which releases their
// leases for the next phase's instances).
func (r *scaleRun) startServes(ctx context.Context, p *pool.ContextPool, n, phase int, ph *scalePhase, cleanups *[]func()) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		stops = nil
		r.serves = nil
	}
	*cleanups = append(*cleanups, stop)
	defer func() {
		if err != nil {
			stop()
		}
	}()
	sp := serveParams{proxyURI: "mongodb://" + r.proxy.Addr() + "/?directConnection=true"}
	if r.cfg.Partitions > 1 {
		sp.parts = fmt.Sprintf("hash:%d", r.cfg.Partitions)
		sp.perInstance = (r.cfg.Partitions + n - 1) / n
	}
	for i := range n {
		var s serveInstance
		var stopOne func()
		var err error
		if r.cfg.InProcess {
			s, stopOne, err = r.startServeInProcess(ctx, p, phase, i, sp)
		} else {
			s, stopOne, err = r.startServeChild(ctx, phase, i, sp)
		}
		if stopOne != nil {
			stops = append(stops, stopOne)
		}
		if err != nil {
			return stop, err
		}
		if err := waitReady(ctx, r.http, s.api+"/readyz", 2*time.Minute); err != nil {
			return stop, fmt.Errorf("serve %d: %w", i+1, err)
		}
		if s.proc != nil {
			rss, _ := procMem(s.proc.pid())
			ph.serveStart += rss
		}
		addr := strings.TrimPrefix(s.api, "http://")
		s.gen = newLoadGen(addr, "", "", nil, 0, max(1, benchConns/n), scaleSeed)
		stops = append(stops, s.gen.Close)
		r.serves = append(r.serves, &s)
	}
	// Every instance's readiness: with several, the first may have been ready before the
	// others took their share of the partitions.
	for i, s := range r.serves {
		if err := waitReady(ctx, r.http, s.api+"/readyz", 2*time.Minute); err != nil {
			return stop, fmt.Errorf("serve %d: %w", i+1, err)
		}
	}
	return stop, nil
}

// serveParams is what every serve instance of a phase is started with: the store through the
// counting proxy, and the watcher partitions (parts "" and perInstance 0: one).
type serveParams struct {
	proxyURI    string
	parts       string
	perInstance int
}

// serveID is the instance id of serve i (from 0) of phase (from 0).
func serveID(phase, i int) string {
	return fmt.Sprintf("bench-%d-%d", phase+1, i+1)
}

// startServeInProcess runs serve i of phase inside this process (app.Serve, as `rollup serve`
// calls it, its log in the log directory) and returns it once it listens, with what stops it
// (non-nil once it runs, also with an error).
func (r *scaleRun) startServeInProcess(ctx context.Context, p *pool.ContextPool, phase, i int, sp serveParams) (serveInstance, func(), error) {
	var s serveInstance
	cfg := app.Config{
		MongoURI: sp.proxyURI, Database: r.dbName, Listen: "127.0.0.1:0", LogLevel: r.cfg.ServeLogLevel,
		Partitions: sp.parts, MaxPartitions: sp.perInstance, InstanceID: serveID(phase, i), LeaseTTL: 10 * time.Second,
		BulkWorkers: r.cfg.BulkWorkers, RecomputeWorkers: r.cfg.RecomputeWorkers,
		DemoAgents: 1, Totals: app.Totals{Grace: totals.DefaultGrace, Refresh: totals.DefaultInterval,
			MaxProjects: totals.DefaultMaxProjects, MaxGroups: totals.DefaultMaxGroups},
		// Nothing to expire in a benchmark's fresh ticks: no enforcer.
		Retention: app.Retention{Interval: retention.DefaultInterval, Batch: retention.DefaultBatch, Rate: retention.DefaultRate},
	}
	if err := cfg.Validate(); err != nil {
		return s, nil, fmt.Errorf("serve config: %w", err)
	}
	urls := make(chan string, 1)
	out := &lineWriter{line: func(l string) {
		if u, ok := strings.CutPrefix(l, "rollup API: "); ok {
			select {
			case urls <- strings.TrimSpace(u):
			default:
			}
		}
	}}
	// Its log, as a serve subprocess's: JSON lines in the log directory.
	logf, err := os.Create(filepath.Join(r.dir, fmt.Sprintf("serve-%d-%d.log", phase+1, i+1)))
	if err != nil {
		return s, nil, fmt.Errorf("serve log: %w", err)
	}
	slog, err := metrics.NewLogger(r.cfg.ServeLogLevel, true, logf)
	if err != nil {
		_ = logf.Close()
		return s, nil, fmt.Errorf("serve log: %w", err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	var serveErr error
	p.Go(func(context.Context) error {
		defer close(done)
		serveErr = app.Serve(sctx, cfg, slog, out)
		return serveErr
	})
	s.done = done
	s.exited = func() error {
		if serveErr == nil {
			return fmt.Errorf("serve %d ended during the benchmark", i+1)
		}
		return fmt.Errorf("serve %d ended during the benchmark: %w", i+1, serveErr)
	}
	stop := func() { cancel(); <-done; _ = slog.Sync(); _ = logf.Close() }
	select {
	case s.api = <-urls:
	case <-done:
		return s, stop, errors.New("serve ended before it listened")
	case <-time.After(60 * time.Second):
		return s, stop, errors.New("serve did not listen within 60s")
	}
	return s, stop, nil
}

// startServeChild runs serve i of phase as a `rollup serve` subprocess (pinned to its CPUs,
// if any) and returns it once it listens, with what stops it.
func (r *scaleRun) startServeChild(ctx context.Context, phase, i int, sp serveParams) (serveInstance, func(), error) {
	args := []string{"serve", "--mongodb-uri", sp.proxyURI, "--database", r.dbName, "--listen", "127.0.0.1:0",
		"--log-level", r.cfg.ServeLogLevel, "--instance-id", serveID(phase, i),
		"--token-rps", "0", "--token-leaves-per-s", "0", // one token sends every agent's counts
		"--bulk-workers", strconv.Itoa(r.cfg.BulkWorkers), "--recompute-workers", strconv.Itoa(r.cfg.RecomputeWorkers)}
	if sp.parts != "" {
		args = append(args, "--watcher-partitions", sp.parts, "--max-partitions", strconv.Itoa(sp.perInstance))
	}
	launch := pinned(r.cfg.Launch, r.taskset, r.cfg.CPUs.ServeFor(i))
	c, line, err := startChild(ctx, launch, r.dir, fmt.Sprintf("serve-%d-%d", phase+1, i+1), "rollup API: ", args...)
	if err != nil {
		return serveInstance{}, nil, err
	}
	s := serveInstance{proc: c, api: strings.TrimSpace(line), done: c.done, exited: c.exited}
	return s, c.stop, nil
}

// lineWriter calls line with every complete line written to it.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	line func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

// measureIdle counts serve's store commands during 2 s without load: the background (lease
// renewals, heartbeats, the tree directory's refresh, the driver's monitoring).
func (r *scaleRun) measureIdle(ctx context.Context) error {
	const idle = 2 * time.Second
	r.proxy.ResetStats()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(idle):
	}
	r.res.idleCmds, r.res.idle = r.proxy.Stats(), idle
	return nil
}

// scaleReq is one agent's prepared request.
type scaleReq struct {
	project int
	want    int64 // the sum of its counts
}

// tickLoad is one tick's agent requests, prepared (the agents' own work, on their machines)
// before the measured window and split between the serve instances.
type tickLoad struct {
	shares    [][]agentRequest // by instance
	shareMeta [][]scaleReq     // by instance, as shares
	want      []int64          // by project: the sum of its leaves
	remaining []atomic.Int64   // by project: its requests not yet answered
	leaves    int
}

// runTick submits every agent's counts of tick, waits for every root to be correct and
// measures. The last tick also checks every parent.
func (r *scaleRun) runTick(ctx context.Context, tick time.Time, warm, last, lastPhase bool) (scaleTick, error) {
	t := scaleTick{warm: warm}
	observed := time.Now().UTC()
	load, err := r.prepareTick(tick, observed)
	if err != nil {
		return t, err
	}
	t.leaves = load.leaves
	poller := newRootPoller(r.direct.Database(r.dbName).Collection(store.CountsCollection), r.projects, tick, load.want, int64(r.cfg.Leaves()), r.cfg.Poll)
	acked := r.trackAcks(load, poller)
	before, err := r.sample(ctx)
	if err != nil {
		return t, err
	}
	runtime.GC()
	if !warm {
		if err := r.startProfiles(); err != nil {
			return t, err
		}
	}
	r.proxy.ResetStats()
	cpu0 := r.cpu()
	start := time.Now()
	pctx, cancelPoll := context.WithCancel(ctx)
	defer cancelPoll()
	pollDone := make(chan error, 1)
	go func() { pollDone <- poller.run(pctx, start.Add(r.cfg.RootWait)) }()
	sent, err := r.sendTick(ctx, load.shares)
	t.ingest = time.Since(start)
	for _, st := range sent {
		t.resends.add(st)
	}
	if err != nil {
		return t, err
	}
	if err := <-pollDone; err != nil {
		return t, err
	}
	t.settled = poller.lastCorrect.Sub(start)
	t.stats = r.proxy.Stats()
	cpu1 := r.cpu()
	if last && lastPhase {
		if err := r.stopCPUProfile(); err != nil {
			return t, err
		}
	}
	t.serveCPU, t.storeCPU, t.selfCPU = cpu1.serve-cpu0.serve, cpu1.store-cpu0.store, cpu1.self-cpu0.self
	for pi := range r.projects {
		if c, ok := poller.correctAt[pi]; ok {
			t.fresh = append(t.fresh, max(0, c.Sub(time.Unix(0, acked[pi].Load()))))
		} else {
			t.notFresh++
		}
	}
	after, err := r.sampleCounted(ctx, before, t.leaves)
	if err != nil {
		return t, err
	}
	t.metrics = map[string]float64{}
	for k, v := range after.metrics {
		t.metrics[k] = v - before.metrics[k]
	}
	t.metrics["go_memstats_heap_inuse_bytes"] = after.metrics["go_memstats_heap_inuse_bytes"]
	t.serveRSS = after.rss
	return t, r.checkTick(ctx, &t, tick, observed, last)
}

// prepareTick encodes every agent's request of tick (one per server, its processes' counts
// observed at observed), in a seeded random order with --shuffle, split between the serve
// instances in turn.
func (r *scaleRun) prepareTick(tick, observed time.Time) (tickLoad, error) {
	load := tickLoad{want: make([]int64, len(r.projects)), remaining: make([]atomic.Int64, len(r.projects))}
	var reqs []agentRequest
	var meta []scaleReq
	for pi, pr := range r.projects {
		per := r.cfg.Processes
		for k := 0; k*per < len(pr.leaves); k++ {
			counts := make([]agentclient.Count, 0, per)
			sum := int64(0)
			for j := k * per; j < (k+1)*per; j++ {
				v := agentsim.Online(scaleSeed, pr.first+j, observed)
				counts = append(counts, agentclient.Count{ID: pr.leaves[j].ID, Type: pr.leaves[j].Type, Online: v})
				sum += v
			}
			id := fmt.Sprintf("scale-%d-%s-%d", tick.Unix(), pr.name, k)
			req, err := newAgentRequest(pr.token, pr.name, id, tick, observed, counts)
			if err != nil {
				return load, err
			}
			req.agent = len(reqs)
			reqs = append(reqs, req)
			meta = append(meta, scaleReq{project: pi, want: sum})
			load.want[pi] += sum
			load.remaining[pi].Add(1)
			load.leaves += len(counts)
		}
	}
	if r.cfg.Shuffle {
		rng := rand.New(rand.NewPCG(scaleSeed, uint64(tick.Unix())))
		rng.Shuffle(len(reqs), func(i, j int) {
			reqs[i], reqs[j] = reqs[j], reqs[i]
			meta[i], meta[j] = meta[j], meta[i]
		})
	}
	load.shares = make([][]agentRequest, len(r.serves))
	load.shareMeta = make([][]scaleReq, len(r.serves))
	for i := range reqs {
		k := i % len(r.serves)
		load.shares[k] = append(load.shares[k], reqs[i])
		load.shareMeta[k] = append(load.shareMeta[k], meta[i])
	}
	return load, nil
}

// trackAcks makes every instance's load generator record, by project, the time of its last
// answer (unix ns, returned), and tell poller when a project's last request was answered.
func (r *scaleRun) trackAcks(load tickLoad, poller *rootPoller) []atomic.Int64 {
	acked := make([]atomic.Int64, len(r.projects))
	for k, s := range r.serves {
		sm := load.shareMeta[k]
		s.gen.onAck = func(i int) {
			pi := sm[i].project
			now := time.Now().UnixNano()
			for {
				old := acked[pi].Load()
				if now <= old || acked[pi].CompareAndSwap(old, now) {
					break
				}
			}
			if load.remaining[pi].Add(-1) == 0 {
				poller.complete(pi, time.Unix(0, acked[pi].Load()))
			}
		}
	}
	return acked
}

// sendTick sends every instance its share of the tick's requests, all at once, and returns
// once every one is answered. The agents resend what a busy serve refuses; a serve that ends
// ends their resends.
func (r *scaleRun) sendTick(ctx context.Context, shares [][]agentRequest) ([]sendStats, error) {
	sctx, stopSend := context.WithCancelCause(ctx)
	defer stopSend(nil)
	for _, s := range r.serves {
		go func() {
			select {
			case <-s.done:
				stopSend(s.exited())
			case <-sctx.Done():
			}
		}()
	}
	var wg sync.WaitGroup
	errs := make([]error, len(r.serves))
	sent := make([]sendStats, len(r.serves))
	for k, s := range r.serves {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent[k], errs[k] = s.gen.Send(sctx, shares[k])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return sent, fmt.Errorf("ingest: %w", err)
	}
	return sent, nil
}

// sampleCounted samples serve once the watcher has counted every one of the tick's leaves
// since before. The watcher counts a burst's events once its last parent is written, just
// after the roots became correct: it samples until every leaf of the tick is counted (or a
// few seconds passed: duplicates and orphans aside, a shortfall then shows in the table).
func (r *scaleRun) sampleCounted(ctx context.Context, before serveSample, leaves int) (serveSample, error) {
	after, err := r.sample(ctx)
	for settle := time.Now().Add(5 * time.Second); err == nil && after.metrics["rollup_watcher_events_total"]-before.metrics["rollup_watcher_events_total"] < float64(leaves) && time.Now().Before(settle); {
		pause := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			pause.Stop()
			return after, ctx.Err()
		case <-pause.C:
		}
		after, err = r.sample(ctx)
	}
	return after, err
}

// checkTick reads the tick's stored written_at timeline into t, on the last tick checks every
// parent against its leaves, and fails if a serve subprocess has exited.
func (r *scaleRun) checkTick(ctx context.Context, t *scaleTick, tick, observed time.Time, last bool) error {
	coll := r.direct.Database(r.dbName).Collection(store.CountsCollection)
	var err error
	if t.timeline, err = readTimeline(ctx, coll, r.projects, tick); err != nil {
		return err
	}
	if last {
		c, err := checkParents(ctx, coll, r.projects, tick, observed)
		if err != nil {
			return err
		}
		t.checked = &c
	}
	for _, s := range r.serves {
		if s.proc != nil {
			if err := s.proc.exited(); err != nil {
				return err
			}
		}
	}
	return nil
}

// cpuSample is the CPU time used so far by serve (all instances), the store and this process.
type cpuSample struct{ serve, store, self time.Duration }

func (r *scaleRun) cpu() cpuSample {
	var c cpuSample
	for _, s := range r.serves {
		if s.proc != nil {
			c.serve += procCPU(s.proc.pid())
		}
	}
	if r.store != nil {
		c.store = procCPU(r.store.pid())
	}
	c.self = processCPU()
	return c
}

// serveSample is serve's counters and memory at one moment (summed over instances).
type serveSample struct {
	metrics map[string]float64
	rss     int64
}

func (r *scaleRun) sample(ctx context.Context) (serveSample, error) {
	s := serveSample{metrics: map[string]float64{}}
	for _, in := range r.serves {
		m, err := scrapeMetrics(ctx, r.http, in.api+"/metrics", scaleMetricNames...)
		if err != nil {
			return s, err
		}
		for k, v := range m {
			s.metrics[k] += v
		}
		if in.proc != nil {
			rss, _ := procMem(in.proc.pid())
			s.rss += rss
		}
	}
	return s, nil
}

func (r *scaleRun) printTickProgress(i int, t scaleTick) {
	label := "tick " + strconv.Itoa(i)
	if t.warm {
		label = "warm-up tick"
	}
	p50, p99, mx := freshStats(t.fresh)
	r.logf("%s: %d leaves ingested in %s (%.0f leaves/s; %s); roots correct p50 %s p99 %s max %s after their last leaf (%d never); %d store commands; CPU s serve %.1f store %.1f; serve RSS %.0f MiB; after the last leaf write: %s",
		label, t.leaves, t.ingest.Round(time.Millisecond), float64(t.leaves)/t.ingest.Seconds(), t.resends, fmtMillis(p50), fmtMillis(p99), fmtMillis(mx),
		t.notFresh, commandCount(t.stats), t.serveCPU.Seconds(), t.storeCPU.Seconds(), float64(t.serveRSS)/(1<<20), t.timeline)
}

// freshStats returns the p50, p99 and max of ds (zero when empty).
func freshStats(ds []time.Duration) (p50, p99, mx time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	c := append([]time.Duration(nil), ds...)
	return percentileOf(c, 50), percentileOf(c, 99), c[len(c)-1]
}
