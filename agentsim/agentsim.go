package agentsim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sourcegraph/conc/pool"
	"go.uber.org/zap"

	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/tree"
)

// Leaf is one leaf node an agent reports.
type Leaf struct {
	ID, Type string
}

// LeavesOf returns the leaves of t, in the tree's order.
func LeavesOf(t *tree.Tree) []Leaf {
	nodes := t.Leaves()
	leaves := make([]Leaf, len(nodes))
	for i, n := range nodes {
		leaves[i] = Leaf{ID: n.ID, Type: n.Type}
	}
	return leaves
}

// Config configures a simulation.
type Config struct {
	// Client submits the counts (shared by all agents; it is safe for concurrent use).
	Client *agentclient.Client
	// Project is the project whose leaves are reported.
	Project string
	// Leaves are split evenly among the agents.
	Leaves []Leaf
	// Agents is the number of simulated agents (default 10).
	Agents int
	// Tick is the reporting period (default tree.DefaultTick).
	Tick time.Duration
	// Refresh re-submits the current tick with a newer observation this often, so a demo
	// moves between ticks (0: once per tick, as real agents do).
	Refresh time.Duration
	// Backfill submits this many past ticks at start, so charts have history.
	Backfill int
	// Jitter spreads each agent's submission over this window after the tick
	// (default: agentclient.StartJitter's choice for Tick).
	Jitter time.Duration
	// Seed makes the counts reproducible.
	Seed uint64
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives one line per failed submission (default no-op).
	Logger *zap.Logger
}

// Sim is a running set of simulated agents.
type Sim struct {
	cfg Config
}

// New returns a simulation; Run starts it.
func New(cfg Config) *Sim {
	if cfg.Agents <= 0 {
		cfg.Agents = 10
	}
	if cfg.Agents > len(cfg.Leaves) && len(cfg.Leaves) > 0 {
		cfg.Agents = len(cfg.Leaves)
	}
	if cfg.Tick <= 0 {
		cfg.Tick = tree.DefaultTick
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Sim{cfg: cfg}
}

// Run backfills, then submits every tick (and every Refresh) until ctx is done. Failed
// submissions are logged and skipped, as an agent would; Run returns nil when ctx ends.
func (s *Sim) Run(ctx context.Context) error {
	now := s.cfg.Now()
	cur := tree.AlignTick(now, s.cfg.Tick)
	for i := s.cfg.Backfill; i >= 1; i-- {
		tick := cur.Add(-time.Duration(i) * s.cfg.Tick)
		s.logErr(s.SubmitTick(ctx, tick, tick.Add(s.cfg.Tick-time.Second), 0))
	}
	s.logErr(s.SubmitTick(ctx, cur, now, s.jitter()))
	period := s.cfg.Tick
	if s.cfg.Refresh > 0 && s.cfg.Refresh < period {
		period = s.cfg.Refresh
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now := s.cfg.Now()
		s.logErr(s.SubmitTick(ctx, tree.AlignTick(now, s.cfg.Tick), now, s.jitter()))
	}
}

func (s *Sim) jitter() time.Duration {
	if s.cfg.Jitter > 0 {
		return s.cfg.Jitter
	}
	return agentclient.StartJitter(s.cfg.Tick)
}

func (s *Sim) logErr(err error) {
	if err != nil && !isCtxErr(err) {
		s.cfg.Logger.Warn("simulated submission failed", zap.Error(err))
	}
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// MaxInFlight is how many agents' submissions SubmitTick keeps in flight at most.
const MaxInFlight = 256

// SubmitTick makes every agent submit its leaves' counts for tick, observed at observed.
// Each agent waits a random delay in [0, jitter) first; at most MaxInFlight submissions are
// in flight. It returns the first error.
func (s *Sim) SubmitTick(ctx context.Context, tick, observed time.Time, jitter time.Duration) error {
	p := pool.New().WithErrors().WithContext(ctx).WithMaxGoroutines(min(s.cfg.Agents, MaxInFlight))
	n := len(s.cfg.Leaves)
	for a := range s.cfg.Agents {
		if a*n/s.cfg.Agents == (a+1)*n/s.cfg.Agents {
			continue
		}
		p.Go(func(ctx context.Context) error {
			if jitter > 0 {
				d := time.Duration(hash64(s.cfg.Seed, uint64(a), uint64(tick.Unix())) % uint64(jitter))
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-t.C:
				}
			}
			counts := AgentCounts(s.cfg.Leaves, s.cfg.Agents, a, s.cfg.Seed, observed)
			_, err := s.cfg.Client.Submit(ctx, agentclient.Submission{
				Project: s.cfg.Project, Timestamp: tick, ObservedAt: observed, Counts: counts,
			})
			if err != nil {
				return fmt.Errorf("agent %d tick %s: %w", a, tick.Format(time.RFC3339), err)
			}
			return nil
		})
	}
	return p.Wait()
}

// AgentCounts is what agent a of agents reports at observed: its even share of leaves (agent a
// owns leaves[a*n/agents : (a+1)*n/agents]), each with its Online count.
func AgentCounts(leaves []Leaf, agents, a int, seed uint64, observed time.Time) []agentclient.Count {
	n := len(leaves)
	lo, hi := a*n/agents, (a+1)*n/agents
	counts := make([]agentclient.Count, 0, hi-lo)
	for i := lo; i < hi; i++ {
		counts = append(counts, agentclient.Count{ID: leaves[i].ID, Type: leaves[i].Type, Online: Online(seed, i, observed)})
	}
	return counts
}

// Online is the simulated count of leaf i at time t: a daily curve (peak in the evening UTC),
// a per-leaf size and a little noise that changes every minute. Deterministic in its inputs.
func Online(seed uint64, i int, t time.Time) int64 {
	day := float64(t.UTC().Hour()*60+t.UTC().Minute()) / (24 * 60)
	curve := 0.55 + 0.45*math.Sin(2*math.Pi*(day-0.55))
	size := 20 + float64(hash64(seed, uint64(i), 0)%80)
	noise := float64(hash64(seed, uint64(i), uint64(t.Unix()/60))%11) - 5
	return max(0, int64(size*curve+noise))
}

// hash64 mixes its inputs (splitmix64), for reproducible pseudo-randomness without state.
func hash64(a, b, c uint64) uint64 {
	x := a*0x9E3779B97F4A7C15 ^ b*0xBF58476D1CE4E5B9 ^ c*0x94D049BB133111EB
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}
