package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/internal/ops"
	"github.com/gameops/rollup/retention"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

const retentionUsage = `usage: rollup retention show [--project P] [flags]
       rollup retention set (--project P | --default) [--dry-run] TIER=PERIOD... [flags]
       rollup retention clear (--project P | --default) [--dry-run] [TIER...] [flags]

How long each tier of the data is kept, and the overrides that change it. Tiers:
  leaves  the counts agents submitted (built in: 14d)
  5m      5-minute parent and root totals, built from the leaves (35d)
  1h      hourly summaries, built from the 5m totals (400d)
  1d      daily summaries, built from the hourly ones (forever)
A PERIOD is a number of days (14d), a duration (36h) or forever. Per tier, a project's
override wins over the deployment default (--default), which wins over the built-in value.
Overrides live in the database (collection retention), so every instance applies the same;
the instance of 'rollup serve' that holds the retention lease deletes what they no longer
keep, in paced batches (see serve's --retention-* flags).

'show' prints the deployment default and the projects that override it, or with --project
that project's periods, where each comes from, its horizons (documents before them may have
been deleted: replay refuses to rebuild from them) and where retention cuts now.
'set' and 'clear' change an override and print the result; they refuse a change that would
make any project's policy unsafe, and exit 1:
  - a tier is kept at least until its buckets, and the buckets built from it, can no longer
    change: the late-data window (24h, a leaf that old is still accepted) plus the bucket
    of the tier built from it, plus 1h: leaves >= 25h5m, 5m >= 26h, 1h >= 49h, 1d >= 49h;
  - a tier is kept at least as long as the tier it is built from (leaves <= 5m <= 1h <= 1d),
    so that no tier outlives its sources' summaries.
Shortening a period deletes data at the next pass: try it with --dry-run first.

Examples:
  rollup retention show --project mygame --mongodb-uri 'mongodb://db1/?replicaSet=rs0'
  rollup retention set --default 5m=60d 1h=730d --dry-run --mongodb-uri 'mongodb://db1/?replicaSet=rs0'
  ROLLUP_MONGODB_URI='mongodb://db1/?replicaSet=rs0' rollup retention set --project mygame leaves=30d 5m=60d
  ROLLUP_MONGODB_URI='mongodb://db1/?replicaSet=rs0' rollup retention clear --project mygame leaves

Exit status: 0 done, 1 refused (unsafe) or failed, 2 usage error.

Flags:
`

// retentionConfig is the parsed command line of rollup retention.
type retentionConfig struct {
	sub     string
	store   storeFlags
	project string
	deflt   bool
	dryRun  bool
	set     retention.Override
	clear   []store.Tier
}

// parseRetention parses "retention <show|set|clear> [flags] [args]".
func parseRetention(e *env, args []string) (retentionConfig, error) {
	var c retentionConfig
	fs := e.flags("retention", retentionUsage)
	c.store.register(fs)
	fs.StringVar(&c.project, "project", "", "the project (show: its policy and horizons; set, clear: its override)")
	fs.BoolVar(&c.deflt, "default", false, "set, clear: the deployment default (every project without its own override of a tier)")
	fs.BoolVar(&c.dryRun, "dry-run", false, "set, clear: check and show the result, write nothing")
	pos, err := e.parseArgs(fs, args)
	switch {
	case err != nil:
		return c, err
	case len(pos) == 0:
		fs.Usage()
		return c, errors.New("a subcommand is required: show, set or clear")
	}
	c.sub, pos = pos[0], pos[1:]
	switch c.sub {
	case "show":
		switch {
		case len(pos) > 0:
			return c, fmt.Errorf("unexpected argument %q", pos[0])
		case c.deflt || c.dryRun:
			return c, errors.New("--default and --dry-run are for 'set' and 'clear' ('show' without --project shows the default)")
		}
	case "set", "clear":
		switch {
		case c.project == "" && !c.deflt:
			return c, fmt.Errorf("'%s' needs --project P or --default", c.sub)
		case c.project != "" && c.deflt:
			return c, errors.New("--project and --default exclude each other")
		}
		if c.sub == "set" {
			if c.set, err = retention.ParseAssignments(pos); err != nil {
				return c, err
			}
			break
		}
		for _, a := range pos {
			t, err := retention.ParseTier(a)
			if err != nil {
				return c, err
			}
			c.clear = append(c.clear, t)
		}
	default:
		fs.Usage()
		return c, fmt.Errorf("unknown subcommand %q: want show, set or clear", c.sub)
	}
	if c.project != "" {
		if err := tree.ValidateName("project", c.project); err != nil {
			return c, fmt.Errorf("--project: %w", err)
		}
	}
	return c, c.store.required(fs, "retention overrides live in the MongoDB deployment: pass --mongodb-uri (or set ROLLUP_MONGODB_URI)")
}

func runRetention(ctx context.Context, e *env, args []string) error {
	c, err := parseRetention(e, args)
	if err != nil {
		return usageError(err)
	}
	return c.store.withDB(ctx, func(db *mongo.Database) error {
		now := time.Now().UTC()
		if c.sub == "show" {
			return ops.RetentionShow(ctx, e.stdout, db, c.project, now)
		}
		scope := c.project
		if c.deflt {
			scope = retention.DefaultScope
		}
		return ops.RetentionApply(ctx, e.stdout, db, ops.RetentionChange{Scope: scope, Set: c.set, Clear: c.clear, DryRun: c.dryRun}, now)
	})
}
