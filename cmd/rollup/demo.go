package main

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/agentsim"
	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/tree"
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
}

func setupDemo(ctx context.Context, db *mongo.Database, baseURL string, agents int, log *zap.Logger) (*demo, error) {
	t, err := tree.Build(demoProject, tree.Generate(demoProject, demoGroups, demoServers, demoProcesses))
	if err != nil {
		return nil, fmt.Errorf("demo tree: %w", err)
	}
	token, err := api.CreateToken(ctx, db, demoProject, "demo")
	if err != nil {
		return nil, fmt.Errorf("demo token: %w", err)
	}
	var leaves []agentsim.Leaf
	for _, n := range t.Leaves() {
		leaves = append(leaves, agentsim.Leaf{ID: n.ID, Type: n.Type})
	}
	sim := agentsim.New(agentsim.Config{
		Client:   &agentclient.Client{BaseURL: baseURL, Token: token, Logger: log},
		Project:  demoProject,
		Leaves:   leaves,
		Agents:   agents,
		Refresh:  15 * time.Second,
		Backfill: 36, // three hours of history for the charts
		Jitter:   2 * time.Second,
		Seed:     1,
		Logger:   log,
	})
	return &demo{project: demoProject, token: token, tree: t, sim: sim}, nil
}

// Run runs the simulated agents until ctx is done.
func (d *demo) Run(ctx context.Context) error { return d.sim.Run(ctx) }
