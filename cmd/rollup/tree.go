package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/internal/ops"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

const treeUsage = `usage: rollup tree import FILE [--project P] [--effective RFC3339] [flags]
       rollup tree show --project P [--version N | --at RFC3339] [--json] [flags]
       rollup tree validate FILE [--project P]

Manage the versions of a project's service hierarchy (root → groups → servers → processes).
FILE is YAML or JSON (by extension, else by content), nested:
    project: demo
    root: {id: demo, type: project, children: [{id: g01, type: group, children: [...]}]}
or flat:
    project: demo
    nodes: [{id: demo, type: project}, {id: g01, type: group, parent: demo}, ...]
'import' validates the file and stores it as the project's next version, effective from the
tick starting at --effective (rounded up to a tick start; default: the next tick start), so
rollups of earlier ticks keep the tree they were computed with. 'show' prints a version as an
indented outline (default: the latest version; --at: the version in effect at that time;
--json: a nested file 'import' reads back). 'validate' checks a file without a store.

Examples:
  rollup tree validate demo.yaml
  rollup tree import demo.yaml --mongodb-uri 'mongodb://db1/?replicaSet=rs0'
  ROLLUP_MONGODB_URI='mongodb://db1/?replicaSet=rs0' rollup tree show --project demo --at 2024-05-01T10:05:00Z

Flags:
`

// treeConfig is the parsed command line of rollup tree.
type treeConfig struct {
	sub       string
	file      string
	project   string
	effective time.Time // zero: the next tick start
	version   int       // 0: not given
	at        time.Time // zero: not given
	json      bool
	store     storeFlags
}

// parseTree parses "tree <import|show|validate> [FILE] [flags]"; flags may come anywhere.
func parseTree(e *env, args []string) (treeConfig, error) {
	var c treeConfig
	var effective, at string
	fs := e.flags("tree", treeUsage)
	fs.StringVar(&c.project, "project", "", "project (import, validate: overrides a file without one; show: required)")
	fs.StringVar(&effective, "effective", "", "import: first tick (RFC3339, rounded up to a tick start) the version applies to; default: the next tick")
	fs.IntVar(&c.version, "version", 0, "show: the version to print")
	fs.StringVar(&at, "at", "", "show: print the version in effect at this time (RFC3339)")
	fs.BoolVar(&c.json, "json", false, "show: print JSON (nested layout) instead of an outline")
	c.store.register(fs)
	pos, err := e.parseArgs(fs, args)
	if err != nil {
		return c, err
	}
	if len(pos) == 0 {
		fs.Usage()
		return c, errors.New("a subcommand is required: import, show or validate")
	}
	c.sub = pos[0]
	switch c.sub {
	case "import", "validate":
		if len(pos) != 2 {
			return c, fmt.Errorf("'tree %s' takes one FILE, got %d arguments", c.sub, len(pos)-1)
		}
		c.file = pos[1]
	case "show":
		if len(pos) != 1 {
			return c, fmt.Errorf("unexpected argument %q", pos[1])
		}
	default:
		fs.Usage()
		return c, fmt.Errorf("unknown subcommand %q: want import, show or validate", c.sub)
	}
	if effective != "" {
		if c.sub != "import" {
			return c, errors.New("--effective is for 'tree import'")
		}
		if c.effective, err = parseTime("effective", effective); err != nil {
			return c, err
		}
	}
	if at != "" {
		if c.at, err = parseTime("at", at); err != nil {
			return c, err
		}
	}
	switch {
	case c.sub != "show" && (c.version != 0 || at != "" || c.json):
		return c, errors.New("--version, --at and --json are for 'tree show'")
	case c.sub == "show" && c.project == "":
		return c, errors.New("'tree show' needs --project")
	case c.version < 0:
		return c, errors.New("--version must be positive")
	case c.version != 0 && at != "":
		return c, errors.New("--version and --at exclude each other")
	case c.sub == "validate":
		return c, nil // a file alone: no deployment
	}
	return c, c.store.required(fs, "tree versions live in a MongoDB deployment: pass --mongodb-uri (or set ROLLUP_MONGODB_URI); "+
		"'rollup tree validate FILE' checks a file without one")
}

func runTree(ctx context.Context, e *env, args []string) error {
	c, err := parseTree(e, args)
	if err != nil {
		return usageError(err)
	}
	if c.sub == "show" {
		q := ops.ShowTree{Project: c.project, Version: c.version, At: c.at, JSON: c.json}
		return c.store.withDB(ctx, func(db *mongo.Database) error { return q.Show(ctx, e.stdout, treedb.New(db)) })
	}
	t, err := tree.ReadFile(c.file, c.project)
	if err != nil || c.sub == "validate" {
		if err == nil {
			err = ops.ValidTree(e.stdout, c.file, t)
		}
		return err
	}
	return c.store.withDB(ctx, func(db *mongo.Database) error { return ops.ImportTree(ctx, e.stdout, treedb.New(db), t, c.effective) })
}
