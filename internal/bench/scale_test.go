package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/tree"
)

func TestScaleShape(t *testing.T) {
	tests := []struct {
		leaves                     int
		groups, servers, processes int
		wantErr                    string
	}{
		{leaves: 1, groups: 1, servers: 1, processes: 1},
		{leaves: 100, groups: 1, servers: 1, processes: 100},
		{leaves: 1000, groups: 1, servers: 10, processes: 100},
		{leaves: 10_000, groups: 2, servers: 50, processes: 100},
		{leaves: 100_000, groups: 20, servers: 50, processes: 100},
		{leaves: 1_000_000, groups: 200, servers: 50, processes: 100},
		{leaves: 5_100, groups: 3, servers: 17, processes: 100}, // 51 servers: groups grow until they divide
		{leaves: 0, wantErr: "positive"},
		{leaves: 150, wantErr: "multiple of 100"},
	}
	for _, tc := range tests {
		g, s, p, err := ScaleShape(tc.leaves)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ScaleShape(%d): err %v, want %q", tc.leaves, err, tc.wantErr)
			}
			continue
		}
		if err != nil || g != tc.groups || s != tc.servers || p != tc.processes {
			t.Errorf("ScaleShape(%d) = %d, %d, %d, %v; want %d, %d, %d", tc.leaves, g, s, p, err, tc.groups, tc.servers, tc.processes)
		}
		if g*s*p != tc.leaves {
			t.Errorf("ScaleShape(%d) has %d leaves", tc.leaves, g*s*p)
		}
	}
}

// TestScaleNodes: the generated trees are valid, ids are unique across projects, and the
// shape is the one asked for.
func TestScaleNodes(t *testing.T) {
	a := scaleNodes("p1", "p1-", 2, 3, 4)
	b := scaleNodes("p2", "p2-", 2, 3, 4)
	for _, nodes := range [][]tree.Node{a, b} {
		tr, err := tree.Build(nodes[0].ID, nodes)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Len() != 1+2+6+24 || tr.LeafCount(tr.Root().ID) != 24 || tr.Height() != 3 {
			t.Fatalf("tree of %d nodes, %d leaves, height %d", tr.Len(), tr.LeafCount(tr.Root().ID), tr.Height())
		}
	}
	ids := map[string]bool{}
	for _, n := range append(a, b...) {
		if ids[n.ID] {
			t.Fatalf("id %s in both projects", n.ID)
		}
		ids[n.ID] = true
	}
}

func TestParseMetrics(t *testing.T) {
	in := `# HELP rollup_watcher_events_total x
# TYPE rollup_watcher_events_total counter
rollup_watcher_events_total 1234
rollup_watcher_lag_seconds{checkpoint="w"} 0.5
go_memstats_heap_inuse_bytes 1.2e+07
`
	m, err := parseMetrics(strings.NewReader(in), "rollup_watcher_events_total", "go_memstats_heap_inuse_bytes", "missing_total")
	if err != nil {
		t.Fatal(err)
	}
	if m["rollup_watcher_events_total"] != 1234 || m["go_memstats_heap_inuse_bytes"] != 1.2e7 || m["missing_total"] != 0 {
		t.Fatalf("got %v", m)
	}
	if _, err := parseMetrics(strings.NewReader("rollup_watcher_events_total x\n"), "rollup_watcher_events_total"); err == nil {
		t.Fatal("a malformed sample parsed")
	}
}

// TestProcReaders reads this process's CPU time and memory through /proc.
func TestProcReaders(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	pid := os.Getpid()
	deadline := time.Now().Add(10 * time.Second)
	for procCPU(pid) == 0 && time.Now().Before(deadline) {
		for i := 0; i < 1e6; i++ {
			_ = strings.Repeat("x", i%3)
		}
	}
	if procCPU(pid) == 0 {
		t.Fatal("no CPU time read")
	}
	rss, peak := procMem(pid)
	if rss <= 0 || peak < rss {
		t.Fatalf("rss %d, peak %d", rss, peak)
	}
	if procCPU(-1) != 0 {
		t.Fatal("CPU time of a process that does not exist")
	}
}

// TestScaleInProcess runs the scale benchmark small, with the store and two serve instances
// in this process, two projects over two watcher partitions: every root correct, the last
// tick's parents all checked, every leaf an event, and the store commands counted.
func TestScaleInProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfg := ScaleConfig{Projects: 2, Groups: 1, Servers: 2, Processes: 5, Ticks: 2, Instances: []int{2, 1}, Partitions: 2,
		InProcess: true, Shuffle: true, RootWait: time.Minute, Dir: dir, ServeLogLevel: "debug",
		MutexProfile: filepath.Join(dir, "mutex.pprof"), BlockProfile: filepath.Join(dir, "block.pprof")}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	res, err := Scale(ctx, cfg, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if err := res.Correct(); err != nil {
		t.Fatal(err)
	}
	if len(res.phases) != 2 || res.phases[0].instances != 2 || res.phases[1].instances != 1 {
		t.Fatalf("phases %+v", res.phases)
	}
	for _, ph := range res.phases {
		if len(ph.ticks) != 3 || !ph.ticks[0].warm || ph.ticks[1].warm {
			t.Fatalf("%d ticks", len(ph.ticks))
		}
		last := ph.ticks[len(ph.ticks)-1]
		if last.checked == nil || last.checked.parents != 2*(1+1+2) || last.checked.wrong != 0 || last.checked.missing != 0 {
			t.Fatalf("check of the last tick: %+v", last.checked)
		}
	}
	for i, tk := range append(res.phases[0].ticks, res.phases[1].ticks...) {
		if tk.leaves != 20 || len(tk.fresh) != 2 || tk.notFresh != 0 {
			t.Errorf("tick %d: %d leaves, %d fresh roots, %d never", i, tk.leaves, len(tk.fresh), tk.notFresh)
		}
		if got := tk.metrics["rollup_watcher_events_total"]; got < 20 {
			t.Errorf("tick %d: %v leaf events, want at least 20", i, got)
		}
		if tk.stats.Commands["update"] < 2 {
			t.Errorf("tick %d: commands %v", i, tk.stats.Commands)
		}
		// At least the last leaf's root is written after it: the timeline has the root level.
		tl := tk.timeline
		if !tl.ok || len(tl.levels) != 3 || tl.levels[2].typ != "project" || tl.levels[2].after < 1 || tl.levels[2].last.Before(tl.lastLeaf) {
			t.Errorf("tick %d: timeline %+v", i, tl)
		}
	}
	var out bytes.Buffer
	res.Print(&out)
	for _, want := range []string{"2 project(s) × (1 groups × 2 servers × 5 processes)", "warm ", "every parent correct", "phase 2: 1 serve instance(s)", "by serve instances", "hash:2",
		"resends  wait%", "agents: no resends"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(progress.String(), "leaves/s; no resends)") {
		t.Errorf("progress lacks the resends:\n%s", progress.String())
	}
	// --serve-log-level debug: the watcher's burst lines are in the serve logs.
	bursts := 0
	for _, name := range []string{"serve-1-1.log", "serve-1-2.log", "serve-2-1.log"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		bursts += strings.Count(string(b), `"msg":"burst written"`)
	}
	if bursts == 0 {
		t.Error("no burst written line in the serve logs at --serve-log-level debug")
	}
	// The contention profiles are written, and sampling is off again.
	for _, name := range []string{"mutex.pprof", "block.pprof"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v (%v)", name, fi, err)
		}
	}
	if runtime.SetMutexProfileFraction(-1) != 0 {
		t.Error("mutex profiling still on after the run")
	}
}

func TestScaleConfigValidate(t *testing.T) {
	ok := ScaleConfig{Projects: 1, Groups: 1, Servers: 1, Processes: 1, Ticks: 1, Instances: []int{1}, InProcess: true}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*ScaleConfig){
		"no projects":                func(c *ScaleConfig) { c.Projects = 0 },
		"no ticks":                   func(c *ScaleConfig) { c.Ticks = 0 },
		"17 instances":               func(c *ScaleConfig) { c.Instances = []int{1, 17} },
		"no phases":                  func(c *ScaleConfig) { c.Instances = nil },
		"65 partitions":              func(c *ScaleConfig) { c.Partitions = 65 },
		"no launcher":                func(c *ScaleConfig) { c.InProcess = false },
		"negative servers":           func(c *ScaleConfig) { c.Servers = -1 },
		"bad log level":              func(c *ScaleConfig) { c.ServeLogLevel = "loud" },
		"too many bulk workers":      func(c *ScaleConfig) { c.BulkWorkers = 65 },
		"negative recompute workers": func(c *ScaleConfig) { c.RecomputeWorkers = -1 },
	} {
		c := ok
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: valid", name)
		}
	}
}

// TestScalePrintResends: a tick whose agents resent shows them in its row (count and the
// share of time waiting), on a line under it (by cause), in the progress line and in the
// phase's summary; a tick without shows zeros.
func TestScalePrintResends(t *testing.T) {
	busy := scaleTick{leaves: 1000, ingest: 4 * time.Second, resends: sendStats{resends: 12, byStatus: map[int]int{503: 10, 0: 2},
		mostResends: 3, waited: 6 * time.Second, busy: 24 * time.Second}}
	quiet := scaleTick{leaves: 1000, ingest: time.Second}
	res := ScaleResult{cfg: ScaleConfig{Projects: 1, Groups: 1, Servers: 10, Processes: 100, Ticks: 2, Instances: []int{1}},
		phases: []scalePhase{{instances: 1, ticks: []scaleTick{{warm: true, leaves: 1000, ingest: time.Second}, busy, quiet}}}}
	var out bytes.Buffer
	res.Print(&out)
	for _, want := range []string{
		"resends  wait%",
		"   4.00s       250 4000.00      12   25.0 ",
		"   1.00s      1000 1000.00       0    0.0 ",
		"      12 resends (transport ×2, 503 ×10; at most 3 of one request), 6.0 s of waiting before them summed over the connections (25% of their time)",
		"agents: 12 resends (transport ×2, 503 ×10;",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	var progress bytes.Buffer
	(&scaleRun{progress: &progress}).printTickProgress(1, busy)
	if !strings.Contains(progress.String(), "(250 leaves/s; 12 resends (transport ×2, 503 ×10;") {
		t.Errorf("progress line %q", progress.String())
	}
}
