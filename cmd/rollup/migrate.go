package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/internal/ops"
	"github.com/gameops/rollup/metrics"
	"github.com/gameops/rollup/migrations"
)

const migrateUsage = `usage: rollup migrate up [--dry-run] [flags]
       rollup migrate status [flags]

Apply rollup's schema migrations to a MongoDB deployment, or show which are applied.
'up' applies the pending steps under a lock (a second instance waits for the first). The
step that builds the unique index on counts (id, type, timestamp) first removes duplicate
documents, keeping the newest of each group, and prints every document it removed;
--dry-run prints what it would do and changes nothing.
'status' also reports schema drift: an index an applied step built that is missing, or
exists with another definition (someone dropped or changed it). 'up' repairs it: it runs the
step again (dropping a differently defined index first; for the unique index, removing the
duplicates written meanwhile).
Through a mongos (a sharded cluster), 'up' also shards the counts collection on its unique
key {id: 1, type: 1, timestamp: 1} after building the indexes (enableSharding first on
servers before 6.0); a collection already sharded on that key is left alone, one sharded on
another key is an error naming it. 'status' shows each collection's shard key.
See docs/scaling.md.
'rollup serve' applies pending migrations at start, so this command is for operators
who want to run or inspect them on their own.

Examples:
  rollup migrate up --dry-run --mongodb-uri 'mongodb://db1,db2,db3/?replicaSet=rs0'
  ROLLUP_MONGODB_URI='mongodb://db1/?replicaSet=rs0' rollup migrate up
  rollup migrate status --mongodb-uri 'mongodb://db1/?replicaSet=rs0' --database rollup
  rollup migrate up --mongodb-uri 'mongodb://mongos1:27017,mongos2:27017/'

Flags:
`

// migrateConfig is the parsed command line of rollup migrate.
type migrateConfig struct {
	sub      string
	store    storeFlags
	dryRun   bool
	lockWait time.Duration
	logLevel string
}

// parseMigrate parses "migrate <up|status> [flags]"; flags may also come before the subcommand.
func parseMigrate(e *env, args []string) (migrateConfig, error) {
	var c migrateConfig
	fs := e.flags("migrate", migrateUsage)
	c.store.register(fs)
	fs.BoolVar(&c.dryRun, "dry-run", false, "up: report what would be done, change nothing")
	fs.DurationVar(&c.lockWait, "lock-wait", migrations.DefaultLockWait, "up: how long to wait for another instance's migration lock (0: fail at once)")
	fs.StringVar(&c.logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	pos, err := e.parseArgs(fs, args)
	switch {
	case err != nil:
		return c, err
	case len(pos) == 0:
		fs.Usage()
		return c, errors.New("a subcommand is required: up or status")
	case len(pos) > 1:
		return c, fmt.Errorf("unexpected argument %q", pos[1])
	}
	c.sub = pos[0]
	switch {
	case c.sub != "up" && c.sub != "status":
		fs.Usage()
		return c, fmt.Errorf("unknown subcommand %q: want up or status", c.sub)
	case c.sub == "status" && c.dryRun:
		return c, errors.New("--dry-run is for 'migrate up'")
	case c.lockWait < 0:
		return c, errors.New("--lock-wait must not be negative")
	}
	return c, c.store.required(fs, "migrations need a MongoDB deployment: pass --mongodb-uri (or set ROLLUP_MONGODB_URI); "+
		"with the embedded store, use 'rollup serve', which applies migrations at start")
}

func runMigrate(ctx context.Context, e *env, args []string) error {
	c, err := parseMigrate(e, args)
	if err != nil {
		return usageError(err)
	}
	log, err := metrics.NewLogger(c.logLevel, false, e.stderr)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	defer func() { _ = log.Sync() }()

	return c.store.withDB(ctx, func(db *mongo.Database) error {
		m := migrations.New(db, log.Named("migrate"))
		if c.sub == "status" {
			return ops.MigrateStatus(ctx, e.stdout, m, c.store.database)
		}
		return ops.MigrateUp(ctx, e.stdout, m, c.dryRun, c.lockWait)
	})
}
