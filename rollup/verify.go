package rollup

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// ViolationKind names one way a tick's stored documents disagree with their leaves and tree.
type ViolationKind string

// The kinds of violations Check reports.
const (
	// KindDuplicate: more than one document for an (id, type, timestamp) key. Readers may see
	// either document (the original system's sudden dips).
	KindDuplicate ViolationKind = "duplicate"
	// KindSum: a parent's online or reported is not the sum over its children map (a counted
	// retry doubles a total this way).
	KindSum ViolationKind = "sum"
	// KindRecompute: a parent's online or reported differs from FullRecompute of the leaves.
	KindRecompute ViolationKind = "recompute"
	// KindExpected: a parent's expected or tree_version differs from the tree of the tick, or
	// it reports more leaves than the tree expects.
	KindExpected ViolationKind = "expected"
	// KindOrphan: an orphan leaf (a leaf document whose id is not in the tree of the tick) is
	// in a parent's children map.
	KindOrphan ViolationKind = "orphan"
	// KindChild: a children map entry that is not a child of the node in the tree (by id and
	// type), or whose value differs from the child's now: a leaf's stored document, a parent
	// child's totals recomputed from its own children (staleChild).
	KindChild ViolationKind = "child"
	// KindMissing: a parent with reported leaves under it has no document.
	KindMissing ViolationKind = "missing"
	// KindInvalid: a document that cannot be read: a parent that store.DecodeParent rejects, or a
	// leaf without string id and type and counts (store.Count) online and version.
	KindInvalid ViolationKind = "invalid"
)

// Violation is one disagreement at a tick. Stored and Expected are the values of Field in the
// document and as recomputed.
type Violation struct {
	Kind     ViolationKind
	Node     string
	Type     string
	Tick     time.Time
	Field    string
	Stored   int64
	Expected int64
	Detail   string
}

// String formats v on one line: kind, node, tick, field stored/expected and the detail.
func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-9s %s (%s) at %s", v.Kind, v.Node, v.Type, v.Tick.UTC().Format(time.RFC3339))
	if v.Field != "" {
		fmt.Fprintf(&b, ": %s stored %d, expected %d", v.Field, v.Stored, v.Expected)
	}
	if v.Detail != "" {
		b.WriteString(": ")
		b.WriteString(v.Detail)
	}
	return b.String()
}

// LeafDoc is a leaf document of a tick: its id and stored value.
type LeafDoc struct {
	ID string
	Leaf
}

// InvalidDoc is a document of a tick that could not be decoded (see KindInvalid).
type InvalidDoc struct {
	ID, Type string
	Reason   string
}

// TickDocs is everything stored for one project at one tick, as Check needs it.
type TickDocs struct {
	Tick time.Time
	// Nodes is the tree version in effect at the tick (nil: the project had no tree then).
	Nodes       []Node
	TreeVersion int
	// Leaves are all leaf documents of the tick (duplicates included).
	Leaves []LeafDoc
	// Parents are all decodable parent documents of the tick (duplicates included).
	Parents []Parent
	// Invalid are the documents that did not decode.
	Invalid []InvalidDoc
}

// Change is what a full recompute (a replay) would write for one parent at a tick.
type Change struct {
	Node, Type string
	Tick       time.Time
	// Stored is the stored document's totals (zero without a document); Want the recompute.
	Stored, Want Totals
	// HasDoc reports whether the parent has a document.
	HasDoc bool
	// Children reports that the children map would change (an entry added, dropped or
	// updated), whether or not the totals do.
	Children bool
	// TreeVersion reports that only the stored tree version would change.
	TreeVersion bool
}

// String formats c as "node tick old new" (online totals), followed by the other fields that
// change.
func (c Change) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %d %d", c.Node, c.Tick.UTC().Format(time.RFC3339), c.Stored.Online, c.Want.Online)
	if c.Stored.Reported != c.Want.Reported {
		fmt.Fprintf(&b, " reported=%d->%d", c.Stored.Reported, c.Want.Reported)
	}
	if c.Stored.Expected != c.Want.Expected {
		fmt.Fprintf(&b, " expected=%d->%d", c.Stored.Expected, c.Want.Expected)
	}
	if !c.HasDoc {
		b.WriteString(" (new document)")
	} else if c.Children {
		b.WriteString(" (children)")
	} else if c.TreeVersion {
		b.WriteString(" (tree version)")
	}
	return b.String()
}

// TickReport is the result of Check for one tick.
type TickReport struct {
	// Checked is the number of parent nodes of the tree checked (one per node and tick).
	Checked int
	// Ignored is the number of parent documents of nodes that are not parents in the tree of
	// the tick (left by a tree edit; no reader or replay uses them).
	Ignored int
	// Orphans is the number of orphan leaves: (id, type) keys of leaf documents that are not
	// a leaf of the tree of the tick with that type (counted nowhere, as replay counts them).
	Orphans int
	// OrphanLeaves are those leaves' documents (one per key), in id and type order.
	OrphanLeaves []LeafDoc
	// Violations are in order: duplicates and invalid documents first, then per node from the
	// deepest level up, in id order.
	Violations []Violation
	// Changes are what a replay of the tick would write, in the same node order.
	Changes []Change
}

// docKey identifies a document within a tick.
type docKey struct{ id, typ string }

// Check compares the stored documents of a tick with a full recompute of its leaves over its
// tree: it finds every violation (see the ViolationKind constants) and every change a replay
// would make. It does no I/O. It returns an error only for an invalid tree.
func Check(d TickDocs) (TickReport, error) {
	c := newTickCheck(d)
	c.checkDocuments()
	c.countOrphansAndIgnored()
	if len(d.Nodes) == 0 {
		return c.r, nil
	}
	totals, err := FullRecompute(d.Nodes, c.leaves)
	if err != nil {
		return c.r, fmt.Errorf("tree version %d: %w", d.TreeVersion, err)
	}
	for _, n := range deepestFirst(d.Nodes, c.byID, c.kids) {
		c.checkNode(n, totals)
	}
	return c.r, nil
}

// tickCheck is one run of Check: the tick's documents indexed by key, its tree indexed by id,
// and the report being built.
type tickCheck struct {
	d TickDocs
	r TickReport
	// count is the number of documents per key (leaves, parents and invalid ones).
	count   map[docKey]int
	parents map[docKey][]Parent
	// leafDocs is each leaf key's current value: the greatest version wins, as in Merge.
	leafDocs map[docKey]Leaf
	// leaves are the current values of the keys that are tree nodes with that type, by id.
	leaves map[string]Leaf
	byID   map[string]Node
	kids   map[string][]Node
	// orphan holds the ids of leaf documents not in the tree (a parent's children entry for
	// one is KindOrphan).
	orphan map[string]bool
}

// newTickCheck indexes the documents and tree of d.
func newTickCheck(d TickDocs) *tickCheck {
	c := &tickCheck{
		d:        d,
		count:    map[docKey]int{},
		parents:  map[docKey][]Parent{},
		leafDocs: make(map[docKey]Leaf, len(d.Leaves)),
		leaves:   make(map[string]Leaf, len(d.Leaves)),
		byID:     make(map[string]Node, len(d.Nodes)),
		kids:     make(map[string][]Node, len(d.Nodes)),
		orphan:   map[string]bool{},
	}
	for _, l := range d.Leaves {
		k := docKey{l.ID, l.Type}
		c.count[k]++
		if cur, ok := c.leafDocs[k]; ok && !leafWins(l.Leaf, cur) {
			continue
		}
		c.leafDocs[k] = l.Leaf
	}
	for _, p := range d.Parents {
		k := docKey{p.ID, p.Type}
		c.count[k]++
		c.parents[k] = append(c.parents[k], p)
	}
	for _, inv := range d.Invalid {
		c.count[docKey{inv.ID, inv.Type}]++
	}
	for _, n := range d.Nodes {
		c.byID[n.ID] = n
		if n.Parent != "" {
			c.kids[n.Parent] = append(c.kids[n.Parent], n)
		}
	}
	for k, l := range c.leafDocs {
		if n, ok := c.byID[k.id]; ok && n.Type == k.typ {
			c.leaves[k.id] = l
		}
	}
	for _, l := range d.Leaves {
		if _, ok := c.byID[l.ID]; !ok {
			c.orphan[l.ID] = true
		}
	}
	return c
}

// add records v at the tick.
func (c *tickCheck) add(v Violation) {
	v.Tick = c.d.Tick
	c.r.Violations = append(c.r.Violations, v)
}

// checkDocuments reports the duplicates, over every document of the tick, in id and type
// order, then the invalid documents.
func (c *tickCheck) checkDocuments() {
	dups := make([]docKey, 0)
	for k, n := range c.count {
		if n > 1 {
			dups = append(dups, k)
		}
	}
	sort.Slice(dups, func(i, j int) bool {
		return dups[i].id < dups[j].id || dups[i].id == dups[j].id && dups[i].typ < dups[j].typ
	})
	for _, k := range dups {
		c.add(Violation{Kind: KindDuplicate, Node: k.id, Type: k.typ, Field: "documents", Stored: int64(c.count[k]), Expected: 1,
			Detail: duplicateDetail(c.parents[k])})
	}
	for _, inv := range c.d.Invalid {
		c.add(Violation{Kind: KindInvalid, Node: inv.ID, Type: inv.Type, Detail: inv.Reason})
	}
}

// countOrphansAndIgnored counts the orphan leaves and the ignored parent documents. A leaf
// document counts as an orphan leaf, as in replay and the read API, whenever it is not a tree
// leaf with its type (unknown id, interior id, another type).
func (c *tickCheck) countOrphansAndIgnored() {
	listed := map[docKey]bool{}
	for _, l := range c.d.Leaves {
		n, ok := c.byID[l.ID]
		k := docKey{l.ID, l.Type}
		if (!ok || n.Type != l.Type || len(c.kids[l.ID]) > 0) && !listed[k] {
			listed[k] = true
			c.r.Orphans++
			c.r.OrphanLeaves = append(c.r.OrphanLeaves, l)
		}
	}
	sort.Slice(c.r.OrphanLeaves, func(i, j int) bool {
		a, b := c.r.OrphanLeaves[i], c.r.OrphanLeaves[j]
		return a.ID < b.ID || a.ID == b.ID && a.Type < b.Type
	})
	for k := range c.parents {
		if n, ok := c.byID[k.id]; !ok || n.Type != k.typ || len(c.kids[k.id]) == 0 {
			c.r.Ignored += len(c.parents[k])
		}
	}
}

// wantChildren returns the children map a replay would build for parent n (versions of parent
// children excluded: they are the children's revisions after the replay).
func (c *tickCheck) wantChildren(n Node, totals map[string]Totals) map[string]ChildState {
	wantKids := map[string]ChildState{}
	for _, ch := range c.kids[n.ID] {
		if len(c.kids[ch.ID]) == 0 {
			if l, ok := c.leaves[ch.ID]; ok {
				wantKids[ch.ID] = ChildState{Type: ch.Type, Online: l.Online, Version: l.Version, Reported: 1, Expected: 1}
			}
			continue
		}
		if t := totals[ch.ID]; t.Reported > 0 || len(c.parents[docKey{ch.ID, ch.Type}]) > 0 {
			wantKids[ch.ID] = ChildState{Type: ch.Type, Online: t.Online, Reported: t.Reported, Expected: t.Expected}
		}
	}
	return wantKids
}

// checkNode checks the documents of tree parent n against the recomputed totals and records
// the changes a replay would make to them.
func (c *tickCheck) checkNode(n Node, totals map[string]Totals) {
	d := c.d
	c.r.Checked++
	want := totals[n.ID]
	docs := c.parents[docKey{n.ID, n.Type}]
	wantKids := c.wantChildren(n, totals)
	if len(docs) == 0 {
		if want.Reported > 0 {
			c.add(Violation{Kind: KindMissing, Node: n.ID, Type: n.Type, Field: "online", Expected: want.Online,
				Detail: fmt.Sprintf("no document; %d of %d leaves under it reported", want.Reported, want.Expected)})
		}
		if len(wantKids) > 0 {
			c.r.Changes = append(c.r.Changes, Change{Node: n.ID, Type: n.Type, Tick: d.Tick, Want: want, Children: true})
		}
		return
	}
	for _, p := range docs {
		ch := Change{Node: n.ID, Type: n.Type, Tick: d.Tick, HasDoc: true, Want: want,
			Stored: Totals{Online: p.Online, Reported: p.Reported, Expected: p.Expected}}
		vs, childrenDiffer := checkParent(p, n, want, wantKids, c.kids, c.byID, c.orphan, c.leafDocs, c.parents, d.TreeVersion)
		for _, v := range vs {
			c.add(v)
		}
		ch.Children = childrenDiffer
		ch.TreeVersion = p.TreeVersion != d.TreeVersion
		if ch.Stored != ch.Want || ch.Children || ch.TreeVersion {
			c.r.Changes = append(c.r.Changes, ch)
		}
	}
}

// checkParent checks one stored parent document of tree node n; it also reports whether its
// children map differs from wantKids.
func checkParent(p Parent, n Node, want Totals, wantKids map[string]ChildState, kids map[string][]Node, byID map[string]Node,
	orphan map[string]bool, leafDocs map[docKey]Leaf, parents map[docKey][]Parent, treeVersion int) ([]Violation, bool) {
	var out []Violation
	v := func(kind ViolationKind, field string, stored, expected int64, detail string) {
		out = append(out, Violation{Kind: kind, Node: n.ID, Type: n.Type, Field: field, Stored: stored, Expected: expected, Detail: detail})
	}
	var sumOnline, sumReported int64
	for _, st := range p.Children {
		sumOnline += st.Online
		sumReported += st.Reported
	}
	if p.Online != sumOnline {
		detail := fmt.Sprintf("not the sum over its %d children", len(p.Children))
		if sumOnline != 0 && p.Online == 2*sumOnline {
			detail += ": exactly twice the sum (a whole-batch retry counted twice?)"
		}
		v(KindSum, "online", p.Online, sumOnline, detail)
	}
	if p.Reported != sumReported {
		v(KindSum, "reported", p.Reported, sumReported, fmt.Sprintf("not the sum over its %d children", len(p.Children)))
	}
	if p.Online != want.Online {
		v(KindRecompute, "online", p.Online, want.Online, fmt.Sprintf("%d of %d leaves under it reported", want.Reported, want.Expected))
	}
	if p.Reported != want.Reported {
		v(KindRecompute, "reported", p.Reported, want.Reported, "")
	}
	if p.Expected != want.Expected {
		v(KindExpected, "expected", p.Expected, want.Expected, fmt.Sprintf("leaves under it in tree version %d", treeVersion))
	}
	if p.TreeVersion != treeVersion {
		v(KindExpected, "tree_version", int64(p.TreeVersion), int64(treeVersion), "computed with another tree version")
	}
	if p.Reported > p.Expected {
		v(KindExpected, "reported", p.Reported, p.Expected, "more leaves reported than expected")
	}
	isKid := make(map[string]string, len(kids[n.ID]))
	for _, c := range kids[n.ID] {
		isKid[c.ID] = c.Type
	}
	ids := make([]string, 0, len(p.Children))
	for id := range p.Children {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	differ := len(p.Children) != len(wantKids)
	for _, id := range ids {
		st := p.Children[id]
		w, wanted := wantKids[id]
		if !wanted {
			differ = true
		} else {
			if len(kids[id]) > 0 {
				w.Version = st.Version // a parent child's revision after a replay is not predictable
			}
			if st != w {
				differ = true
			}
		}
		switch typ, ok := isKid[id]; {
		case orphan[id]:
			v(KindOrphan, "children."+id+".online", st.Online, 0, fmt.Sprintf("orphan leaf (not in tree version %d) counted", treeVersion))
		case !ok || typ != st.Type:
			v(KindChild, "children."+id+".online", st.Online, 0, fmt.Sprintf("%s (%s) is not a child of %s in tree version %d", id, st.Type, n.ID, treeVersion))
		default:
			if msg, cur := staleChild(st, w, wanted, len(kids[id]) > 0); msg != "" {
				v(KindChild, "children."+id+".online", st.Online, cur, msg)
			}
		}
	}
	return out, differ
}

// staleChild compares a children map entry with the child's current value w (a leaf's
// document, a parent's recomputed totals; wanted false: nothing under the child reported); it
// returns a description of the difference ("" if none) and the current online value.
func staleChild(st, w ChildState, wanted, parent bool) (string, int64) {
	switch {
	case !wanted && st.Online == 0 && st.Reported == 0:
		return "", 0 // an empty entry: harmless (a replay drops it)
	case !wanted && parent:
		return "stale: no leaf under the child reported", 0
	case !wanted:
		return "stale: the leaf has no document", 0
	case parent && (st.Online != w.Online || st.Reported != w.Reported || st.Expected != w.Expected):
		return fmt.Sprintf("stale: the child's recomputed online %d, reported %d, expected %d; the entry %d, %d, %d",
			w.Online, w.Reported, w.Expected, st.Online, st.Reported, st.Expected), w.Online
	case !parent && (st.Online != w.Online || st.Version != w.Version):
		return fmt.Sprintf("stale: the leaf has online %d version %d; the entry %d version %d", w.Online, w.Version, st.Online, st.Version), w.Online
	}
	return "", 0
}

// leafWins reports whether l replaces cur as a key's value: the greater version, then online.
func leafWins(l, cur Leaf) bool {
	if l.Version != cur.Version {
		return l.Version > cur.Version
	}
	return l.Online > cur.Online
}

// duplicateDetail describes duplicate parent documents by their totals.
func duplicateDetail(docs []Parent) string {
	if len(docs) < 2 {
		return "readers may see either document"
	}
	parts := make([]string, len(docs))
	for i, p := range docs {
		parts[i] = fmt.Sprintf("online %d (version %d)", p.Online, p.Rev)
	}
	return "readers may see either document: " + strings.Join(parts, ", ")
}

// deepestFirst returns the parents of the tree (nodes with children) from the deepest level
// up, in id order within a level.
func deepestFirst(nodes []Node, byID map[string]Node, kids map[string][]Node) []Node {
	depth := make(map[string]int, len(nodes))
	var depthOf func(id string) int
	depthOf = func(id string) int {
		if dd, ok := depth[id]; ok {
			return dd
		}
		dd := 0
		if p := byID[id].Parent; p != "" {
			dd = depthOf(p) + 1
		}
		depth[id] = dd
		return dd
	}
	out := make([]Node, 0, len(kids))
	for _, n := range nodes {
		if len(kids[n.ID]) > 0 {
			depthOf(n.ID)
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		di, dj := depth[out[i].ID], depth[out[j].ID]
		if di != dj {
			return di > dj
		}
		return out[i].ID < out[j].ID
	})
	return out
}
