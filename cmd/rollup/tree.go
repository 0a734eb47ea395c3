package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

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
	fs := newFlagSet(e, "tree", treeUsage)
	fs.StringVar(&c.project, "project", "", "project (import, validate: overrides a file without one; show: required)")
	fs.StringVar(&effective, "effective", "", "import: first tick (RFC3339, rounded up to a tick start) the version applies to; default: the next tick")
	fs.IntVar(&c.version, "version", 0, "show: the version to print")
	fs.StringVar(&at, "at", "", "show: print the version in effect at this time (RFC3339)")
	fs.BoolVar(&c.json, "json", false, "show: print JSON (nested layout) instead of an outline")
	c.store.register(fs)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return c, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
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
	var err error
	if effective != "" {
		if c.sub != "import" {
			return c, errors.New("--effective is for 'tree import'")
		}
		if c.effective, err = time.Parse(time.RFC3339, effective); err != nil {
			return c, fmt.Errorf("--effective: %w", err)
		}
	}
	if at != "" {
		if c.at, err = time.Parse(time.RFC3339, at); err != nil {
			return c, fmt.Errorf("--at: %w", err)
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
	case c.store.database == "":
		return c, errors.New("--database must not be empty")
	case c.sub != "validate" && c.store.uri == "":
		return c, errors.New("tree versions live in a MongoDB deployment: pass --mongodb-uri (or set ROLLUP_MONGODB_URI); " +
			"'rollup tree validate FILE' checks a file without one")
	}
	return c, nil
}

func runTree(ctx context.Context, e *env, args []string) error {
	c, err := parseTree(e, args)
	if err != nil {
		return usageError(err)
	}
	switch c.sub {
	case "validate":
		t, err := readTreeFile(c.file, c.project)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "%s: project %s, %d nodes, %d leaves, %d levels: valid\n",
			c.file, t.Project(), t.Len(), t.LeafCount(t.Root().ID), t.Height()+1)
		return err
	case "import":
		t, err := readTreeFile(c.file, c.project)
		if err != nil {
			return err
		}
		return withTreeStore(ctx, c, func(s *treedb.Store) error { return treeImport(ctx, e.stdout, s, t, c.effective) })
	default:
		return withTreeStore(ctx, c, func(s *treedb.Store) error { return treeShow(ctx, e.stdout, s, c) })
	}
}

// readTreeFile parses and validates a tree file; project overrides a file that names none.
// Errors name the file and, where known, the lines of the offending nodes.
func readTreeFile(path, project string) (*tree.Tree, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tree: %w", err)
	}
	f, err := tree.Parse(data, tree.FormatOf(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case f.Project == "":
		f.Project = project
	case project != "" && project != f.Project:
		return nil, fmt.Errorf("%s is the tree of project %q, not %q (--project)", path, f.Project, project)
	}
	if f.Project == "" {
		return nil, fmt.Errorf("%s names no project: add 'project:' to the file or pass --project", path)
	}
	t, err := tree.Build(f.Project, f.Nodes)
	var ve *tree.ValidationError
	if errors.As(err, &ve) {
		return nil, &treeFileError{path: path, file: f, err: ve}
	}
	return t, err
}

// treeFileError is a ValidationError of a file: one problem a line, with the line of the
// first node it names.
type treeFileError struct {
	path string
	file *tree.File
	err  *tree.ValidationError
}

func (e *treeFileError) Unwrap() error { return e.err }

func (e *treeFileError) Error() string {
	lines := make(map[string]int, len(e.file.Nodes))
	for i, n := range e.file.Nodes {
		if _, ok := lines[n.ID]; !ok {
			lines[n.ID] = e.file.Lines[i]
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: invalid tree for project %q, %d problem(s):", e.path, e.err.Project, len(e.err.Problems))
	for _, p := range e.err.Problems {
		b.WriteString("\n  ")
		if len(p.Nodes) > 0 && lines[p.Nodes[0]] > 0 {
			fmt.Fprintf(&b, "line %d: ", lines[p.Nodes[0]])
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// withTreeStore connects to the deployment (majority writes) and runs fn with a tree store.
func withTreeStore(ctx context.Context, c treeConfig, fn func(*treedb.Store) error) error {
	return c.store.withDB(ctx, func(db *mongo.Database) error { return fn(treedb.New(db)) })
}

// nextTickStart returns t when it is a tick start, else the next tick start after it.
func nextTickStart(t time.Time) time.Time {
	a := tree.AlignTick(t, tree.DefaultTick)
	if a.Equal(t) {
		return a
	}
	return a.Add(tree.DefaultTick)
}

func treeImport(ctx context.Context, w io.Writer, s *treedb.Store, t *tree.Tree, effective time.Time) error {
	if effective.IsZero() {
		effective = tree.AlignTick(time.Now(), tree.DefaultTick).Add(tree.DefaultTick)
	}
	eff := nextTickStart(effective)
	v, err := s.Import(ctx, t.Project(), t.Nodes(), eff)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "project %s: version %d, effective from %s, %d nodes, %d leaves\n",
		t.Project(), v, eff.Format(time.RFC3339), t.Len(), t.LeafCount(t.Root().ID))
	if !eff.Equal(effective) {
		fmt.Fprintf(&b, "note: --effective %s rounded up to the tick start %s\n", effective.Format(time.RFC3339), eff.Format(time.RFC3339))
	}
	if eff.Before(time.Now()) {
		b.WriteString("note: the effective time is in the past: rollups already computed for those ticks keep the old tree until replayed\n")
	}
	_, err = io.WriteString(w, b.String())
	return err
}

func treeShow(ctx context.Context, w io.Writer, s *treedb.Store, c treeConfig) error {
	versions, err := s.Versions(ctx, c.project)
	if err != nil {
		return err
	}
	if len(versions) == 0 {
		return fmt.Errorf("project %q has no tree: import one with 'rollup tree import FILE'", c.project)
	}
	v := versions[len(versions)-1].Version
	switch {
	case c.version != 0:
		v = c.version
	case !c.at.IsZero():
		var ok bool
		if v, _, ok, err = s.VersionAt(ctx, c.project, c.at); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("no version of project %q is in effect at %s (the first is effective from %s)",
				c.project, c.at.UTC().Format(time.RFC3339), versions[0].EffectiveFrom.Format(time.RFC3339))
		}
	}
	t, err := s.Load(ctx, c.project, v)
	if err != nil {
		return err
	}
	if c.json {
		layout := tree.Nested
		if t.Height() > tree.MaxNestedDepth {
			layout = tree.Flat
		}
		out, err := tree.Encode(t, tree.FormatJSON, layout)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	for _, info := range versions {
		if info.Version == v {
			_, err := fmt.Fprintf(w, "project %s version %d of %d, effective from %s, %d nodes, %d leaves\n",
				c.project, v, versions[len(versions)-1].Version, info.EffectiveFrom.Format(time.RFC3339), info.Nodes, info.Leaves)
			if err != nil {
				return err
			}
		}
	}
	return t.WriteText(w)
}
