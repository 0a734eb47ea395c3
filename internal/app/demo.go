package app

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/agentsim"
	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// Shape of the demo project's service tree: 1 root → 4 groups → 5 servers each → 10
// processes each (200 leaves).
const (
	demoProject   = "demo"
	demoGroups    = 4
	demoServers   = 5
	demoProcesses = 10
)

// demo is the --demo setup: a project, its token, its tree and simulated agents.
type demo struct {
	project string
	token   string
	tree    *tree.Tree
	sim     *agentsim.Sim
	// viaAgent runs the simulated agents through package agent (spool and all): see
	// runViaAgent.
	viaAgent bool
	// hc sends the agents' requests (nil: agentclient's default client).
	hc       *http.Client
	agents   int
	backfill int
	baseURL  string
	log      *zap.Logger
}

// DefaultDemoBackfill is how many past ticks the demo agents report at start by default
// (three hours of history for the charts).
const DefaultDemoBackfill = 36

// maxDemoBackfill bounds --demo-backfill: a day of ticks.
const maxDemoBackfill = 288

// demoOptions are serve's --demo settings.
type demoOptions struct {
	agents   int  // --demo-agents
	backfill int  // --demo-backfill: past ticks reported at start
	viaAgent bool // --demo-agent
}

// setupDemo imports the demo tree, creates its token and the simulated agents, which send
// to baseURL with hc (nil: agentclient's default client).
func setupDemo(ctx context.Context, db *mongo.Database, trees *treedb.Store, baseURL string, hc *http.Client, o demoOptions, log *zap.Logger) (*demo, error) {
	nodes := tree.Generate(demoProject, demoGroups, demoServers, demoProcesses)
	t, err := tree.Build(demoProject, nodes)
	if err != nil {
		return nil, fmt.Errorf("demo tree: %w", err)
	}
	// The tree applies from the first backfilled tick on, unless the project already has one
	// (a durable demo store started again).
	if _, _, ok, err := trees.VersionAt(ctx, demoProject, time.Now()); err != nil {
		return nil, fmt.Errorf("demo tree: %w", err)
	} else if !ok {
		first := tree.AlignTick(time.Now(), tree.DefaultTick).Add(-time.Duration(o.backfill) * tree.DefaultTick)
		if _, err := trees.Import(ctx, demoProject, nodes, first); err != nil {
			return nil, fmt.Errorf("import demo tree: %w", err)
		}
	}
	token, err := api.CreateToken(ctx, db, demoProject, "demo")
	if err != nil {
		return nil, fmt.Errorf("demo token: %w", err)
	}
	sim := agentsim.New(agentsim.Config{
		Client:   &agentclient.Client{BaseURL: baseURL, Token: token, HTTP: hc, Logger: log},
		Project:  demoProject,
		Leaves:   agentsim.LeavesOf(t),
		Agents:   o.agents,
		Refresh:  15 * time.Second,
		Backfill: o.backfill,
		Jitter:   2 * time.Second,
		Seed:     1,
		Logger:   log,
	})
	return &demo{project: demoProject, token: token, tree: t, sim: sim, viaAgent: o.viaAgent, hc: hc, agents: o.agents,
		backfill: o.backfill, baseURL: baseURL, log: log}, nil
}

// Run runs the simulated agents until ctx is done.
func (d *demo) Run(ctx context.Context) error {
	if d.viaAgent {
		return d.runViaAgent(ctx)
	}
	return d.sim.Run(ctx)
}
