package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/gameops/rollup/embedded/cpulist"
	"github.com/gameops/rollup/internal/bench"
)

// scaleUsage is the help of rollup-bench scale.
const scaleUsage = `usage: rollup-bench scale [flags]

Runs rollup as it is deployed: a fresh 'rollup mongod --memory' (or --mongodb-uri), the
migrations, every project's tree imported as 'rollup tree import' does, an ingest token per
project, and --instances 'rollup serve' processes (of the --rollup binary) talking to the store
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
  rollup-bench scale --leaves 10000 --ticks 2                 # seconds; what CI runs
  rollup-bench scale --leaves 1000000 --ticks 3
  rollup-bench scale --projects 1000 --leaves 1000
  rollup-bench scale --projects 1000 --leaves 1000 --instances 1,2,1,2 --partitions 4
  rollup-bench scale --leaves 100000 --inprocess --cpuprofile cpu.out --memprofile mem.out
  rollup-bench scale --leaves 100000 --inprocess --mutexprofile mutex.out --blockprofile block.out
  rollup-bench scale --leaves 100000 --serve-log-level debug --logs /tmp/scale-logs
  rollup-bench scale --leaves 100000 --instances 1,2 --cpus store=0-3/serve=4-7/serve=8-11

--rollup PATH is the rollup binary run as the store and serve (default: a rollup next to this
executable, else rollup on PATH; not needed with --inprocess).

Flags:
`

// runScale runs rollup as deployed (a rollup binary as the store and serve processes).
func runScale(ctx context.Context, e *env, args []string) error {
	var cfg bench.ScaleConfig
	var leaves int
	var instances, cpus, rollup string
	fs := e.flags("scale", scaleUsage, &cfg.URI)
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
	fs.IntVar(&cfg.BulkWorkers, "bulk-workers", 0, "serve's --bulk-workers: leaf bulk writes in flight at once (0: serve's default)")
	fs.IntVar(&cfg.RecomputeWorkers, "recompute-workers", 0, "serve's --recompute-workers: chunks of one level of parents written at once (0: serve's default)")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of this process over the measured ticks (after the warm-up) to this file (with --inprocess: of serve and the store too)")
	fs.StringVar(&cfg.MemProfile, "memprofile", "", "write an allocation and heap profile of this process to this file after the last tick")
	fs.StringVar(&cfg.MutexProfile, "mutexprofile", "", "write Go's mutex contention profile of this process over the measured ticks to this file (with --inprocess: of serve and the store too)")
	fs.StringVar(&cpus, "cpus", "", "pin the store and each serve instance to CPUs: store=0-3/serve=4-7/serve=8-11 (see above; needs taskset)")
	fs.StringVar(&cfg.BlockProfile, "blockprofile", "", "write Go's blocking profile (channel, select, lock and cond waits) of this process over the measured ticks to this file (with --inprocess: of serve and the store too)")
	fs.StringVar(&rollup, rollupFlag, "", "the rollup binary run as the store and serve (default: a rollup next to this executable, else on PATH)")
	err := e.parse(fs, args, func() error {
		for _, f := range strings.Split(instances, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return fmt.Errorf("--instances: want numbers separated by commas, got %q", instances)
			}
			cfg.Instances = append(cfg.Instances, n)
		}
		if cpus != "" {
			online, err := cpulist.Online()
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
		if !cfg.InProcess {
			var err error
			if cfg.Launch, err = e.launch(rollup); err != nil {
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
