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
	hc      *http.Client
	agents  int
	baseURL string
	log     *zap.Logger
}

// demoBackfill is how many past ticks the demo agents report at start (three hours).
const demoBackfill = 36

// setupDemo imports the demo tree, creates its token and the simulated agents, which send
// to baseURL with hc (nil: agentclient's default client).
func setupDemo(ctx context.Context, db *mongo.Database, trees *treedb.Store, baseURL string, hc *http.Client, agents int, viaAgent bool, log *zap.Logger) (*demo, error) {
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
		first := tree.AlignTick(time.Now(), tree.DefaultTick).Add(-demoBackfill * tree.DefaultTick)
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
		Agents:   agents,
		Refresh:  15 * time.Second,
		Backfill: demoBackfill,
		Jitter:   2 * time.Second,
		Seed:     1,
		Logger:   log,
	})
	return &demo{project: demoProject, token: token, tree: t, sim: sim, viaAgent: viaAgent, hc: hc, agents: agents, baseURL: baseURL, log: log}, nil
}

// Run runs the simulated agents until ctx is done.
func (d *demo) Run(ctx context.Context) error {
	if d.viaAgent {
		return d.runViaAgent(ctx)
	}
	return d.sim.Run(ctx)
}
