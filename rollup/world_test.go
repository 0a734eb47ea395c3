package rollup

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"
)

// testTree is one tree version with the navigation a watcher would have.
type testTree struct {
	version   int
	nodes     []Node
	byID      map[string]Node
	children  map[string][]string // in input order
	leafCount map[string]int64
	depth     map[string]int
	root      string
}

func newTestTree(version int, nodes []Node) (*testTree, error) {
	t := &testTree{
		version:   version,
		nodes:     nodes,
		byID:      make(map[string]Node, len(nodes)),
		children:  make(map[string][]string),
		leafCount: make(map[string]int64),
		depth:     make(map[string]int),
	}
	for _, n := range nodes {
		if _, dup := t.byID[n.ID]; dup {
			return nil, fmt.Errorf("duplicate node %q", n.ID)
		}
		t.byID[n.ID] = n
		if n.Parent == "" {
			if t.root != "" {
				return nil, fmt.Errorf("two roots %q and %q", t.root, n.ID)
			}
			t.root = n.ID
		} else {
			t.children[n.Parent] = append(t.children[n.Parent], n.ID)
		}
	}
	for _, n := range nodes {
		d := 0
		for cur := n.ID; t.byID[cur].Parent != ""; cur = t.byID[cur].Parent {
			if _, ok := t.byID[t.byID[cur].Parent]; !ok {
				return nil, fmt.Errorf("node %q: unknown parent", cur)
			}
			if d++; d > len(nodes) {
				return nil, fmt.Errorf("cycle through %q", n.ID)
			}
		}
		t.depth[n.ID] = d
		if t.isLeaf(n.ID) {
			for cur := n.ID; cur != ""; cur = t.byID[cur].Parent {
				t.leafCount[cur]++
			}
		}
	}
	return t, nil
}

func (t *testTree) isLeaf(id string) bool {
	_, ok := t.byID[id]
	return ok && len(t.children[id]) == 0
}

func (t *testTree) childSet(id string) ChildSet {
	kids := make(map[string]string, len(t.children[id]))
	for _, c := range t.children[id] {
		kids[c] = t.byID[c].Type
	}
	return ChildMap(kids, t.leafCount[id], t.version)
}

// world is a miniature watcher over one project and one tick: a store of leaf documents and
// parent documents (kept as copies: a stored document never aliases what Merge returned;
// their BSON form is package store's, tested there), the leaf events not yet delivered, and
// every event ever delivered.
type world struct {
	tb      testing.TB
	tree    *testTree
	leaves  map[string]Leaf // id + "/" + type → stored leaf document
	docs    map[string]Parent
	pending []Contribution
	history []Contribution
	writes  int
	orphans int
}

const (
	testProject = "demo"
)

func testTick() time.Time { return time.Date(2025, 3, 1, 12, 5, 0, 0, time.UTC) }

func newWorld(tb testing.TB) *world {
	return &world{tb: tb, leaves: map[string]Leaf{}, docs: map[string]Parent{}}
}

// report writes a leaf document the way package bulk does (newer version wins) and queues its
// event; a stale write queues its event too, standing for a redelivered older event.
func (w *world) report(id, typ string, online, version int64) bool {
	key := id + "/" + typ
	cur, ok := w.leaves[key]
	applied := !ok || version > cur.Version
	if applied {
		w.leaves[key] = Leaf{Type: typ, Online: online, Version: version}
	}
	w.pending = append(w.pending, LeafContribution(id, typ, online, version))
	return applied
}

func (w *world) parent(id string) (Parent, bool) {
	p, ok := w.docs[id]
	if !ok {
		n := w.tree.byID[id]
		return Parent{ID: id, Type: n.Type, Project: testProject, Timestamp: testTick()}, false
	}
	p.Children = maps.Clone(p.Children)
	return p, true
}

func (w *world) store(p Parent) {
	if p.Children == nil {
		p.Children = map[string]ChildState{} // as a stored document reads back
	}
	p.Children = maps.Clone(p.Children)
	w.docs[p.ID] = p
	w.writes++
}

// deliver runs the watcher's algorithm on events: route leaf events to their parents (orphans
// counted and skipped), then merge the dirty parents level by level, deepest first, each once,
// feeding each merged parent's contribution, changed or not, to its own parent (onlyChanged
// feeds only the changed ones: the flawed variant partial.txt shows). maxLevels > 0 stops
// after that many levels, as a crash between two levels would.
func (w *world) deliver(events []Contribution, maxLevels int, onlyChanged bool) {
	dirty := map[string][]Contribution{}
	for _, ev := range events {
		n, ok := w.tree.byID[ev.Child]
		if !ok || !w.tree.isLeaf(ev.Child) || n.Parent == "" {
			w.orphans++
			continue
		}
		dirty[n.Parent] = append(dirty[n.Parent], ev)
	}
	w.mergeLevels(dirty, maxLevels, onlyChanged)
}

func (w *world) mergeLevels(dirty map[string][]Contribution, maxLevels int, onlyChanged bool) {
	for level := 0; len(dirty) > 0; level++ {
		if maxLevels > 0 && level == maxLevels {
			return
		}
		deepest := -1
		for id := range dirty {
			deepest = max(deepest, w.tree.depth[id])
		}
		ids := make([]string, 0, len(dirty))
		for id := range dirty {
			if w.tree.depth[id] == deepest {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		for _, id := range ids {
			in := dirty[id]
			delete(dirty, id)
			p, _ := w.parent(id)
			q, changed := Merge(p, in, w.tree.childSet(id))
			if changed {
				w.store(q)
			}
			if q.Rev == 0 || (onlyChanged && !changed) {
				continue // never written: nothing to contribute
			}
			if up := w.tree.byID[id].Parent; up != "" {
				dirty[up] = append(dirty[up], q.Contribution())
			}
		}
	}
}

// current is the contribution node id would give its parent now, from the stored documents.
func (w *world) current(id string) (Contribution, bool) {
	n := w.tree.byID[id]
	if w.tree.isLeaf(id) {
		l, ok := w.leaves[id+"/"+n.Type]
		return LeafContribution(id, n.Type, l.Online, l.Version), ok
	}
	p, ok := w.parent(id)
	return p.Contribution(), ok
}

// refresh recomputes every parent of the tree, deepest first, from its children's current
// contributions: what a replay of the tick does after a tree edit.
func (w *world) refresh(merge func(Parent, []Contribution, ChildSet) (Parent, bool)) {
	byDepth := map[int][]string{}
	deepest := 0
	for _, n := range w.tree.nodes {
		if !w.tree.isLeaf(n.ID) {
			byDepth[w.tree.depth[n.ID]] = append(byDepth[w.tree.depth[n.ID]], n.ID)
			deepest = max(deepest, w.tree.depth[n.ID])
		}
	}
	for d := deepest; d >= 0; d-- {
		for _, id := range byDepth[d] {
			var in []Contribution
			for _, c := range w.tree.children[id] {
				if cur, ok := w.current(c); ok {
					in = append(in, cur)
				}
			}
			p, _ := w.parent(id)
			if q, changed := merge(p, in, w.tree.childSet(id)); changed {
				w.store(q)
			}
		}
	}
}

// leafValues is FullRecompute's input: the stored leaf documents whose type is the tree's.
func (w *world) leafValues() map[string]Leaf {
	out := map[string]Leaf{}
	for _, n := range w.tree.nodes {
		if l, ok := w.leaves[n.ID+"/"+n.Type]; ok {
			out[n.ID] = l
		}
	}
	return out
}

// check compares every stored parent of the tree with FullRecompute and returns the mismatches
// (none means correct). A child entry must equal the child's current contribution when the
// child has a reported leaf under it; with none, the entry may only be absent or all zero.
func (w *world) check() []string {
	want, err := FullRecompute(w.tree.nodes, w.leafValues())
	if err != nil {
		return []string{err.Error()}
	}
	var bad []string
	for _, n := range w.tree.nodes {
		if w.tree.isLeaf(n.ID) {
			continue
		}
		tot := want[n.ID]
		p, ok := w.parent(n.ID)
		if !ok {
			if tot.Reported > 0 {
				bad = append(bad, fmt.Sprintf("%s: missing, want %+v", n.ID, tot))
			}
			continue
		}
		got := Totals{Online: p.Online, Reported: p.Reported, Expected: p.Expected}
		if got != tot {
			bad = append(bad, fmt.Sprintf("%s: got %+v, want %+v", n.ID, got, tot))
		}
		if p.TreeVersion != w.tree.version {
			bad = append(bad, fmt.Sprintf("%s: tree_version %d, want %d", n.ID, p.TreeVersion, w.tree.version))
		}
		var sum Totals
		for id, st := range p.Children {
			sum.Online += st.Online
			sum.Reported += st.Reported
			c, inTree := w.tree.byID[id]
			if !inTree || c.Parent != n.ID {
				bad = append(bad, fmt.Sprintf("%s: child %s is not in the tree", n.ID, id))
				continue
			}
			cur, _ := w.current(id)
			wantSt := ChildState{Type: cur.ChildType, Online: cur.Online, Version: cur.Version, Reported: cur.Reported, Expected: cur.Expected}
			if want[id].Reported == 0 {
				if st.Online != 0 || st.Reported != 0 {
					bad = append(bad, fmt.Sprintf("%s: child %s has %+v, want nothing reported", n.ID, id, st))
				}
				continue
			}
			if st != wantSt {
				bad = append(bad, fmt.Sprintf("%s: child %s is %+v, want %+v", n.ID, id, st, wantSt))
			}
		}
		for _, id := range w.tree.children[n.ID] {
			if _, ok := p.Children[id]; !ok && want[id].Reported > 0 {
				bad = append(bad, fmt.Sprintf("%s: child %s missing", n.ID, id))
			}
		}
		if sum.Online != p.Online || sum.Reported != p.Reported {
			bad = append(bad, fmt.Sprintf("%s: totals %d/%d are not the sums %d/%d", n.ID, p.Online, p.Reported, sum.Online, sum.Reported))
		}
	}
	return bad
}

// render prints the tree with every node's stored document, indented by depth.
func (w *world) render() string {
	var b strings.Builder
	var walk func(id string, indent int)
	walk = func(id string, indent int) {
		n := w.tree.byID[id]
		fmt.Fprintf(&b, "%s%s (%s)", strings.Repeat("  ", indent), id, n.Type)
		switch {
		case w.tree.isLeaf(id):
			if l, ok := w.leaves[id+"/"+n.Type]; ok {
				fmt.Fprintf(&b, " online=%d version=%d", l.Online, l.Version)
			} else {
				b.WriteString(" -")
			}
		default:
			if p, ok := w.parent(id); ok {
				fmt.Fprintf(&b, " online=%d reported=%d/%d rev=%d", p.Online, p.Reported, p.Expected, p.Rev)
			} else {
				b.WriteString(" -")
			}
		}
		b.WriteByte('\n')
		for _, c := range w.tree.children[id] {
			walk(c, indent+1)
		}
	}
	walk(w.tree.root, 0)
	return b.String()
}
