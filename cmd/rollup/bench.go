package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/internal/bench"
	"github.com/gameops/rollup/internal/settings"
)

const benchUsage = `usage: rollup bench <benchmark> [flags]

Benchmarks (package internal/bench; numbers go to docs/benchmarks.md):
  mongod        unordered bulk upserts through the official driver on a unique
                (id, type, timestamp) index, against the embedded server (or --mongodb-uri)
  changestream  events/s one change-stream consumer drains while writers upsert, and event
                latency (write acknowledged -> event received) at a fixed write rate
  ingest        end to end: simulated agents -> HTTP API -> bulk writer -> store, against raw
                driver bulk upserts of the same documents (same fields, same indexes) in the
                same run; agents are a load generator (--client loadgen) or the agent client
                package over net/http (--client agentclient)
  baselines     rollup against the original design (upsert + $inc on every ancestor) and a
                per-tick re-aggregation: leaves/s, freshness, store commands, totals under faults
  runaway       one project's agent at a steady pace while another project's agent sends
                1,000 requests/s: the first one's latency alone, with the per-token limits,
                and without them
  scale         rollup as deployed (rollup mongod, trees imported, rollup serve processes) at
                10k to 1M leaves per tick or many projects: ingest leaves/s, last leaf -> root
                correct, store commands per tick, CPU and peak RSS of serve and the store

A benchmark's --mongodb-uri is read from the command line only: an operator's
ROLLUP_MONGODB_URI never points a benchmark (which creates and drops databases) at a deployment.

Examples:
  rollup bench mongod                       # 1,000,000 upserts, in memory
  rollup bench mongod --durable             # the same with a data directory (fsync before ack)
  rollup bench mongod --n 200000 --batch 500
  rollup bench changestream --rate 10000 --duration 5s
  rollup bench ingest --agents 10000 --leaves 10 --ticks 3
  rollup bench ingest --client agentclient  # agents through api/agentclient on the same cores
  rollup bench baselines --faults
  rollup bench scale --leaves 100000 --ticks 5
  rollup bench scale --projects 1000 --leaves 1000 --instances 1,2,1,2 --partitions 4
  rollup bench runaway --duration 20s

Flags of 'rollup bench <benchmark> --help'.
`

const baselinesUsage = `usage: rollup bench baselines [flags]

Runs three designs of parent totals in the same run on the same store, each on its own database
and behind its own counting proxy, fed by the same simulated agents (each agent submits the
leaves of one parent at a time, every leaf once per tick):
  original     one upsert per leaf (no unique index) + an $inc of its delta on every ancestor,
               unordered bulks of --original-batch ops, a failed batch retried whole
  reaggregate  leaf upserts in bulks of --batch on the unique key, then per tick one $group per
               level over the tick's leaves and the parents written
  rollup       bulk.Writer + the watcher, as rollup serve runs them
Reports leaves/s, freshness (last leaf acknowledged -> root correct, p50/p99 over ticks),
store commands and bytes per tick, write ops per tick, and whether every parent total is right.
--faults arms a failCommand closeConnection on the next leaf update of each design every tick.

Examples:
  rollup bench baselines                              # 20 groups, 1,000 servers, 100,000 leaves, 3 ticks
  rollup bench baselines --faults
  rollup bench scale --leaves 100000 --ticks 5
  rollup bench scale --projects 1000 --leaves 1000 --instances 2 --partitions 4
  rollup bench baselines --ticks 1 --original-batch 1       # the original's one command per write
  rollup bench baselines --groups 2 --servers 10 --processes 10 --ticks 1 --faults

Flags:
`

func runBench(ctx context.Context, e *env, args []string) error {
	name := ""
	if len(args) > 0 {
		name = args[0]
	}
	switch name {
	case "mongod":
		return runBenchMongod(ctx, e, args[1:])
	case "changestream":
		return runBenchChangeStream(ctx, e, args[1:])
	case "ingest":
		return runBenchIngest(ctx, e, args[1:])
	case "baselines":
		return runBenchBaselines(ctx, e, args[1:])
	case "scale":
		return runBenchScale(ctx, e, args[1:])
	case "runaway":
		return runBenchRunaway(ctx, e, args[1:])
	}
	_, _ = fmt.Fprint(e.stderr, benchUsage)
	if name == "-h" || name == "--help" {
		return nil
	}
	return fmt.Errorf("%w: bench needs a benchmark name (mongod, changestream, ingest, baselines, scale, runaway)", errUsage)
}

// benchFlags returns a benchmark's flag set with --mongodb-uri (into uri) defined, read from
// the command line only.
func benchFlags(e *env, name, usage string, uri *string) *settings.FlagSet {
	fs := e.flags("bench "+name, usage)
	fs.StringVar(uri, "mongodb-uri", "", "benchmark this MongoDB (one host) instead of an embedded server; command line only")
	fs.FlagOnly("mongodb-uri")
	return fs
}

// parseBench parses a benchmark's flags and checks them with validate.
func parseBench(e *env, fs *settings.FlagSet, args []string, validate func() error) error {
	if err := e.parse(fs, args); err != nil {
		return err
	}
	return validate()
}

func runBenchMongod(ctx context.Context, e *env, args []string) error {
	var cfg bench.MongodConfig
	fs := benchFlags(e, "mongod", "usage: rollup bench mongod [flags]\n\nFlags:\n", &cfg.URI)
	fs.IntVar(&cfg.N, "n", 1_000_000, "documents to upsert")
	fs.IntVar(&cfg.Batch, "batch", 1000, "upserts per unordered bulk write")
	fs.BoolVar(&cfg.Durable, "durable", false, "use a data directory (every write fsync'd before it is acknowledged)")
	if err := parseBench(e, fs, args, func() error { return cfg.Validate() }); err != nil {
		return usageError(err)
	}
	res, err := bench.Mongod(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench mongod: %w", err)
	}
	res.Print(e.stdout)
	return nil
}

func runBenchChangeStream(ctx context.Context, e *env, args []string) error {
	var cfg bench.ChangeStreamConfig
	fs := benchFlags(e, "changestream", "usage: rollup bench changestream [flags]\n\nFlags:\n", &cfg.URI)
	fs.IntVar(&cfg.Backlog, "backlog", 200_000, "events the consumer drains while writers keep upserting (throughput)")
	fs.IntVar(&cfg.Rate, "rate", 10_000, "writes per second during the latency phase")
	fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "length of the latency phase")
	if err := parseBench(e, fs, args, func() error { return cfg.Validate() }); err != nil {
		return usageError(err)
	}
	res, err := bench.ChangeStream(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench changestream: %w", err)
	}
	res.Print(e.stdout)
	return nil
}

func runBenchIngest(ctx context.Context, e *env, args []string) error {
	var cfg bench.IngestConfig
	var cpuProfile, memProfile string
	fs := benchFlags(e, "ingest", "usage: rollup bench ingest [flags]\n\nFlags:\n", &cfg.URI)
	fs.IntVar(&cfg.Agents, "agents", 10_000, "simulated agents per tick")
	fs.IntVar(&cfg.LeavesPerAgent, "leaves", 10, "leaves per agent")
	fs.IntVar(&cfg.Ticks, "ticks", 3, "ticks to run")
	fs.BoolVar(&cfg.Durable, "durable", false, "use a data directory (fsync before every acknowledgement)")
	fs.StringVar(&cfg.Client, "client", bench.ClientLoadGen, "how the agents send: loadgen (persistent HTTP/1.1 connections, as wrk) or agentclient (the agent package over net/http)")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.StringVar(&memProfile, "memprofile", "", "write an allocation profile of the whole run to this file")
	if err := parseBench(e, fs, args, func() error { return cfg.Validate() }); err != nil {
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

func runBenchRunaway(ctx context.Context, e *env, args []string) error {
	var cfg bench.RunawayConfig
	fs := benchFlags(e, "runaway", "usage: rollup bench runaway [flags]\n\nFlags:\n", &cfg.URI)
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "length of each of the three phases")
	fs.IntVar(&cfg.NormalRate, "normal-rate", 20, "the normal agent's requests per second")
	fs.IntVar(&cfg.NormalLeaves, "normal-leaves", 100, "counts per normal request")
	fs.IntVar(&cfg.RunawayRate, "runaway-rate", 1000, "the runaway agent's requests per second")
	fs.IntVar(&cfg.RunawayLeaves, "runaway-leaves", 100, "counts per runaway request")
	fs.Float64Var(&cfg.TokenRPS, "token-rps", api.DefaultTokenRPS, "per-token requests per second of the limited phase (0 = off)")
	fs.Float64Var(&cfg.TokenLeavesPerS, "token-leaves-per-s", api.DefaultTokenLeavesPerSecond, "per-token counts per second of the limited phase (0 = off)")
	if err := parseBench(e, fs, args, func() error { return cfg.Validate() }); err != nil {
		return usageError(err)
	}
	res, err := bench.Runaway(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench runaway: %w", err)
	}
	res.Print(e.stdout)
	return nil
}

func runBenchBaselines(ctx context.Context, e *env, args []string) error {
	var cfg bench.BaselinesConfig
	fs := benchFlags(e, "baselines", baselinesUsage, &cfg.URI)
	fs.IntVar(&cfg.Groups, "groups", 20, "groups under the root")
	fs.IntVar(&cfg.Servers, "servers", 1000, "servers in all, split evenly over the groups")
	fs.IntVar(&cfg.Processes, "processes", 100, "processes (leaves) per server")
	fs.IntVar(&cfg.Agents, "agents", 100, "concurrent simulated agents")
	fs.IntVar(&cfg.Ticks, "ticks", 3, "ticks to run")
	fs.IntVar(&cfg.Batch, "batch", 1000, "ops per unordered bulk write of the reaggregate design, and leaves per batch of both baselines")
	fs.IntVar(&cfg.OriginalBatch, "original-batch", 1000, "ops per unordered bulk write of the original design (1: one command per write, as the original system sent them)")
	fs.BoolVar(&cfg.Faults, "faults", false, "close the connection of one leaf update per design and tick (configureFailPoint; an external store needs enableTestCommands=1)")
	if err := parseBench(e, fs, args, func() error { return cfg.Validate() }); err != nil {
		return usageError(err)
	}
	res, err := bench.Baselines(ctx, cfg, e.stderr)
	if err != nil {
		return fmt.Errorf("bench baselines: %w", err)
	}
	res.Print(e.stdout)
	return nil
}

const scaleUsage = `usage: rollup bench scale [flags]

Runs rollup as it is deployed: a fresh 'rollup mongod --memory' (or --mongodb-uri), the
migrations, every project's tree imported as 'rollup tree import' does, an ingest token per
project, and --instances 'rollup serve' processes (this executable) talking to the store
through a black-pipe proxy that counts their commands. Simulated agents (one per server, each
sending its server's processes in one request, in a seeded random order) submit one warm-up
tick (serve loads the trees) and --ticks measured ticks through the HTTP API. An agent answered
503 or 429 (a busy store) resends the same request after Retry-After (at most 30 s), as real
agents do (safe: absolute values, nothing counted twice); another 5xx, 408 or a broken
connection after a backoff; any other 4xx ends the run. Per tick: ingest leaves/s (first
request sent -> last answer checked, resends and their waits included), the resends and the
share of the agents' time spent waiting for them, the time from each project's last
acknowledged leaf to its root being correct (root online = sum of the tick's leaves and
reported = expected = every leaf), serve's store commands until every root was correct, CPU
time of serve, of the store and of this process, serve's heap and RSS; then serve's and the
store's peak RSS (VmHWM), and a check of every parent of the last tick against its leaves.

Tree shape: --leaves N per project picks 100 processes per server and groups of 50 servers
(10,000 = 2 x 50 x 100; 100,000 = 20 x 50 x 100; 1,000,000 = 200 x 50 x 100); --groups,
--servers (per group) and --processes set it exactly.

--inprocess runs the store and serve inside this process instead (app.Serve, as serve runs
it): a --cpuprofile, --memprofile, --mutexprofile or --blockprofile then covers them; CPU and
RSS columns are then not serve's alone. --mutexprofile and --blockprofile find the serial
parts (the locks and channels every core waits on): 'go tool pprof -top FILE'.

--cpus pins the store and each serve instance to CPU sets (through taskset), so a matrix can be
repeated on any machine (the store on cores of its own, 1 against 2 instances):
` + bench.CPUSetsSyntax + `

--serve-log-level sets serve's --log-level (default warn); its logs go to --logs DIR
(serve-PHASE-INSTANCE.log). debug adds, among others, the watcher's "burst written" lines.

Examples:
  rollup bench scale --leaves 10000 --ticks 2                 # seconds; what CI runs
  rollup bench scale --leaves 1000000 --ticks 3
  rollup bench scale --projects 1000 --leaves 1000
  rollup bench scale --projects 1000 --leaves 1000 --instances 1,2,1,2 --partitions 4
  rollup bench scale --leaves 100000 --inprocess --cpuprofile cpu.out --memprofile mem.out
  rollup bench scale --leaves 100000 --inprocess --mutexprofile mutex.out --blockprofile block.out
  rollup bench scale --leaves 100000 --serve-log-level debug --logs /tmp/scale-logs
  rollup bench scale --leaves 100000 --instances 1,2 --cpus store=0-3/serve=4-7/serve=8-11

Flags:
`

func runBenchScale(ctx context.Context, e *env, args []string) error {
	cfg := bench.ScaleConfig{Launch: e.launcher()}
	var leaves int
	var instances, cpus string
	fs := benchFlags(e, "scale", scaleUsage, &cfg.URI)
	fs.IntVar(&leaves, "leaves", 10_000, "leaves per project (picks the tree shape; see above)")
	fs.IntVar(&cfg.Projects, "projects", 1, "projects, each with its own tree and token")
	fs.IntVar(&cfg.Groups, "groups", 0, "groups per project (with --servers and --processes: the exact shape)")
	fs.IntVar(&cfg.Servers, "servers", 0, "servers per group")
	fs.IntVar(&cfg.Processes, "processes", 0, "processes (leaves) per server = leaves per agent request")
	fs.IntVar(&cfg.Ticks, "ticks", 3, "measured ticks, after one warm-up tick")
	fs.StringVar(&instances, "instances", "1", "serve processes sharing the store (agents split evenly between them); a list (1,2,1,2) runs one phase per entry on the same store and trees, and compares them")
	fs.IntVar(&cfg.Partitions, "partitions", 0, "watcher partitions (--watcher-partitions hash:N, --max-partitions ceil(N/instances)); 0: one")
	fs.BoolVar(&cfg.InProcess, "inprocess", false, "run the store and serve in this process (for --cpuprofile/--memprofile)")
	fs.BoolVar(&cfg.Shuffle, "shuffle", true, "send the agents' requests in a seeded random order (false: tree order)")
	fs.DurationVar(&cfg.Poll, "poll", bench.DefaultScalePoll, "interval of the root reads (the freshness's resolution)")
	fs.DurationVar(&cfg.RootWait, "root-wait", bench.DefaultScaleRootWait, "how long to wait for the roots of a tick before reporting them not correct")
	fs.StringVar(&cfg.Dir, "logs", "", "directory for the children's logs (default: a temporary one, removed after a successful run)")
	fs.StringVar(&cfg.ServeLogLevel, "serve-log-level", bench.DefaultServeLogLevel, "serve's --log-level: debug, info, warn, error (debug: the watcher's burst lines, in --logs)")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of this process over the measured ticks (after the warm-up) to this file (with --inprocess: of serve and the store too)")
	fs.StringVar(&cfg.MemProfile, "memprofile", "", "write an allocation and heap profile of this process to this file after the last tick")
	fs.StringVar(&cfg.MutexProfile, "mutexprofile", "", "write Go's mutex contention profile of this process over the measured ticks to this file (with --inprocess: of serve and the store too)")
	fs.StringVar(&cpus, "cpus", "", "pin the store and each serve instance to CPUs: store=0-3/serve=4-7/serve=8-11 (see above; needs taskset)")
	fs.StringVar(&cfg.BlockProfile, "blockprofile", "", "write Go's blocking profile (channel, select, lock and cond waits) of this process over the measured ticks to this file (with --inprocess: of serve and the store too)")
	err := parseBench(e, fs, args, func() error {
		for _, f := range strings.Split(instances, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return fmt.Errorf("--instances: want numbers separated by commas, got %q", instances)
			}
			cfg.Instances = append(cfg.Instances, n)
		}
		if cpus != "" {
			online, err := bench.OnlineCPUs()
			if err != nil {
				return fmt.Errorf("--cpus: %w", err)
			}
			if cfg.CPUs, err = bench.ParseCPUSets(cpus, online); err != nil {
				return err
			}
		}
		if cfg.Groups == 0 && cfg.Servers == 0 && cfg.Processes == 0 {
			var err error
			if cfg.Groups, cfg.Servers, cfg.Processes, err = bench.ScaleShape(leaves); err != nil {
				return err
			}
		}
		return cfg.Validate()
	})
	if err != nil {
		return usageError(err)
	}
	res, err := bench.Scale(ctx, cfg, e.stderr)
	if err != nil {
		return fmt.Errorf("bench scale: %w", err)
	}
	res.Print(e.stdout)
	return res.Correct()
}

// launcher returns how the scale benchmark runs rollup subcommands: e.launch, or this
// executable.
func (e *env) launcher() bench.Launcher {
	if e.launch != nil {
		return e.launch
	}
	return func(args ...string) *exec.Cmd {
		exe, err := os.Executable()
		if err != nil {
			exe = os.Args[0]
		}
		return exec.Command(exe, args...)
	}
}
