package bench

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Print writes the result as the command prints it.
func (r ScaleResult) Print(w io.Writer) {
	c := r.cfg
	pf := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	leaves := c.Leaves()
	pf("scale: %d project(s) × (%d groups × %d servers × %d processes) = %d leaves per project, %d per tick; %d tree nodes per project\n",
		c.Projects, c.Groups, c.Servers, c.Processes, leaves, leaves*c.Projects, r.nodes)
	order := "shuffled"
	if !c.Shuffle {
		order = "in tree order"
	}
	parts := "1"
	if c.Partitions > 1 {
		parts = fmt.Sprintf("hash:%d, at most ceil(%d / instances) per instance", c.Partitions, c.Partitions)
	}
	pf("agents: %d per tick (one per server, %d leaves per request, %s); serve instances per phase: %s (requests split evenly); watcher partitions: %s\n",
		c.Projects*c.Groups*c.Servers, c.Processes, order, joinInts(c.Instances), parts)
	mode := "subprocesses (rollup serve)"
	if c.InProcess {
		mode = "in this process (app.Serve): CPU and memory are the whole process's"
	}
	pf("store: %s; serve: %s; %d CPUs, %s; root reads every %s\n", r.storeDesc, mode, runtime.NumCPU(), runtime.Version(), c.Poll)
	if c.BulkWorkers != 0 || c.RecomputeWorkers != 0 {
		pf("serve workers (0: serve's default): --bulk-workers %d, --recompute-workers %d\n", c.BulkWorkers, c.RecomputeWorkers)
	}
	if len(c.CPUs.Serve) > 0 {
		pf("serve instances pinned (--cpus, taskset; instance i takes entry i mod %d): %s\n", len(c.CPUs.Serve), strings.Join(c.CPUs.Serve, " / "))
	}
	if len(r.imports) > 0 {
		total := time.Duration(0)
		for _, d := range r.imports {
			total += d
		}
		sorted := slices.Clone(r.imports)
		slices.Sort(sorted)
		pf("tree import (treedb, as `rollup tree import`): %d tree(s) in %s, %.0f nodes/s; per tree p50 %s, max %s; first %s, last %s\n",
			len(r.imports), total.Round(time.Millisecond), float64(r.nodes*len(r.imports))/total.Seconds(),
			sorted[len(sorted)/2].Round(time.Microsecond), sorted[len(sorted)-1].Round(time.Millisecond),
			r.imports[0].Round(time.Millisecond), r.imports[len(r.imports)-1].Round(time.Millisecond))
	}
	if r.nodes > 0 && r.treeBytes > 0 {
		pf("one tree in memory as serve loads it (treedb.Store.Load, heap after GC): %.1f MiB for %d nodes = %d B per node\n",
			float64(r.treeBytes)/(1<<20), r.nodes, r.treeBytes/int64(r.nodes))
	}
	if r.idle > 0 {
		pf("background: %d store commands in %s without load (%s)\n", commandCount(r.idleCmds), r.idle, commandMix(r.idleCmds))
	}
	for i, ph := range r.phases {
		pf("\n")
		if len(r.phases) > 1 {
			pf("phase %d: %d serve instance(s)\n", i+1, ph.instances)
		}
		ph.print(pf, c)
	}
	if len(r.phases) > 1 {
		r.printComparison(pf)
	}
	if r.storePeak > 0 {
		pf("store peak RSS (VmHWM): %.0f MiB\n", mib(r.storePeak))
	}
	if r.logDir != "" {
		pf("logs: %s\n", r.logDir)
	}
}

// print writes one phase: a row per tick, its summary, the check and the timelines.
func (ph scalePhase) print(pf func(string, ...any), c ScaleConfig) {
	if ph.serveStart > 0 {
		pf("serve RSS once ready: %.0f MiB\n", mib(ph.serveStart))
	}
	pf("%-5s %9s %8s %9s %7s %7s %6s %9s %9s %9s %7s %7s %7s %8s %8s %8s %14s %9s %9s %9s\n",
		"tick", "leaves", "ingest", "leaves/s", "µs/leaf", "resends", "wait%", "root p50", "root p99", "root max", "cmds", "update", "find", "getMore",
		"parentW", "events", "CPU s srv/st/me", "CPUµs/lf", "heap MiB", "RSS MiB")
	for i, t := range ph.ticks {
		label := fmt.Sprint(i)
		if t.warm {
			label = "warm"
		}
		p50, p99, mx := freshStats(t.fresh)
		pf("%-5s %9d %7.2fs %9.0f %7.2f %7d %6.1f %9s %9s %9s %7d %7d %7d %8d %8.0f %8.0f %14s %9s %9.0f %9.0f\n",
			label, t.leaves, t.ingest.Seconds(), float64(t.leaves)/t.ingest.Seconds(), perLeafMicros(t.ingest, t.leaves),
			t.resends.resends, 100*t.resends.waitShare(), fmtMillis(p50), fmtMillis(p99), fmtMillis(mx), commandCount(t.stats), t.stats.Commands["update"], t.stats.Commands["find"],
			t.stats.Commands["getMore"], t.metrics["rollup_watcher_parent_writes_total"], t.metrics["rollup_watcher_events_total"],
			fmt.Sprintf("%.1f/%.1f/%.1f", t.serveCPU.Seconds(), t.storeCPU.Seconds(), t.selfCPU.Seconds()),
			cpuPerLeaf(t), t.metrics["go_memstats_heap_inuse_bytes"]/(1<<20), mib(t.serveRSS))
		if t.notFresh > 0 {
			pf("      %d root(s) NOT correct within %s\n", t.notFresh, c.RootWait)
		}
		if t.resends.resends > 0 {
			pf("      %s\n", t.resends)
		}
	}
	s := ph.summary()
	if s.ticks == 0 {
		return
	}
	pf("measured ticks (%d): ingest %.0f leaves/s (median), %.2f µs per leaf; first request -> every root correct %.0f leaves/s; root correct after the last leaf p50 %s, p99 %s, max %s (%d samples: projects × ticks",
		s.ticks, s.ingestRate, s.ingestMicros, s.settledRate, fmtMillis(s.p50), fmtMillis(s.p99), fmtMillis(s.max), s.samples)
	if s.notFresh > 0 {
		pf("; %d NEVER correct", s.notFresh)
	}
	pf("); %.0f store commands per tick (median); agents: %s", s.cmds, s.resends)
	if s.cpuMicros > 0 {
		pf("; serve+store CPU %.2f µs per leaf (median)", s.cpuMicros)
	}
	pf("\n")
	if ph.servePeak > 0 {
		pf("serve peak RSS (VmHWM, summed over instances): %.0f MiB\n", mib(ph.servePeak))
	}
	last := ph.ticks[len(ph.ticks)-1]
	if last.checked != nil {
		ok := "every parent correct"
		if last.checked.wrong > 0 || last.checked.missing > 0 {
			ok = "WRONG"
		}
		pf("last tick, every parent checked against its leaves: %d parents, %d wrong, %d missing: %s\n",
			last.checked.parents, last.checked.wrong, last.checked.missing, ok)
	}
	pf("store commands of the last tick: %s\n", commandMix(last.stats))
	pf("after the last leaf write (stored written_at, ms; the final burst's parents):\n")
	for i, t := range ph.ticks {
		label := fmt.Sprint(i)
		if t.warm {
			label = "warm"
		}
		pf("  tick %-4s %s\n", label, t.timeline)
	}
}

// phaseSummary is a phase's measured ticks in a few numbers (medians over ticks; the
// freshness percentiles over every project and tick).
type phaseSummary struct {
	ticks                                 int
	ingestRate, ingestMicros, settledRate float64
	p50, p99, max                         time.Duration
	samples, notFresh                     int
	cmds, cpuMicros                       float64
	resends                               sendStats // summed over the measured ticks
}

func (ph scalePhase) summary() phaseSummary {
	var s phaseSummary
	var rates, perLeaf, settled, cmds, cpus []float64
	var fresh []time.Duration
	for _, t := range ph.ticks {
		if t.warm {
			continue
		}
		s.ticks++
		rates = append(rates, float64(t.leaves)/t.ingest.Seconds())
		perLeaf = append(perLeaf, perLeafMicros(t.ingest, t.leaves))
		if t.settled > 0 {
			settled = append(settled, float64(t.leaves)/t.settled.Seconds())
		}
		cmds = append(cmds, float64(commandCount(t.stats)))
		if t.serveCPU > 0 || t.storeCPU > 0 {
			cpus = append(cpus, float64((t.serveCPU+t.storeCPU).Nanoseconds())/1e3/float64(t.leaves))
		}
		fresh = append(fresh, t.fresh...)
		s.notFresh += t.notFresh
		s.resends.add(t.resends)
	}
	s.ingestRate, s.ingestMicros, s.settledRate = median(rates), median(perLeaf), median(settled)
	s.cmds, s.cpuMicros = median(cmds), median(cpus)
	s.p50, s.p99, s.max = freshStats(fresh)
	s.samples = len(fresh)
	return s
}

// printComparison compares the phases by instance count (medians over the phases of a count).
func (r ScaleResult) printComparison(pf func(string, ...any)) {
	byN := map[int][]phaseSummary{}
	var ns []int
	for _, ph := range r.phases {
		if _, ok := byN[ph.instances]; !ok {
			ns = append(ns, ph.instances)
		}
		byN[ph.instances] = append(byN[ph.instances], ph.summary())
	}
	slices.Sort(ns)
	pf("\nby serve instances (median over phases of the same count; ratio to %d instance(s)):\n", ns[0])
	pf("%-9s %7s %16s %22s %10s %10s %14s\n", "instances", "phases", "ingest leaves/s", "send->roots leaves/s", "root p50", "root p99", "CPU µs/leaf")
	var base phaseSummary
	for i, n := range ns {
		ss := byN[n]
		pick := func(f func(phaseSummary) float64) float64 {
			var xs []float64
			for _, s := range ss {
				xs = append(xs, f(s))
			}
			return median(xs)
		}
		m := phaseSummary{
			ingestRate:  pick(func(s phaseSummary) float64 { return s.ingestRate }),
			settledRate: pick(func(s phaseSummary) float64 { return s.settledRate }),
			p50:         time.Duration(pick(func(s phaseSummary) float64 { return float64(s.p50) })),
			p99:         time.Duration(pick(func(s phaseSummary) float64 { return float64(s.p99) })),
			cpuMicros:   pick(func(s phaseSummary) float64 { return s.cpuMicros }),
		}
		if i == 0 {
			base = m
		}
		pf("%-9d %7d %9.0f (%.2fx) %15.0f (%.2fx) %10s %10s %14.2f\n", n, len(ss), m.ingestRate, m.ingestRate/base.ingestRate,
			m.settledRate, m.settledRate/base.settledRate, fmtMillis(m.p50), fmtMillis(m.p99), m.cpuMicros)
	}
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ",")
}

// Correct reports whether every measured root was correct in time and the full check of the
// last tick found nothing wrong.
func (r ScaleResult) Correct() error {
	var problems []string
	var ticks []scaleTick
	for _, ph := range r.phases {
		ticks = append(ticks, ph.ticks...)
	}
	for i, t := range ticks {
		if t.notFresh > 0 {
			problems = append(problems, fmt.Sprintf("tick %d: %d root(s) never correct", i, t.notFresh))
		}
		if t.checked != nil && (t.checked.wrong > 0 || t.checked.missing > 0) {
			problems = append(problems, fmt.Sprintf("tick %d: %d parent(s) wrong, %d missing", i, t.checked.wrong, t.checked.missing))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("rollups not correct: %s", strings.Join(problems, "; "))
	}
	return nil
}

func perLeafMicros(d time.Duration, leaves int) float64 {
	return float64(d.Nanoseconds()) / 1e3 / float64(leaves)
}

func cpuPerLeaf(t scaleTick) string {
	if t.serveCPU == 0 && t.storeCPU == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64((t.serveCPU+t.storeCPU).Nanoseconds())/1e3/float64(t.leaves))
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
