package main

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/internal/ops"
)

const tokenUsage = `usage: rollup token create --project P [--name N] [--read-only] [flags]
       rollup token list --project P [flags]

Manage the per-project bearer tokens agents send to POST /v1/counts and dashboards send to
the read API (GET /v1/projects/...).
'create' creates the project if needed and a new token, and prints the token once on stdout:
only its sha256 is stored, so it cannot be shown again. A token may submit counts and read
the project; with --read-only it may only read it (POST /v1/counts answers 403). 'list' shows
a project's tokens (id = the first 12 hex digits of the token's sha256, name, scope, creation
time), never the tokens.

Examples:
  TOKEN=$(rollup token create --project mygame --name eu-agents --mongodb-uri 'mongodb://db1/?replicaSet=rs0')
  rollup token create --project mygame --name dashboard --read-only --mongodb-uri 'mongodb://db1/?replicaSet=rs0'
  ROLLUP_MONGODB_URI='mongodb://db1/?replicaSet=rs0' rollup token list --project mygame

Flags:
`

// tokenConfig is the parsed command line of rollup token.
type tokenConfig struct {
	sub      string
	store    storeFlags
	project  string
	name     string
	readOnly bool
}

// parseToken parses "token <create|list> [flags]"; flags may also come before the subcommand.
func parseToken(e *env, args []string) (tokenConfig, error) {
	var c tokenConfig
	fs := e.flags("token", tokenUsage)
	c.store.register(fs)
	fs.StringVar(&c.project, "project", "", "project name (1-128 bytes of A-Z a-z 0-9 _ : -)")
	fs.StringVar(&c.name, "name", "", "create: a label for the token (default \""+api.DefaultTokenName+"\")")
	fs.BoolVar(&c.readOnly, "read-only", false, "create: a token that may only read the project (the read API), not submit counts")
	pos, err := e.parseArgs(fs, args)
	switch {
	case err != nil:
		return c, err
	case len(pos) == 0:
		fs.Usage()
		return c, errors.New("a subcommand is required: create or list")
	}
	c.sub = pos[0]
	switch {
	case len(pos) > 1:
		return c, fmt.Errorf("unexpected argument %q", pos[1])
	case c.sub != "create" && c.sub != "list":
		fs.Usage()
		return c, fmt.Errorf("unknown subcommand %q: want create or list", c.sub)
	case c.project == "":
		return c, errors.New("--project is required")
	case c.sub == "list" && c.name != "":
		return c, errors.New("--name is for 'token create'")
	case c.sub == "list" && c.readOnly:
		return c, errors.New("--read-only is for 'token create'")
	}
	return c, c.store.required(fs, "tokens live in the MongoDB deployment: pass --mongodb-uri (or set ROLLUP_MONGODB_URI); "+
		"'rollup serve --demo' prints a demo token")
}

func runToken(ctx context.Context, e *env, args []string) error {
	c, err := parseToken(e, args)
	if err != nil {
		return usageError(err)
	}
	return c.store.withDB(ctx, func(db *mongo.Database) error {
		if c.sub == "create" {
			return ops.CreateToken(ctx, e.stdout, e.stderr, db, c.project, c.name, c.readOnly)
		}
		return ops.ListTokens(ctx, e.stdout, db, c.project)
	})
}
