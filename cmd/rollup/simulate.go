package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/gameops/rollup/agentsim"
	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/metrics"
	"github.com/gameops/rollup/tree"
)

const simulateUsage = `usage: rollup simulate --url URL (--token T | --token-file F) --project P
                       (--tree FILE | --generate GROUPS,SERVERS,PROCESSES) [flags]

Run simulated game agents against a rollup API until interrupted: every tick each agent
submits the online counts of its share of the tree's leaves (POST /v1/counts), as a real
agent does. Counts follow a daily curve with noise, reproducible from --seed. The leaves come
from a tree file (as 'rollup tree import' reads; the project must have that tree) or from
--generate, which builds the tree 'rollup serve --demo' uses: ids g01, g01-s0001,
g01-s0001-p01, types group, server, process. Failed submissions are logged and skipped.

Examples:
  rollup simulate --url http://127.0.0.1:8080 --token "$TOKEN" --project mygame --tree mygame.yaml
  rollup simulate --url http://rollup:8080 --token-file /var/lib/rollup/tokens/demo \
    --project demo --generate 4,5,10 --agents 20 --backfill 36

Flags:
`

// simulateConfig is the parsed command line of rollup simulate.
type simulateConfig struct {
	url, token, tokenFile string
	caFile                string
	project, treeFile     string
	generate              [3]int // groups, servers, processes; all 0: not given
	agents, backfill      int
	refresh, jitter, wait time.Duration
	seed                  uint64
	logLevel              string
}

// parseSimulate parses simulate's settings from args, the environment and the --config file.
func parseSimulate(e *env, args []string) (simulateConfig, error) {
	var c simulateConfig
	var generate string
	fs := e.flags("simulate", simulateUsage)
	fs.StringVar(&c.url, "url", "", "base URL of the rollup API (http:// or https://)")
	fs.StringVar(&c.caFile, "ca-file", "", "PEM file of the CA that signed the server's certificate, trusted in addition to the system's (SSL_CERT_FILE replaces those)")
	fs.StringVar(&c.token, "token", "", "the project's bearer token (ROLLUP_TOKEN keeps it out of the process list)")
	fs.StringVar(&c.tokenFile, "token-file", "", "file holding the token (as 'rollup token create' prints it)")
	fs.StringVar(&c.project, "project", "", "project (with --tree: defaults to the file's)")
	fs.StringVar(&c.treeFile, "tree", "", "tree file (YAML or JSON) whose leaves the agents report")
	fs.StringVar(&generate, "generate", "", "GROUPS,SERVERS,PROCESSES: report the leaves of a generated tree instead of --tree")
	fs.IntVar(&c.agents, "agents", 10, "simulated agents (the leaves are split evenly among them)")
	fs.IntVar(&c.backfill, "backfill", 12, "past ticks submitted at start, so charts have history")
	fs.DurationVar(&c.refresh, "refresh", 15*time.Second, "re-submit the current tick this often with newer counts (0: once per tick)")
	fs.DurationVar(&c.jitter, "jitter", 0, "spread each tick's submissions over this window (0: a tenth of the tick)")
	fs.DurationVar(&c.wait, "wait", 2*time.Minute, "wait this long for the API to answer before starting (0: do not wait)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the simulated counts")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	if err := e.parse(fs, args); err != nil {
		return c, err
	}
	if generate != "" {
		var err error
		if c.generate, err = parseGenerate(generate); err != nil {
			return c, fs.Errorf("generate", "%w", err)
		}
	}
	switch {
	case c.url == "":
		return c, fs.Errorf("url", "is required: the base URL of a rollup API, such as http://127.0.0.1:8080")
	case !strings.HasPrefix(c.url, "http://") && !strings.HasPrefix(c.url, "https://"):
		return c, fs.Errorf("url", "want an http:// or https:// URL")
	case c.token == "" && c.tokenFile == "":
		return c, fs.Errorf("token", "is required (or --token-file)")
	case c.token != "" && c.tokenFile != "":
		return c, fmt.Errorf("--token (from %s) and --token-file (from %s) exclude each other", fs.Source("token"), fs.Source("token-file"))
	case (c.treeFile == "") == (generate == ""):
		return c, errors.New("give the leaves with exactly one of --tree FILE and --generate GROUPS,SERVERS,PROCESSES")
	case generate != "" && c.project == "":
		return c, fs.Errorf("project", "is required with --generate")
	case c.agents < 1:
		return c, fs.Errorf("agents", "must be at least 1, got %d", c.agents)
	case c.backfill < 0:
		return c, fs.Errorf("backfill", "must not be negative, got %d", c.backfill)
	case c.refresh < 0:
		return c, fs.Errorf("refresh", "must not be negative")
	case c.jitter < 0:
		return c, fs.Errorf("jitter", "must not be negative")
	case c.wait < 0:
		return c, fs.Errorf("wait", "must not be negative")
	}
	return c, nil
}

// parseGenerate parses GROUPS,SERVERS,PROCESSES: three positive counts.
func parseGenerate(s string) ([3]int, error) {
	var out [3]int
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return out, fmt.Errorf("want GROUPS,SERVERS,PROCESSES such as 4,5,10, got %q", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || n > 1_000_000 {
			return out, fmt.Errorf("want three counts from 1 to 1000000 such as 4,5,10, got %q", s)
		}
		out[i] = n
	}
	if out[0]*out[1]*out[2] > 10_000_000 {
		return out, fmt.Errorf("%q makes more than 10,000,000 leaves", s)
	}
	return out, nil
}

// simulateLeaves returns the project and its leaves, from the tree file or generated.
func simulateLeaves(c simulateConfig) (string, []agentsim.Leaf, error) {
	var t *tree.Tree
	var err error
	if c.treeFile != "" {
		t, err = tree.ReadFile(c.treeFile, c.project)
	} else {
		t, err = tree.Build(c.project, tree.Generate(c.project, c.generate[0], c.generate[1], c.generate[2]))
	}
	if err != nil {
		return "", nil, err
	}
	return t.Project(), agentsim.LeavesOf(t), nil
}

func runSimulate(ctx context.Context, e *env, args []string) error {
	c, err := parseSimulate(e, args)
	if err != nil {
		return usageError(err)
	}
	return simulate(ctx, e, c)
}

// simulate runs the agents of c until ctx is done.
func simulate(ctx context.Context, e *env, c simulateConfig) error {
	log, err := metrics.NewLogger(c.logLevel, false, e.stderr)
	if err != nil {
		return fmt.Errorf("%w: --log-level: %w", errUsage, err)
	}
	defer func() { _ = log.Sync() }()
	token := c.token
	if c.tokenFile != "" {
		if token, err = agentclient.ReadTokenFile(c.tokenFile); err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
	}
	project, leaves, err := simulateLeaves(c)
	if err != nil {
		return err
	}
	hc, err := agentclient.NewHTTPClient(c.caFile)
	if err != nil {
		return fmt.Errorf("--ca-file: %w", err)
	}
	if err := agentclient.WaitForAPI(ctx, hc, c.url, c.wait); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("--wait: %w", err)
	}
	log.Info("simulating agents", zap.String("url", c.url), zap.String("project", project),
		zap.Int("agents", min(c.agents, len(leaves))), zap.Int("leaves", len(leaves)), zap.Int("backfill", c.backfill))
	sim := agentsim.New(agentsim.Config{
		Client:   &agentclient.Client{BaseURL: c.url, Token: token, HTTP: hc, Logger: log.Named("client")},
		Project:  project,
		Leaves:   leaves,
		Agents:   c.agents,
		Refresh:  c.refresh,
		Backfill: c.backfill,
		Jitter:   c.jitter,
		Seed:     c.seed,
		Logger:   log.Named("agents"),
	})
	return sim.Run(ctx)
}
