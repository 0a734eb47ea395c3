package rollup

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// The scenario files in testdata/ are datadriven files (github.com/cockroachdb/datadriven,
// the pebble and CockroachDB format):
//
//	command arg=value ...
//	input lines (optional)
//	----
//	expected output
//	<blank line>
//
// Lines starting with # between cases are comments; " # ..." ends an input line. Run with
// -rewrite to rewrite the expected outputs (then read the diff):
//
//	go test ./rollup -run TestDatadriven -rewrite
//
// Commands (one world per file: one project, one tick):
//
//	tree                      input: "id (type)" per line, two spaces of indent per level,
//	                          root first; becomes the next tree version
//	report                    input: "id online=N version=V [type=T]" per line; writes the
//	                          leaf documents (newer version wins) and queues their events
//	rollup [levels=N] [batches=N] [order=reverse] [propagate=changed]
//	                          delivers the queued events like the watcher: route to parents,
//	                          merge level by level deepest first, each merged parent's
//	                          contribution goes up (only the changed ones with
//	                          propagate=changed); levels stops early (crash)
//	replay [same args]        redelivers every event ever reported
//	refresh [mode=rebuild]    recomputes every parent from its children's current values
//	show id                   prints a parent's stored document
//	check                     compares every parent with FullRecompute
type ddCase struct {
	cmd   string
	args  map[string]string
	pos   []string
	input []string
}

// newDDCase reads a case of the library into the commands' terms: key=value arguments,
// positional ones, and the input lines without comments.
func newDDCase(d *datadriven.TestData) ddCase {
	c := ddCase{cmd: d.Cmd, args: map[string]string{}}
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 {
			c.pos = append(c.pos, a.Key)
			continue
		}
		c.args[a.Key] = strings.Join(a.Vals, ",")
	}
	for _, l := range strings.Split(d.Input, "\n") {
		in, _, _ := strings.Cut(l, " #")
		if strings.TrimSpace(in) != "" && !strings.HasPrefix(strings.TrimSpace(in), "#") {
			c.input = append(c.input, strings.TrimRight(in, " "))
		}
	}
	return c
}

func TestDatadriven(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			w := newWorld(t)
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				got, err := runDD(w, newDDCase(d))
				if err != nil {
					d.Fatalf(t, "%s: %v", d.Cmd, err)
				}
				return got
			})
		})
	}
}

func intArg(c ddCase, key string, def int) (int, error) {
	s, ok := c.args[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", key, s, err)
	}
	return n, nil
}

func runDD(w *world, c ddCase) (string, error) {
	switch c.cmd {
	case "tree":
		nodes, err := parseTreeInput(c.input)
		if err != nil {
			return "", err
		}
		version := 1
		if w.tree != nil {
			version = w.tree.version + 1
		}
		t, err := newTestTree(version, nodes)
		if err != nil {
			return "", err
		}
		w.tree = t
		return fmt.Sprintf("tree version=%d nodes=%d leaves=%d\n", version, len(nodes), t.leafCount[t.root]), nil
	case "report":
		var b strings.Builder
		for _, l := range c.input {
			id, online, version, typ, err := parseReport(w, l)
			if err != nil {
				return "", err
			}
			if w.report(id, typ, online, version) {
				fmt.Fprintf(&b, "%s applied\n", id)
			} else {
				fmt.Fprintf(&b, "%s stale\n", id)
			}
		}
		return b.String(), nil
	case "rollup", "replay":
		levels, err := intArg(c, "levels", 0)
		if err != nil {
			return "", err
		}
		batches, err := intArg(c, "batches", 1)
		if err != nil {
			return "", err
		}
		events := slices.Clone(w.pending)
		if c.cmd == "replay" {
			events = slices.Clone(w.history)
		} else {
			w.history = append(w.history, w.pending...)
			w.pending = nil
		}
		if c.args["order"] == "reverse" {
			slices.Reverse(events)
		}
		writes, orphans := w.writes, w.orphans
		size := (len(events) + batches - 1) / max(batches, 1)
		for len(events) > 0 {
			n := min(size, len(events))
			w.deliver(events[:n], levels, c.args["propagate"] == "changed")
			events = events[n:]
		}
		return w.render() + fmt.Sprintf("writes=%d orphans=%d\n", w.writes-writes, w.orphans-orphans), nil
	case "refresh":
		merge := Merge
		if c.args["mode"] == "rebuild" {
			merge = Rebuild
		}
		writes := w.writes
		w.refresh(merge)
		return w.render() + fmt.Sprintf("writes=%d\n", w.writes-writes), nil
	case "show":
		if len(c.pos) != 1 {
			return "", fmt.Errorf("show needs one id")
		}
		p, ok := w.parent(c.pos[0])
		if !ok {
			return "absent\n", nil
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s (%s) project=%s timestamp=%s online=%d rev=%d reported=%d expected=%d tree_version=%d\n",
			p.ID, p.Type, p.Project, p.Timestamp.Format("2006-01-02T15:04:05Z"), p.Online, p.Rev, p.Reported, p.Expected, p.TreeVersion)
		ids := make([]string, 0, len(p.Children))
		for id := range p.Children {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			st := p.Children[id]
			fmt.Fprintf(&b, "  %s (%s) online=%d version=%d reported=%d/%d\n", id, st.Type, st.Online, st.Version, st.Reported, st.Expected)
		}
		return b.String(), nil
	case "check":
		bad := w.check()
		if len(bad) == 0 {
			return "ok\n", nil
		}
		return strings.Join(bad, "\n") + "\n", nil
	default:
		return "", fmt.Errorf("unknown command %q", c.cmd)
	}
}

// parseTreeInput reads "id (type)" lines indented by two spaces per level.
func parseTreeInput(lines []string) ([]Node, error) {
	var nodes []Node
	var stack []string // stack[d] = last node id seen at depth d
	for _, l := range lines {
		trimmed := strings.TrimLeft(l, " ")
		indent := len(l) - len(trimmed)
		if indent%2 != 0 || indent/2 > len(stack) {
			return nil, fmt.Errorf("bad indent: %q", l)
		}
		depth := indent / 2
		id, rest, ok := strings.Cut(trimmed, " ")
		typ := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(rest), "("), ")")
		if !ok || typ == "" {
			return nil, fmt.Errorf("want \"id (type)\": %q", l)
		}
		parent := ""
		if depth > 0 {
			parent = stack[depth-1]
		} else if len(nodes) > 0 {
			return nil, fmt.Errorf("second root: %q", l)
		}
		stack = append(stack[:depth], id)
		nodes = append(nodes, Node{ID: id, Type: typ, Parent: parent})
	}
	return nodes, nil
}

// parseReport reads "id online=N version=V [type=T]"; the type defaults to the tree's.
func parseReport(w *world, l string) (id string, online, version int64, typ string, err error) {
	fields := strings.Fields(l)
	if len(fields) < 3 {
		return "", 0, 0, "", fmt.Errorf("want \"id online=N version=V\": %q", l)
	}
	id = fields[0]
	typ = "process"
	if w.tree != nil {
		if n, ok := w.tree.byID[id]; ok {
			typ = n.Type
		}
	}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "online":
			online, err = strconv.ParseInt(v, 10, 64)
		case "version":
			version, err = strconv.ParseInt(v, 10, 64)
		case "type":
			typ = v
		default:
			err = fmt.Errorf("unknown report field %q", k)
		}
		if err != nil {
			return "", 0, 0, "", err
		}
	}
	return id, online, version, typ, nil
}
