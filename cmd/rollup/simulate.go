package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/gameops/rollup/agentsim"
	"github.com/gameops/rollup/api/agentclient"
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
	project, treeFile     string
	generate              [3]int // groups, servers, processes; all 0: not given
	agents, backfill      int
	refresh, jitter, wait time.Duration
	seed                  uint64
	logLevel              string
}

func parseSimulate(e *env, args []string) (simulateConfig, error) {
	return parseSimulateEnv(e, args, os.LookupEnv)
}

// parseSimulateEnv parses simulate's settings from args, lookupEnv and the --config file.
func parseSimulateEnv(e *env, args []string, lookupEnv func(string) (string, bool)) (simulateConfig, error) {
	var c simulateConfig
	var generate string
	fs := newConfigFlagSet(e, "simulate", simulateUsage)
	fs.StringVar(&c.url, "url", "", "base URL of the rollup API (env ROLLUP_URL)")
	fs.StringVar(&c.token, "token", "", "the project's bearer token (env ROLLUP_TOKEN keeps it out of the process list)")
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
	s, err := parseConfigFlags(fs, args, lookupEnv)
	if err != nil {
		return c, err
	}
	if generate != "" {
		if c.generate, err = parseGenerate(generate); err != nil {
			return c, s.errorf("generate", "%w", err)
		}
	}
	switch {
	case c.url == "":
		return c, s.errorf("url", "is required: the base URL of a rollup API, such as http://127.0.0.1:8080")
	case !strings.HasPrefix(c.url, "http://") && !strings.HasPrefix(c.url, "https://"):
		return c, s.errorf("url", "want an http:// or https:// URL")
	case c.token == "" && c.tokenFile == "":
		return c, s.errorf("token", "is required (or --token-file)")
	case c.token != "" && c.tokenFile != "":
		return c, fmt.Errorf("--token (from %s) and --token-file (from %s) exclude each other", s.source("token"), s.source("token-file"))
	case (c.treeFile == "") == (generate == ""):
		return c, errors.New("give the leaves with exactly one of --tree FILE and --generate GROUPS,SERVERS,PROCESSES")
	case generate != "" && c.project == "":
		return c, s.errorf("project", "is required with --generate")
	case c.agents < 1:
		return c, s.errorf("agents", "must be at least 1, got %d", c.agents)
	case c.backfill < 0:
		return c, s.errorf("backfill", "must not be negative, got %d", c.backfill)
	case c.refresh < 0:
		return c, s.errorf("refresh", "must not be negative")
	case c.jitter < 0:
		return c, s.errorf("jitter", "must not be negative")
	case c.wait < 0:
		return c, s.errorf("wait", "must not be negative")
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
		t, err = readTreeFile(c.treeFile, c.project)
	} else {
		t, err = tree.Build(c.project, tree.Generate(c.project, c.generate[0], c.generate[1], c.generate[2]))
	}
	if err != nil {
		return "", nil, err
	}
	nodes := t.Leaves()
	leaves := make([]agentsim.Leaf, len(nodes))
	for i, n := range nodes {
		leaves[i] = agentsim.Leaf{ID: n.ID, Type: n.Type}
	}
	return t.Project(), leaves, nil
}

// readTokenFile reads a token file: the token and surrounding white space.
func readTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("--token-file %s: want one token, as 'rollup token create' prints it", path)
	}
	return tok, nil
}

// waitForAPI polls the API's base URL until it answers anything, for at most d.
func waitForAPI(ctx context.Context, baseURL string, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	hc := &http.Client{Timeout: 5 * time.Second}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+"/", nil)
		if err != nil {
			return fmt.Errorf("--url: %w", err)
		}
		res, err := hc.Do(req)
		if err == nil {
			_ = res.Body.Close()
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("the API at %s did not answer within --wait %s: %w", baseURL, d, last)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
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
	log, err := newLogger(c.logLevel, e.stderr)
	if err != nil {
		return fmt.Errorf("%w: --log-level: %w", errUsage, err)
	}
	defer func() { _ = log.Sync() }()
	token := c.token
	if c.tokenFile != "" {
		if token, err = readTokenFile(c.tokenFile); err != nil {
			return err
		}
	}
	project, leaves, err := simulateLeaves(c)
	if err != nil {
		return err
	}
	if err := waitForAPI(ctx, c.url, c.wait); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	log.Info("simulating agents", zap.String("url", c.url), zap.String("project", project),
		zap.Int("agents", min(c.agents, len(leaves))), zap.Int("leaves", len(leaves)), zap.Int("backfill", c.backfill))
	sim := agentsim.New(agentsim.Config{
		Client:   &agentclient.Client{BaseURL: c.url, Token: token, Logger: log.Named("client")},
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
