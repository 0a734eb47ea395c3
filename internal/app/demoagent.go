package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sourcegraph/conc/pool"
	"go.uber.org/zap"

	"github.com/gameops/rollup/agent"
	"github.com/gameops/rollup/agentsim"
	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/tree"
)

// demoAgentInterval is how often a --demo-agent agent samples: the demo moves between ticks,
// as agentsim's Refresh makes it.
const demoAgentInterval = 15 * time.Second

// demoSource is an agent.Source over agentsim's counts: agent a of n reads its share of the
// demo's leaves (agentsim.AgentCounts' split).
type demoSource struct {
	name      string
	leaves    []agentsim.Leaf
	agents, a int
	seed      uint64
	ids       []string
}

func (s *demoSource) Name() string     { return s.name }
func (s *demoSource) Leaves() []string { return s.ids }

func (s *demoSource) Read(_ context.Context, now time.Time) (agent.Values, error) {
	v := agent.Values{Online: map[string]int64{}}
	for _, c := range agentsim.AgentCounts(s.leaves, s.agents, s.a, s.seed, now) {
		v.Online[c.ID] = c.Online
	}
	return v, nil
}

// runViaAgent runs the demo's agents through package agent until ctx is done: each agent has
// its share of the leaves, a spool in a temporary directory (removed at the end) and the
// demo's backfill already spooled, so its first send drains three hours of ticks oldest
// first, as an agent does after an outage.
func (d *demo) runViaAgent(ctx context.Context) error {
	leaves := agentsim.LeavesOf(d.tree)
	n := min(max(d.agents, 1), len(leaves))
	dir, err := os.MkdirTemp("", "rollup-demo-agent-")
	if err != nil {
		return fmt.Errorf("demo agent spool: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	now := time.Now()
	cur := tree.AlignTick(now, tree.DefaultTick)
	p := pool.New().WithErrors().WithContext(ctx)
	for a := range n {
		src := &demoSource{name: fmt.Sprintf("demo-%02d", a), leaves: leaves, agents: n, a: a, seed: 1}
		for _, c := range agentsim.AgentCounts(leaves, n, a, 1, now) {
			src.ids = append(src.ids, c.ID)
		}
		spool, err := agent.OpenSpool(filepath.Join(dir, src.name), 16<<20, d.log)
		if err != nil {
			return err
		}
		for i := d.backfill; i >= 1; i-- {
			tick := cur.Add(-time.Duration(i) * tree.DefaultTick)
			observed := tick.Add(tree.DefaultTick - time.Second)
			if _, err := spool.Append(agent.Record{Project: d.project, Timestamp: tick, ObservedAt: observed,
				SubmissionID: agentclient.NewSubmissionID(), Counts: agentsim.AgentCounts(leaves, n, a, 1, observed)}); err != nil {
				return fmt.Errorf("demo agent backfill: %w", err)
			}
		}
		ag := agent.New(agent.Options{
			Spool:  spool,
			Logger: d.log.Named(src.name),
			Settings: agent.Settings{
				Client:  &agentclient.Client{BaseURL: d.baseURL, Token: d.token, HTTP: d.hc, MaxAttempts: 1, Logger: d.log},
				Project: d.project, Tick: tree.DefaultTick, Interval: demoAgentInterval, Window: agent.DefaultWindow,
				Sources: []agent.Source{src}, Types: map[string]string{src.name: leaves[0].Type},
			},
		})
		p.Go(ag.Run)
	}
	d.log.Info("demo agents run through package agent", zap.Int("agents", n), zap.String("spool", dir))
	return p.Wait()
}
