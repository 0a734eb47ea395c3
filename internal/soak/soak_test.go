package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// Liveness bounds, generous for a loaded machine: the promises are tighter (a submission
// after the store's return acknowledged within 1 s, totals right within 5 s) and are
// measured by the fault tests of cmd/rollup and api; the soak reports its distributions.
const (
	maxAckAfterHeal = 15 * time.Second
	maxConverge     = 30 * time.Second
	// maxSummaryLag bounds the summaries' lag behind the totals (the watcher's MaxTierDelay
	// is 5 s).
	maxSummaryLag = 20 * time.Second
)

// envInt reads a non-negative integer setting (def when unset).
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

// totals sums the seeds' numbers for the final report.
type totals struct {
	mu          sync.Mutex
	seeds       int
	failed      []uint64
	violations  int
	events      [numKinds]atomic.Int64
	longFaults  int
	rounds      int
	submissions int64
	attempts    int64
	refused503  int64
	otherErrors int64
	cross       int64
	replays     int
	converge    []time.Duration
	afterHeal   []time.Duration
	seedTime    []time.Duration
}

// defaultParallel is how many seeds run at once by default: the default 3 seeds all at once.
// A seed mostly waits (on its processes, its faults and their heals: 27 CPU s for 3 seeds
// that took 71 s one after the other under -race), and soak runs of hundreds of seeds 6 and
// 8 at once found no violation (docs/benchmarks.md).
const defaultParallel = 3

// TestMain lets ROLLUP_SOAK_PARALLEL seeds run at once: go test's -parallel, GOMAXPROCS (2
// here) unless given, would cap it. It removes the rollup binary rollupBinary built.
func TestMain(m *testing.M) {
	n, err := strconv.Atoi(os.Getenv("ROLLUP_SOAK_PARALLEL"))
	if err != nil { // TestSoak reports a bad value
		n = defaultParallel
	}
	embeddedtest.OverlapWaits(n)
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// TestSoak runs the soak's seeds (see the package comment).
func TestSoak(t *testing.T) {
	if os.Getenv("MONGODB_URI") != "" {
		t.Skip("stops and restarts the store: runs on the embedded server only")
	}
	seeds := envInt(t, "ROLLUP_SOAK_SEEDS", 3)
	if testing.Short() && os.Getenv("ROLLUP_SOAK_SEEDS") == "" {
		seeds = 1
	}
	first := uint64(envInt(t, "ROLLUP_SOAK_FIRST", 1))
	if s := os.Getenv("ROLLUP_SOAK_SEED"); s != "" {
		first, seeds = uint64(envInt(t, "ROLLUP_SOAK_SEED", 1)), 1
	}
	parallel := max(1, envInt(t, "ROLLUP_SOAK_PARALLEL", defaultParallel))
	bin := rollupBinary(t)
	var tot totals
	start := time.Now()
	sem := make(chan struct{}, parallel)
	t.Run("seeds", func(t *testing.T) {
		for seed := first; seed < first+uint64(seeds); seed++ {
			t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
				if parallel > 1 {
					t.Parallel()
				}
				sem <- struct{}{}
				defer func() { <-sem }()
				runSeed(t, bin, seed, &tot)
			})
		}
	})
	tot.report(t, time.Since(start))
}

// report logs the totals of the run.
func (tot *totals) report(t *testing.T, took time.Duration) {
	tot.mu.Lock()
	defer tot.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%d seeds in %v, %d violations", tot.seeds, took.Round(time.Second), tot.violations)
	if len(tot.failed) > 0 {
		fmt.Fprintf(&b, " (seeds %v)", tot.failed)
	}
	fmt.Fprintf(&b, "\n%d rounds, %d submissions, %d attempts (%d answered 503, %d other failures: connection refused or reset, 5xx), "+
		"%d cross-project attempts refused, %d replays, %d long faults\nfaults:", tot.rounds, tot.submissions, tot.attempts,
		tot.refused503, tot.otherErrors, tot.cross, tot.replays, tot.longFaults)
	for k := range numKinds {
		fmt.Fprintf(&b, " %v ×%d;", faultKind(k), tot.events[k].Load())
	}
	fmt.Fprintf(&b, "\nsubmissions acknowledged after their round's faults were healed, waiting past the heal: %s (%d)",
		quantiles(tot.afterHeal), len(tot.afterHeal))
	fmt.Fprintf(&b, "\ntotals right after the last round: %s; seed time: %s", quantiles(tot.converge), quantiles(tot.seedTime))
	t.Log(b.String())
}

// quantiles describes durations: median, 99th percentile and maximum.
func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))].Round(time.Millisecond) }
	return fmt.Sprintf("median %v, p99 %v, max %v", q(0.5), q(0.99), s[len(s)-1].Round(time.Millisecond))
}

// runSeed plays one seed and checks its invariants.
func runSeed(t *testing.T, bin string, seed uint64, tot *totals) {
	began := time.Now()
	p := newPlan(seed)
	log := &journal{start: began}
	viol := &violations{}
	log.logf("%s", p.summary())
	ctx := testctx.Context(t)
	w := newWorld(ctx, t, bin, p.serves, log, viol)
	reported := false // the violations were reported (t.Errorf) at the seed's end
	defer func() {
		if t.Failed() || os.Getenv("ROLLUP_SOAK_JOURNAL") != "" {
			t.Logf("seed %d (reproduce: ROLLUP_SOAK_SEED=%d go test -race -run TestSoak -v ./internal/soak/)\njournal:\n%s", seed, seed, log.String())
			// A t.Fatal stops the seed before its violations are reported: they are the cause.
			if vs := viol.all(); len(vs) > 0 && !reported {
				t.Logf("seed %d's violations so far:\n%s", seed, strings.Join(vs, "\n"))
			}
			w.storeMu.Lock()
			if w.store != nil {
				t.Logf("the store's last output:\n%s", lastLines(w.store.output.String(), 30))
			}
			w.storeMu.Unlock()
			for _, s := range w.serves {
				s.mu.Lock()
				if s.p != nil {
					t.Logf("serve %d's last output:\n%s", s.idx, lastLines(s.p.output.String(), 60))
				}
				s.mu.Unlock()
			}
		}
	}()

	base := tree.AlignTick(time.Now().UTC(), tree.DefaultTick).Add(-8 * tree.DefaultTick)
	ticks := make([]time.Time, numTicks)
	for k := range ticks {
		ticks[k] = base.Add(time.Duration(k) * tree.DefaultTick)
	}
	trees := treedb.New(w.db)
	a := &agents{w: w, plan: p, ticks: ticks, base: time.Now().Add(-30 * time.Minute), ledger: newLedger(len(p.projects)),
		st: &stats{}, viol: viol, log: log}
	for _, pp := range p.projects {
		if _, err := trees.Import(ctx, pp.name, pp.v1, base.Add(-time.Hour)); err != nil {
			t.Fatalf("import %s: %v", pp.name, err)
		}
		tok, err := api.CreateToken(ctx, w.db, pp.name, "soak")
		if err != nil {
			t.Fatalf("token %s: %v", pp.name, err)
		}
		a.tokens = append(a.tokens, tok)
	}

	var applied [numKinds]atomic.Int64
	replays := 0
	for r, rp := range p.rounds {
		if r == editRound {
			for _, pp := range p.projects {
				if pp.v2 != nil {
					importEdit(ctx, t, w, pp, ticks[editTick])
				}
			}
		}
		log.logf("round %d", r)
		start := time.Now()
		a.healed.Store(0)
		var wg sync.WaitGroup
		errs := make(chan error, len(rp.agents)+2)
		wg.Go(func() {
			err := w.play(ctx, start, rp.events, &applied)
			if err != nil {
				errs <- err
			}
			a.healed.Store(time.Now().UnixNano())
		})
		for _, ap := range rp.agents {
			wg.Go(func() {
				if err := a.runAgent(ctx, ap, rp.maxTick, start.Add(rp.length)); err != nil {
					errs <- err
				}
			})
		}
		if rp.replay {
			replays++
			wg.Go(func() {
				pause(rp.replayAt)
				replay(ctx, w, p.projects[rp.replayP].name, ticks)
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			viol.add("round %d: %v", r, err)
			break
		}
		if err := w.heal(ctx); err != nil {
			t.Fatalf("heal: %v", err)
		}
	}

	// Everything healed: every serve must become ready, then the totals right.
	for _, s := range w.serves {
		if err := w.waitReady(ctx, s); err != nil {
			viol.add("%v", err)
		}
	}
	// Liveness: once a round's faults are healed, a submission is acknowledged promptly
	// (generous: a restarted serve may still be starting).
	a.waitsMu.Lock()
	waits := a.afterHeal
	a.waitsMu.Unlock()
	if slowest := slices.Max(append([]time.Duration{0}, waits...)); slowest > maxAckAfterHeal {
		viol.add("a submission was acknowledged %v after its round's faults were healed (more than %v)", slowest.Round(time.Millisecond), maxAckAfterHeal)
	}
	c := newChecker(w.db, p, ticks, a.ledger)
	done := time.Now()
	deadline := done.Add(2 * time.Minute)
	var docs []storedDoc
	for {
		var err error
		if docs, err = c.readAll(ctx); err != nil {
			t.Fatalf("read counts: %v", err)
		}
		bad, err := c.parentMismatches(ctx, docs)
		if err != nil {
			t.Fatalf("check parents: %v", err)
		}
		if len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, b := range bad[:min(len(bad), 10)] {
				viol.add("2 minutes after the last round: %s", b)
			}
			break
		}
		pause(50 * time.Millisecond)
	}
	converge := time.Since(done)
	log.logf("totals right after %v", converge)
	if converge > maxConverge {
		viol.add("totals right only %v after the last round (more than %v)", converge.Round(time.Millisecond), maxConverge)
	}
	for _, v := range c.leafViolations(docs) {
		viol.add("%s", v)
	}
	for _, s := range w.serves {
		if n, err := w.metric(s, "rollup_watcher_invalid_total"); err != nil {
			viol.add("serve %d /metrics: %v", s.idx, err)
		} else if n != 0 {
			viol.add("serve %d skipped %v malformed documents (rollup_watcher_invalid_total)", s.idx, n)
		}
	}
	// verify checks the hourly and daily summaries too; the watcher writes them once the
	// stream is quiet (at most its MaxTierDelay, 5 s, later while events flow), so verify
	// may run again until maxSummaryLag after the totals were right.
	for _, pp := range p.projects {
		for {
			out, err := w.runCLI(ctx, "verify", "--project", pp.name, "--from", ticks[0].Format(time.RFC3339),
				"--to", ticks[numTicks-1].Add(tree.DefaultTick).Format(time.RFC3339))
			if err == nil {
				break
			}
			if time.Since(done) > converge+maxSummaryLag {
				viol.add("rollup verify --project %s (%v after the totals were right): %v\n%s", pp.name, maxSummaryLag, err, lastLines(out, 30))
				break
			}
			pause(200 * time.Millisecond)
		}
	}
	log.logf("verify clean %v after the last round", time.Since(done))

	vs := viol.all()
	for _, v := range vs {
		t.Errorf("seed %d: %s", seed, v)
	}
	reported = true
	took := time.Since(began)
	st := a.st
	t.Logf("seed %d: %d violations in %v; %d submissions, %d attempts, %d answered 503; totals right %v after the last round",
		seed, len(vs), took.Round(time.Millisecond), st.submissions.Load(), st.attempts.Load(), st.refused503.Load(), converge.Round(time.Millisecond))

	tot.mu.Lock()
	defer tot.mu.Unlock()
	tot.seeds++
	tot.violations += len(vs)
	if len(vs) > 0 {
		tot.failed = append(tot.failed, seed)
	}
	for k := range numKinds {
		tot.events[k].Add(applied[k].Load())
	}
	for _, rp := range p.rounds {
		for _, e := range rp.events {
			if e.long {
				tot.longFaults++
			}
		}
	}
	tot.rounds += len(p.rounds)
	tot.submissions += st.submissions.Load()
	tot.attempts += st.attempts.Load()
	tot.refused503 += st.refused503.Load()
	tot.otherErrors += st.otherErrors.Load()
	tot.cross += st.crossRefused.Load()
	tot.replays += replays
	tot.converge = append(tot.converge, converge)
	tot.afterHeal = append(tot.afterHeal, waits...)
	tot.seedTime = append(tot.seedTime, took)
}

// importEdit imports a project's next tree version with `rollup tree import`, effective from
// the edit's tick.
func importEdit(ctx context.Context, t *testing.T, w *world, pp *projectPlan, at time.Time) {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"project": pp.name, "nodes": pp.v2})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(w.dir, pp.name+"-v2.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := w.runCLI(ctx, "tree", "import", file, "--effective", at.Format(time.RFC3339))
	if err != nil {
		t.Fatalf("rollup tree import: %v\n%s", err, out)
	}
	w.log.logf("tree edit of %s imported", pp.name)
}

// replay runs `rollup replay` over the seed's ticks until it succeeds (a fault may stop it:
// it is resumable), while agents and the watcher run.
func replay(ctx context.Context, w *world, project string, ticks []time.Time) {
	deadline := time.Now().Add(2 * time.Minute)
	for attempt := 1; ; attempt++ {
		out, err := w.runCLI(ctx, "replay", "--project", project, "--from", ticks[0].Format(time.RFC3339),
			"--to", ticks[len(ticks)-1].Add(tree.DefaultTick).Format(time.RFC3339), "--progress", "none")
		if err == nil {
			w.log.logf("replay of %s done (attempt %d)", project, attempt)
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			w.viol.add("rollup replay --project %s never succeeded in 2 minutes: %v\n%s", project, err, lastLines(out, 20))
			return
		}
		w.log.logf("replay of %s failed (attempt %d): %v", project, attempt, err)
		pause(200 * time.Millisecond)
	}
}
