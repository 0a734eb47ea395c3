package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/internal/settings"
	"github.com/gameops/rollup/recompute"
	"github.com/gameops/rollup/tree/treedb"
)

const verifyUsage = `usage: rollup verify --project P --from T1 --to T2 [--max N] [flags]

Check that the stored rollups of a project are right for every tick in [T1, T2) (RFC3339),
reading every document of each tick and the tree version in effect at it. For every parent
and root (node, tick) it checks:
  sum        online and reported are the sums over the node's children map
  recompute  online and reported equal a full recompute from the leaves under the node
  expected   expected and tree_version match the tree; reported <= expected
  orphan     no orphan leaf (a leaf whose id is not in the tree) is in a children map
  child      every children map entry is a child of the node in the tree, with the value
             the child has now: a leaf's own document (online, version), a parent child's
             totals recomputed from its own children (online, reported, expected)
  missing    a node with reported leaves under it has a document
  duplicate  at most one document per (id, type, timestamp) (the original system's dips)
  invalid    every parent document decodes
and that the unique index on counts (id, type, timestamp) exists (index). It knows the
retention horizons ('rollup retention show'): ticks whose leaves have expired are checked
without them (sum, expected, duplicate, invalid only), ticks before the 5m horizon are not
checked, and the report says which tiers were checked for which ticks. It prints a summary
(ticks and (node, tick) pairs checked, the orphan leaves by name, violations by kind, the
first --max violations with node, tick, stored and expected values) and, for the kinds found,
the repairs in the order to run them:
  duplicate, index     rollup migrate up (removes duplicates, keeping the newest, and
                       rebuilds the unique index; replay cannot)
  invalid              fix or delete the documents listed by hand (every reader skips them)
  the others           rollup replay over the same window
It exits 1 on any violation, and for an unknown project.
Run it while rollups are quiet: a tick the watcher is still writing may show stale children.

Examples:
  rollup verify --project demo --from 2024-05-01T00:00:00Z --to 2024-05-02T00:00:00Z \
      --mongodb-uri 'mongodb://db1/?replicaSet=rs0'
  ROLLUP_MONGODB_URI='mongodb://db1/?replicaSet=rs0' rollup verify --project demo \
      --from 2024-05-01T10:00:00Z --to 2024-05-01T11:00:00Z --max 100

Exit status: 0 no violation, 1 violations found, an unknown project or a failure, 2 usage error.

Flags:
`

// maxWindow bounds the window of replay and verify (both read every document of every tick).
const maxWindow = 31 * 24 * time.Hour

// windowFlags are --project, --from and --to of replay and verify.
type windowFlags struct {
	project  string
	from, to time.Time
}

// register adds --project, --from and --to to fs; parse turns them into w.
func (w *windowFlags) register(fs *settings.FlagSet, from, to *string) {
	fs.StringVar(&w.project, "project", "", "project (required)")
	fs.StringVar(from, "from", "", "first tick of the window, RFC3339 (required; inclusive)")
	fs.StringVar(to, "to", "", "end of the window, RFC3339 (required; exclusive)")
}

// parse validates the window flags given as strings.
func (w *windowFlags) parse(from, to string) error {
	var err error
	switch {
	case w.project == "":
		return errors.New("--project is required")
	case from == "" || to == "":
		return errors.New("--from and --to are required (RFC 3339, like 2026-11-21T18:05:00Z)")
	}
	if w.from, err = parseTime("from", from); err != nil {
		return err
	}
	if w.to, err = parseTime("to", to); err != nil {
		return err
	}
	w.from, w.to = w.from.UTC(), w.to.UTC()
	switch {
	case !w.to.After(w.from):
		return fmt.Errorf("--to %s must be after --from %s", to, from)
	case w.to.Sub(w.from) > maxWindow:
		return fmt.Errorf("the window %s to %s is longer than %s: split it", from, to, maxWindow)
	}
	return nil
}

// String formats the window for messages.
func (w windowFlags) String() string {
	return fmt.Sprintf("project %s [%s, %s)", w.project, w.from.Format(time.RFC3339), w.to.Format(time.RFC3339))
}

// parseWindowCommand parses the command line of replay or verify: it adds the window flags
// (into w) and the store flags (into s) to fs, which holds the command's own flags, parses
// args, checks the window, runs check (the command's own checks), and then requires a
// database name and a MongoDB URI; noURI is the message when the URI is missing.
func parseWindowCommand(e *env, fs *settings.FlagSet, args []string, w *windowFlags, s *storeFlags, check func() error, noURI string) error {
	var from, to string
	w.register(fs, &from, &to)
	s.register(fs)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := w.parse(from, to); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	return s.required(fs, noURI)
}

// verifyConfig is the parsed command line of rollup verify.
type verifyConfig struct {
	window windowFlags
	max    int
	store  storeFlags
}

func parseVerify(e *env, args []string) (verifyConfig, error) {
	var c verifyConfig
	fs := e.flags("verify", verifyUsage)
	fs.IntVar(&c.max, "max", 20, "print at most this many violations")
	err := parseWindowCommand(e, fs, args, &c.window, &c.store, func() error {
		if c.max < 0 {
			return errors.New("--max must not be negative")
		}
		return nil
	}, "verify reads a MongoDB deployment: pass --mongodb-uri (or set ROLLUP_MONGODB_URI)")
	return c, err
}

func runVerify(ctx context.Context, e *env, args []string) error {
	c, err := parseVerify(e, args)
	if err != nil {
		return usageError(err)
	}
	return c.store.withDB(ctx, func(db *mongo.Database) error { return verify(ctx, e.stdout, db, c) })
}

// verify checks the window and prints the report; violations make it return an error.
func verify(ctx context.Context, w io.Writer, db *mongo.Database, c verifyConfig) error {
	r, err := recompute.Verify(ctx, db, treedb.NewCache(treedb.New(db)), c.window.project, c.window.from, c.window.to,
		recompute.VerifyOptions{Max: c.max})
	if err != nil {
		return err
	}
	if err := r.Format(w); err != nil {
		return fmt.Errorf("print summary: %w", err)
	}
	if !r.OK() {
		return fmt.Errorf("verify %s: %d violations", c.window, r.Total)
	}
	return nil
}
