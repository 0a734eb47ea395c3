package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/api"
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
	fs := newFlagSet(e, "token", tokenUsage)
	c.store.register(fs)
	fs.StringVar(&c.project, "project", "", "project name (1-128 bytes of A-Z a-z 0-9 _ : -)")
	fs.StringVar(&c.name, "name", "", "create: a label for the token (default \""+api.DefaultTokenName+"\")")
	fs.BoolVar(&c.readOnly, "read-only", false, "create: a token that may only read the project (the read API), not submit counts")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return c, errors.New("a subcommand is required: create or list")
	}
	c.sub = fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case c.sub != "create" && c.sub != "list":
		fs.Usage()
		return c, fmt.Errorf("unknown subcommand %q: want create or list", c.sub)
	case c.project == "":
		return c, errors.New("--project is required")
	case c.sub == "list" && c.name != "":
		return c, errors.New("--name is for 'token create'")
	case c.sub == "list" && c.readOnly:
		return c, errors.New("--read-only is for 'token create'")
	case c.store.database == "":
		return c, errors.New("--database must not be empty")
	case c.store.uri == "":
		return c, errors.New("tokens live in the MongoDB deployment: pass --mongodb-uri (or set ROLLUP_MONGODB_URI); " +
			"'rollup serve --demo' prints a demo token")
	}
	return c, nil
}

func runToken(ctx context.Context, e *env, args []string) error {
	c, err := parseToken(e, args)
	if err != nil {
		return usageError(err)
	}
	return c.store.withDB(ctx, func(db *mongo.Database) error { return token(ctx, e, c, db) })
}

// token runs the token subcommand against a connected database.
func token(ctx context.Context, e *env, c tokenConfig, db *mongo.Database) error {

	if c.sub == "create" {
		create, scope := api.CreateToken, api.ScopeIngest
		if c.readOnly {
			create, scope = api.CreateReadToken, api.ScopeRead
		}
		token, err := create(ctx, db, c.project, c.name)
		if err != nil {
			return err
		}
		name := c.name
		if name == "" {
			name = api.DefaultTokenName
		}
		_, _ = fmt.Fprintf(e.stderr, "created %s token %q for project %q (id %s); it is printed once, store it now:\n",
			scope, name, c.project, api.HashToken(token)[:12])
		_, err = fmt.Fprintln(e.stdout, token)
		return err
	}
	list, err := api.ListTokens(ctx, db, c.project)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		_, err := fmt.Fprintf(e.stdout, "project %q has no tokens\n", c.project)
		return err
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "ID\tNAME\tSCOPE\tCREATED")
	for _, t := range list {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Scope, t.CreatedAt.Format(time.RFC3339))
	}
	_ = tw.Flush()
	_, err = fmt.Fprint(e.stdout, b.String())
	return err
}
