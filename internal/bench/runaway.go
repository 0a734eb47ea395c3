package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sourcegraph/conc/pool"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/internal/app"
	"github.com/gameops/rollup/internal/mongoconn"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// RunawayConfig is the shape of the runaway-agent benchmark: one project's agent submits at
// a steady pace while another project's agent sends as fast as RunawayRate, through one API
// and one bulk writer.
type RunawayConfig struct {
	URI           string        // benchmark this MongoDB instead of an embedded server
	Duration      time.Duration // of each phase
	NormalRate    int           // the normal agent's requests per second
	NormalLeaves  int           // counts per normal request
	RunawayRate   int           // the runaway agent's requests per second
	RunawayLeaves int           // counts per runaway request
	// TokenRPS and TokenLeavesPerS are the limits of the limited phase (api.Config; 0: off).
	TokenRPS, TokenLeavesPerS float64
	// TokenBurst is the limits' burst (api.Config.TokenBurst; 0: api.LimitBurst).
	TokenBurst time.Duration
	// Warmup is an unreported phase of the normal agent alone before the measured ones (0:
	// none): without it the alone phase, the ratios' base, ran first on a cold process.
	Warmup time.Duration
}

// Validate checks the shape.
func (c RunawayConfig) Validate() error {
	switch {
	case c.Duration < 100*time.Millisecond:
		return errors.New("--duration must be at least 100ms")
	case c.NormalRate < 1 || c.NormalLeaves < 1 || c.RunawayRate < 1 || c.RunawayLeaves < 1:
		return errors.New("--normal-rate, --normal-leaves, --runaway-rate and --runaway-leaves must be positive")
	case c.NormalLeaves > api.DefaultMaxItems || c.RunawayLeaves > api.DefaultMaxItems:
		return fmt.Errorf("at most %d leaves per request", api.DefaultMaxItems)
	case c.TokenRPS < 0 || c.TokenLeavesPerS < 0 || c.TokenBurst < 0:
		return errors.New("--token-rps, --token-leaves-per-s and --token-burst must not be negative")
	case c.Warmup != 0 && c.Warmup < 100*time.Millisecond:
		return errors.New("--warmup must be 0 (none) or at least 100ms")
	}
	return nil
}

// runawayWorkers is how many connections the runaway agent sends on.
const runawayWorkers = 16

// RunawayPhase is what one phase measured.
type RunawayPhase struct {
	Name string
	// Normal are the normal agent's latencies (request sent -> 200 read), sorted.
	Normal []time.Duration
	// NormalFailed counts the normal agent's requests that did not get a 200.
	NormalFailed int
	// Runaway counts the runaway agent's answers by status (0: transport errors).
	Runaway map[int]int
	// Elapsed is how long the phase took: more than the configured duration when the runaway
	// could not send at its rate.
	Elapsed time.Duration
}

// RunawayResult is the benchmark's outcome.
type RunawayResult struct {
	cfg    RunawayConfig
	Phases []RunawayPhase // alone, runaway with limits, runaway without limits
	// Warm is the unreported warm-up phase (empty without one).
	Warm RunawayPhase
}

// Runaway runs the three phases (after the warm-up, if any) against a fresh embedded server (or cfg.URI).
func Runaway(ctx context.Context, cfg RunawayConfig) (RunawayResult, error) {
	uri, stop, err := benchStore(ctx, cfg.URI, false)
	if err != nil {
		return RunawayResult{cfg: cfg}, err
	}
	defer stop()
	res := RunawayResult{cfg: cfg}
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return res, fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	db := mongoconn.Database(client, fmt.Sprintf("rollup_bench_%d", time.Now().UnixNano()))
	defer func() { _ = db.Drop(context.WithoutCancel(ctx)) }()
	log := zap.NewNop()
	if _, err := migrations.New(db, log).Up(ctx, migrations.UpOptions{}); err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	normalTok, err := api.CreateToken(ctx, db, "normal", "agent")
	if err != nil {
		return res, fmt.Errorf("token: %w", err)
	}
	runawayTok, err := api.CreateToken(ctx, db, "runaway", "agent")
	if err != nil {
		return res, fmt.Errorf("token: %w", err)
	}
	writer := bulk.New(db.Collection(store.CountsCollection), bulk.Options{}, log)
	p := pool.New().WithContext(ctx).WithCancelOnError()
	wctx, stopWriter := context.WithCancel(ctx)
	p.Go(func(context.Context) error { return writer.Run(wctx) })
	defer func() {
		stopWriter()
		_ = p.Wait()
	}()
	for _, ph := range []struct {
		name     string
		d        time.Duration // 0: skipped
		warm     bool          // the warm-up: kept apart, as res.Warm
		runaway  bool
		rps, lps float64
	}{
		{"warm-up", cfg.Warmup, true, false, cfg.TokenRPS, cfg.TokenLeavesPerS},
		{"alone", cfg.Duration, false, false, cfg.TokenRPS, cfg.TokenLeavesPerS},
		{"runaway, limits on", cfg.Duration, false, true, cfg.TokenRPS, cfg.TokenLeavesPerS},
		{"runaway, limits off", cfg.Duration, false, true, 0, 0},
	} {
		if ph.d == 0 {
			continue
		}
		srv := api.NewServer(api.Config{DB: db, Sink: writer, Logger: log,
			TokenRPS: app.APILimit(ph.rps), TokenLeavesPerSecond: app.APILimit(ph.lps), TokenBurst: cfg.TokenBurst})
		pcfg := cfg
		pcfg.Duration = ph.d
		r, err := runawayPhase(ctx, pcfg, srv, ph.runaway, normalTok, runawayTok)
		if err != nil {
			return res, fmt.Errorf("%s: %w", ph.name, err)
		}
		r.Name = ph.name
		if ph.warm {
			res.Warm = r
			continue
		}
		res.Phases = append(res.Phases, r)
	}
	return res, nil
}

// runawayPhase serves srv on a fresh listener for one phase and runs the agents.
func runawayPhase(ctx context.Context, cfg RunawayConfig, srv *api.Server, runaway bool, normalTok, runawayTok string) (RunawayPhase, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return RunawayPhase{}, fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	p := pool.New().WithContext(ctx)
	sctx, stopServer := context.WithCancel(ctx)
	p.Go(func(context.Context) error { return app.RunHTTP(sctx, hs, ln) })
	defer func() {
		stopServer()
		_ = p.Wait()
	}()
	url := "http://" + ln.Addr().String()
	out := RunawayPhase{Runaway: map[int]int{}}
	perWorker := int(cfg.Duration.Seconds() * float64(cfg.RunawayRate) / runawayWorkers)
	var bodies [runawayWorkers][][]byte
	if runaway {
		for w := range bodies {
			bodies[w] = runawayBodies(cfg, w, perWorker, time.Now())
		}
	}
	start := time.Now().Add(50 * time.Millisecond)
	end := start.Add(cfg.Duration)
	agents := pool.New()
	if runaway {
		var mu sync.Mutex
		for w := range runawayWorkers {
			agents.Go(func() {
				counts := sendRunaway(ctx, url, runawayTok, cfg, w, bodies[w], start, end)
				mu.Lock()
				for k, v := range counts {
					out.Runaway[k] += v
				}
				mu.Unlock()
			})
		}
	}
	agents.Go(func() { out.Normal, out.NormalFailed = sendNormal(ctx, url, normalTok, cfg, start, end) })
	agents.Wait()
	out.Elapsed = time.Since(start)
	slices.Sort(out.Normal)
	return out, ctx.Err()
}

// sendNormal submits NormalLeaves counts NormalRate times per second, each after the
// previous answer, and returns the latencies of the 200s.
func sendNormal(ctx context.Context, url, token string, cfg RunawayConfig, start, end time.Time) ([]time.Duration, int) {
	c := &agentclient.Client{BaseURL: url, Token: token, MaxAttempts: 1}
	counts := make([]agentclient.Count, cfg.NormalLeaves)
	for i := range counts {
		counts[i] = agentclient.Count{ID: fmt.Sprintf("normal-%05d", i), Type: "process", Online: int64(i)}
	}
	var lat []time.Duration
	failed := 0
	every := time.Second / time.Duration(cfg.NormalRate)
	for k := 0; ; k++ {
		at := start.Add(time.Duration(k) * every)
		if !at.Before(end) || !waitUntil(ctx, at) {
			return lat, failed
		}
		t0 := time.Now()
		_, err := c.Submit(ctx, agentclient.Submission{Project: "normal", Timestamp: tree.AlignTick(t0, tree.DefaultTick), Counts: counts})
		if err != nil {
			failed++
			continue
		}
		lat = append(lat, time.Since(t0))
	}
}

// runawayBodies prepares a runaway connection's requests (each a newer observation of its
// counts) before the measured window, as a load generator does, so that the runaway's own
// encoding does not take the shared cores from the server.
func runawayBodies(cfg RunawayConfig, worker, n int, start time.Time) [][]byte {
	type count struct {
		ID     string `json:"id"`
		Type   string `json:"type"`
		Online int64  `json:"online"`
	}
	counts := make([]count, cfg.RunawayLeaves)
	for i := range counts {
		counts[i] = count{ID: fmt.Sprintf("runaway-%02d-%05d", worker, i), Type: "process"}
	}
	bodies := make([][]byte, n)
	for k := range bodies {
		observed := start.Add(time.Duration(k) * time.Millisecond)
		for i := range counts {
			counts[i].Online = int64(k)
		}
		bodies[k], _ = json.Marshal(map[string]any{ // cannot fail: plain strings and numbers
			"project": "runaway", "timestamp": tree.AlignTick(start, tree.DefaultTick).Format(time.RFC3339),
			"observed_at": observed.Format(time.RFC3339Nano), "counts": counts, "submission_id": fmt.Sprintf("runaway-%d-%d", worker, k),
		})
	}
	return bodies
}

// sendRunaway is one of the runaway agent's connections: it sends bodies at
// RunawayRate/runawayWorkers requests per second on a fixed schedule until end (a late
// request is sent at once, not skipped), never retried; it returns the answers by status.
func sendRunaway(ctx context.Context, url, token string, cfg RunawayConfig, worker int, bodies [][]byte, start, end time.Time) map[int]int {
	hc := &http.Client{Timeout: 10 * time.Second}
	out := map[int]int{}
	every := time.Second * runawayWorkers / time.Duration(cfg.RunawayRate)
	offset := every * time.Duration(worker) / runawayWorkers
	for k, body := range bodies {
		if !time.Now().Before(end) || !waitUntil(ctx, start.Add(offset+time.Duration(k)*every)) {
			return out
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+apiv1.CountsPath, bytes.NewReader(body))
		if err != nil {
			out[0]++
			continue
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := hc.Do(req)
		if err != nil {
			out[0]++
			continue
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		out[res.StatusCode]++
	}
	return out
}

// waitUntil waits until t (pacing a load generator); false when ctx ended first.
func waitUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

// quantile returns the q-quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Print writes the result as the command prints it.
func (r RunawayResult) Print(w io.Writer) {
	c := r.cfg
	_, _ = fmt.Fprintf(w, "normal agent: %d req/s x %d counts; runaway agent (another project): %d req/s x %d counts on %d connections; %s per phase\n",
		c.NormalRate, c.NormalLeaves, c.RunawayRate, c.RunawayLeaves, runawayWorkers, c.Duration)
	burst := c.TokenBurst
	if burst == 0 {
		burst = api.LimitBurst
	}
	_, _ = fmt.Fprintf(w, "limits on: --token-rps %g --token-leaves-per-s %g (0 = off) --token-burst %s; --warmup %s alone first, not reported\n", c.TokenRPS, c.TokenLeavesPerS, burst, c.Warmup)
	_, _ = fmt.Fprintf(w, "%-22s %8s %8s %8s %8s %8s %8s  %s\n", "phase", "normal n", "p50", "p99", "max", "p99 x", "took", "runaway answers")
	var base time.Duration
	for i, ph := range r.Phases {
		p99 := quantile(ph.Normal, 0.99)
		if i == 0 {
			base = p99
		}
		ratio := "-"
		if base > 0 && i > 0 {
			ratio = fmt.Sprintf("%.2f", float64(p99)/float64(base))
		}
		var answers []string
		for _, st := range slices.Sorted(maps.Keys(ph.Runaway)) {
			answers = append(answers, fmt.Sprintf("%d: %d", st, ph.Runaway[st]))
		}
		failed := ""
		if ph.NormalFailed > 0 {
			failed = fmt.Sprintf(" (%d failed)", ph.NormalFailed)
		}
		_, _ = fmt.Fprintf(w, "%-22s %8s %8s %8s %8s %8s %8s  %v\n", ph.Name, fmt.Sprint(len(ph.Normal))+failed,
			round(quantile(ph.Normal, 0.5)), round(p99), round(quantile(ph.Normal, 1)), ratio, ph.Elapsed.Round(100*time.Millisecond), answers)
	}
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
