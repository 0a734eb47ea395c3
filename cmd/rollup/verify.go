package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
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
             of the child's own document
  missing    a node with reported leaves under it has a document
  duplicate  at most one document per (id, type, timestamp) (the original system's dips)
  invalid    every parent document decodes
and that the unique index on counts (id, type, timestamp) exists (index). It prints a summary
(ticks and (node, tick) pairs checked, violations by kind, the first --max violations with
node, tick, stored and expected values) and exits 1 on any violation.
Most violations are repaired by 'rollup replay' over the same window. Duplicates are not:
remove the extra documents (keep the newest), recreate the unique index, then replay.
Run it while rollups are quiet: a tick the watcher is still writing may show stale children.

Examples:
  rollup verify --project demo --from 2024-05-01T00:00:00Z --to 2024-05-02T00:00:00Z \
      --mongodb-uri 'mongodb://db1/?replicaSet=rs0'
  ROLLUP_MONGODB_URI='mongodb://db1/?replicaSet=rs0' rollup verify --project demo \
      --from 2024-05-01T10:00:00Z --to 2024-05-01T11:00:00Z --max 100

Exit status: 0 no violation, 1 violations found (or a failure), 2 usage error.

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
func (w *windowFlags) register(fs *flag.FlagSet, from, to *string) {
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
		return errors.New("--from and --to are required (RFC3339, e.g. 2024-05-01T10:00:00Z)")
	}
	if w.from, err = time.Parse(time.RFC3339, from); err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	if w.to, err = time.Parse(time.RFC3339, to); err != nil {
		return fmt.Errorf("--to: %w", err)
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
func parseWindowCommand(fs *flag.FlagSet, args []string, w *windowFlags, s *storeFlags, check func() error, noURI string) error {
	var from, to string
	w.register(fs, &from, &to)
	s.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := w.parse(from, to); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	switch {
	case s.database == "":
		return errors.New("--database must not be empty")
	case s.uri == "":
		return errors.New(noURI)
	}
	return nil
}

// verifyConfig is the parsed command line of rollup verify.
type verifyConfig struct {
	window windowFlags
	max    int
	store  storeFlags
}

func parseVerify(e *env, args []string) (verifyConfig, error) {
	var c verifyConfig
	fs := newFlagSet(e, "verify", verifyUsage)
	fs.IntVar(&c.max, "max", 20, "print at most this many violations")
	err := parseWindowCommand(fs, args, &c.window, &c.store, func() error {
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

// verifySummary accumulates the reports of a window's ticks.
type verifySummary struct {
	ticks, checked, leaves, orphans, ignored int
	noTree                                   int
	byKind                                   map[string]int
	first                                    []string
	total                                    int
}

func (s *verifySummary) violation(kind, line string, limit int) {
	s.byKind[kind]++
	s.total++
	if len(s.first) < limit {
		s.first = append(s.first, line)
	}
}

// verify checks the window and prints the summary; violations make it return an error.
func verify(ctx context.Context, w io.Writer, db *mongo.Database, c verifyConfig) error {
	counts := db.Collection(store.CountsCollection)
	trees := treedb.NewCache(treedb.New(db))
	s := &verifySummary{byKind: map[string]int{}}
	indexOK, indexMsg, err := hasUniqueKeyIndex(ctx, counts)
	if err != nil {
		return err
	}
	if !indexOK {
		s.violation("index", "index     counts: "+indexMsg, c.max)
	}
	ticks, err := windowTicks(ctx, counts, c.window)
	if err != nil {
		return err
	}
	for _, tick := range ticks {
		d, err := readTick(ctx, counts, trees, c.window.project, tick)
		if err != nil {
			return err
		}
		r, err := rollup.Check(d)
		if err != nil {
			return fmt.Errorf("check %s: %w", tick.Format(time.RFC3339), err)
		}
		s.ticks++
		s.checked += r.Checked
		s.leaves += len(d.Leaves)
		s.orphans += r.Orphans
		s.ignored += r.Ignored
		if d.Nodes == nil {
			s.noTree++
		}
		for _, v := range r.Violations {
			s.violation(string(v.Kind), v.String(), c.max)
		}
	}
	if err := printVerify(w, c, s, indexOK, indexMsg); err != nil {
		return fmt.Errorf("print summary: %w", err)
	}
	if s.total > 0 {
		return fmt.Errorf("verify %s: %d violations", c.window, s.total)
	}
	return nil
}

func printVerify(w io.Writer, c verifyConfig, s *verifySummary, indexOK bool, indexMsg string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "verify %s: %d ticks, %d (node, tick) checked, %d leaf documents, %d orphan leaves\n",
		c.window, s.ticks, s.checked, s.leaves, s.orphans)
	if s.noTree > 0 {
		fmt.Fprintf(&b, "note: %d ticks have no tree version (every leaf is an orphan, nothing to check)\n", s.noTree)
	}
	if s.ignored > 0 {
		fmt.Fprintf(&b, "note: %d parent documents of nodes that are not parents in their tick's tree (left by a tree edit) were not checked\n", s.ignored)
	}
	if indexOK {
		fmt.Fprintf(&b, "unique index %s: ok\n", store.CountsKeyIndex)
	}
	if s.total == 0 {
		b.WriteString("no violations\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	kinds := make([]string, 0, len(s.byKind))
	for k := range s.byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, s.byKind[k])
	}
	fmt.Fprintf(&b, "%d violations (%s)", s.total, strings.Join(parts, ", "))
	if len(s.first) < s.total {
		fmt.Fprintf(&b, "; the first %d:\n", len(s.first))
	} else {
		b.WriteString(":\n")
	}
	for _, l := range s.first {
		b.WriteString("  ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if !indexOK {
		fmt.Fprintf(&b, "the unique index is missing: remove duplicate documents (keep the newest) and recreate it: "+
			"db.%s.createIndex({id: 1, type: 1, timestamp: 1}, {unique: true, name: %q})\n", store.CountsCollection, store.CountsKeyIndex)
	}
	fmt.Fprintf(&b, "repair: rollup replay --project %s --from %s --to %s\n",
		c.window.project, c.window.from.Format(time.RFC3339), c.window.to.Format(time.RFC3339))
	_, err := io.WriteString(w, b.String())
	return err
}

// hasUniqueKeyIndex reports whether counts has a unique index on exactly {id, type,
// timestamp}; if not, the message says what is wrong.
func hasUniqueKeyIndex(ctx context.Context, counts *mongo.Collection) (bool, string, error) {
	cur, err := counts.Indexes().List(ctx)
	if err != nil {
		return false, "", fmt.Errorf("list indexes: %w", err)
	}
	var specs []bson.Raw
	if err := cur.All(ctx, &specs); err != nil {
		return false, "", fmt.Errorf("list indexes: %w", err)
	}
	want := []string{store.FieldID, store.FieldType, store.FieldTimestamp}
	for _, spec := range specs {
		key, ok := spec.Lookup("key").DocumentOK()
		if !ok {
			continue
		}
		elems, err := key.Elements()
		if err != nil || len(elems) != len(want) {
			continue
		}
		match := true
		for i, el := range elems {
			if n, ok := el.Value().AsInt64OK(); el.Key() != want[i] || !ok || n != 1 {
				match = false
			}
		}
		unique, _ := spec.Lookup("unique").BooleanOK()
		_, partial := spec.Lookup("partialFilterExpression").DocumentOK()
		if match && unique && !partial {
			return true, "", nil
		}
	}
	return false, fmt.Sprintf("no unique index on {id: 1, type: 1, timestamp: 1} (want %s): duplicate documents can be written", store.CountsKeyIndex), nil
}

// windowTicks returns the distinct ticks of the window's project documents, ascending.
func windowTicks(ctx context.Context, counts *mongo.Collection, w windowFlags) ([]time.Time, error) {
	res := counts.Distinct(ctx, store.FieldTimestamp, bson.D{
		{Key: store.FieldProject, Value: w.project},
		{Key: store.FieldTimestamp, Value: bson.D{{Key: "$gte", Value: w.from}, {Key: "$lt", Value: w.to}}},
	})
	var raw []bson.DateTime
	if err := res.Decode(&raw); err != nil {
		return nil, fmt.Errorf("list ticks: %w", err)
	}
	out := make([]time.Time, len(raw))
	for i, d := range raw {
		out[i] = d.Time().UTC()
	}
	slices.SortFunc(out, time.Time.Compare)
	return slices.CompactFunc(out, time.Time.Equal), nil
}

// readTick reads the tree and every document of project at tick.
func readTick(ctx context.Context, counts *mongo.Collection, trees treedb.TreeSource, project string, tick time.Time) (rollup.TickDocs, error) {
	d := rollup.TickDocs{Tick: tick}
	tr, version, err := trees.TreeAt(ctx, project, tick)
	if err != nil {
		return d, err
	}
	if tr != nil {
		nodes := tr.Nodes()
		d.Nodes = make([]rollup.Node, len(nodes))
		for i, n := range nodes {
			d.Nodes[i] = rollup.Node(n)
		}
		d.TreeVersion = version
	}
	cur, err := counts.Find(ctx, bson.D{{Key: store.FieldProject, Value: project}, {Key: store.FieldTimestamp, Value: tick}})
	if err != nil {
		return d, fmt.Errorf("read %s: %w", tick.Format(time.RFC3339), err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	for cur.Next(ctx) {
		doc := cur.Current
		id, _ := doc.Lookup(store.FieldID).StringValueOK()
		typ, _ := doc.Lookup(store.FieldType).StringValueOK()
		if isParent, _ := doc.Lookup(store.FieldRollup).BooleanOK(); isParent {
			p, err := store.DecodeParent(doc)
			if err != nil {
				d.Invalid = append(d.Invalid, rollup.InvalidDoc{ID: id, Type: typ, Reason: err.Error()})
				continue
			}
			d.Parents = append(d.Parents, p)
			continue
		}
		online, ok1 := doc.Lookup(store.FieldOnline).AsInt64OK()
		version, ok2 := doc.Lookup(store.FieldVersion).AsInt64OK()
		if id == "" || typ == "" || !ok1 || !ok2 {
			d.Invalid = append(d.Invalid, rollup.InvalidDoc{ID: id, Type: typ, Reason: "leaf document without a string id and type and integer online and version"})
			continue
		}
		d.Leaves = append(d.Leaves, rollup.LeafDoc{ID: id, Leaf: rollup.Leaf{Type: typ, Online: online, Version: version}})
	}
	if err := cur.Err(); err != nil {
		return d, fmt.Errorf("read %s: %w", tick.Format(time.RFC3339), err)
	}
	return d, nil
}
