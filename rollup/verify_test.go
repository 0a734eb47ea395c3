package rollup

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var verifyTick = time.Date(2024, 5, 1, 10, 5, 0, 0, time.UTC)

// build returns the parent documents a correct replay writes for leaves over nodes: each
// parent rebuilt bottom-up from its children's current values, as recompute.Replay does.
func build(t *testing.T, nodes []Node, leaves []LeafDoc, treeVersion int) []Parent {
	t.Helper()
	kids := map[string][]Node{}
	byID := map[string]Node{}
	for _, n := range nodes {
		byID[n.ID] = n
		if n.Parent != "" {
			kids[n.Parent] = append(kids[n.Parent], n)
		}
	}
	totals, err := FullRecompute(nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	leafOf := map[string]LeafDoc{}
	for _, l := range leaves {
		leafOf[l.ID] = l
	}
	built := map[string]Parent{}
	var out []Parent
	for _, n := range deepestFirst(nodes, byID, kids) {
		var in []Contribution
		children := map[string]string{}
		for _, c := range kids[n.ID] {
			children[c.ID] = c.Type
			if len(kids[c.ID]) == 0 {
				if l, ok := leafOf[c.ID]; ok {
					in = append(in, LeafContribution(c.ID, l.Type, l.Online, l.Version))
				}
			} else if p, ok := built[c.ID]; ok {
				in = append(in, p.Contribution())
			}
		}
		p, changed := Rebuild(Parent{ID: n.ID, Type: n.Type, Project: "p", Timestamp: verifyTick}, in,
			ChildMap(children, totals[n.ID].Expected, treeVersion))
		if changed {
			built[n.ID] = p
			out = append(out, p)
		}
	}
	return out
}

// randomTick returns a random tree (depth up to 4), leaf documents for most of its leaves
// (some of another type), a few orphans, and the parents a replay builds.
func randomTick(t *testing.T, r *rand.Rand) TickDocs {
	nodes := []Node{{ID: "root", Type: "project"}}
	n := 2 + r.IntN(40)
	for i := range n {
		parent := nodes[r.IntN(len(nodes))]
		nodes = append(nodes, Node{ID: fmt.Sprintf("n%02d", i), Type: []string{"group", "server", "process"}[r.IntN(3)], Parent: parent.ID})
	}
	hasChild := map[string]bool{}
	for _, nd := range nodes {
		hasChild[nd.Parent] = true
	}
	var leaves []LeafDoc
	for _, nd := range nodes {
		if hasChild[nd.ID] || r.IntN(5) == 0 {
			continue
		}
		typ := nd.Type
		if r.IntN(10) == 0 {
			typ = "other"
		}
		leaves = append(leaves, LeafDoc{ID: nd.ID, Leaf: Leaf{Type: typ, Online: r.Int64N(50), Version: 1 + r.Int64N(9)}})
	}
	for i := range r.IntN(3) {
		leaves = append(leaves, LeafDoc{ID: fmt.Sprintf("orphan%d", i), Leaf: Leaf{Type: "process", Online: 1 + r.Int64N(9), Version: 1}})
	}
	return TickDocs{Tick: verifyTick, Nodes: nodes, TreeVersion: 3, Leaves: leaves, Parents: build(t, nodes, leaves, 3)}
}

func kinds(vs []Violation) []ViolationKind {
	var out []ViolationKind
	for _, v := range vs {
		if !slices.Contains(out, v.Kind) {
			out = append(out, v.Kind)
		}
	}
	slices.Sort(out)
	return out
}

// TestCheckRandom checks that correct parents give no violation and no change, and that each
// corruption is reported with its kind (and, where a replay repairs it, as a change).
func TestCheckRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	corruptions := []struct {
		name string
		want ViolationKind
		// apply corrupts d and reports false when d offers nothing to corrupt.
		apply   func(d *TickDocs, p int) bool
		changes bool
	}{
		{"doubled", KindSum, func(d *TickDocs, p int) bool {
			if d.Parents[p].Online == 0 {
				return false
			}
			d.Parents[p].Online *= 2
			return true
		}, true},
		{"orphan counted", KindOrphan, func(d *TickDocs, p int) bool {
			for _, l := range d.Leaves {
				if strings.HasPrefix(l.ID, "orphan") {
					q := &d.Parents[p]
					q.Children = clone(q.Children)
					q.Children[l.ID] = ChildState{Type: l.Type, Online: l.Online, Version: l.Version, Reported: 1, Expected: 1}
					q.Online += l.Online
					q.Reported++
					return true
				}
			}
			return false
		}, true},
		{"missing", KindMissing, func(d *TickDocs, p int) bool {
			if d.Parents[p].Reported == 0 {
				return false
			}
			d.Parents = slices.Delete(d.Parents, p, p+1)
			return true
		}, true},
		{"duplicate", KindDuplicate, func(d *TickDocs, p int) bool {
			d.Parents = append(d.Parents, d.Parents[p])
			return true
		}, false},
		{"stale leaf", KindChild, func(d *TickDocs, _ int) bool {
			for i, l := range d.Leaves {
				for _, q := range d.Parents {
					if st, ok := q.Children[l.ID]; ok && st.Type == l.Type {
						d.Leaves[i].Online++
						d.Leaves[i].Version++
						return true
					}
				}
			}
			return false
		}, true},
		{"expected", KindExpected, func(d *TickDocs, p int) bool {
			d.Parents[p].Expected++
			return true
		}, true},
		{"invalid", KindInvalid, func(d *TickDocs, p int) bool {
			d.Invalid = append(d.Invalid, InvalidDoc{ID: "x", Type: "server", Reason: "parent document: online: missing"})
			return true
		}, false},
	}
	tried := map[string]int{}
	for range 300 {
		d := randomTick(t, r)
		rep, err := Check(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Violations) > 0 || len(rep.Changes) > 0 {
			t.Fatalf("correct parents: %v %v\n%+v", rep.Violations, rep.Changes, d)
		}
		if rep.Checked != countParents(d.Nodes) {
			t.Fatalf("checked %d of %d parents", rep.Checked, countParents(d.Nodes))
		}
		if len(d.Parents) == 0 {
			continue
		}
		c := corruptions[r.IntN(len(corruptions))]
		bad := d
		bad.Parents = slices.Clone(d.Parents)
		bad.Leaves = slices.Clone(d.Leaves)
		if !c.apply(&bad, r.IntN(len(bad.Parents))) {
			continue
		}
		tried[c.name]++
		rep, err = Check(bad)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(kinds(rep.Violations), c.want) {
			t.Fatalf("%s: kinds %v, want %s: %v", c.name, kinds(rep.Violations), c.want, rep.Violations)
		}
		if c.changes && len(rep.Changes) == 0 {
			t.Fatalf("%s: no change listed: %v", c.name, rep.Violations)
		}
	}
	for _, c := range corruptions {
		if tried[c.name] < 5 {
			t.Errorf("corruption %s tried %d times", c.name, tried[c.name])
		}
	}
}

func clone(m map[string]ChildState) map[string]ChildState {
	out := make(map[string]ChildState, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func countParents(nodes []Node) int {
	has := map[string]bool{}
	for _, n := range nodes {
		if n.Parent != "" {
			has[n.Parent] = true
		}
	}
	return len(has)
}

// TestCheckCases pins the reports of small cases, formatted.
func TestCheckCases(t *testing.T) {
	nodes := []Node{{ID: "r", Type: "project"}, {ID: "s1", Type: "server", Parent: "r"}, {ID: "s2", Type: "server", Parent: "r"},
		{ID: "a", Type: "process", Parent: "s1"}, {ID: "b", Type: "process", Parent: "s1"}, {ID: "c", Type: "process", Parent: "s2"}}
	leaves := []LeafDoc{{"a", Leaf{"process", 3, 1}}, {"b", Leaf{"process", 4, 1}}, {"c", Leaf{"process", 5, 1}}}
	good := func(t *testing.T) []Parent { return build(t, nodes, leaves, 1) }
	find := func(ps []Parent, id string) int {
		return slices.IndexFunc(ps, func(p Parent) bool { return p.ID == id })
	}
	const at = "2024-05-01T10:05:00Z"
	tests := []struct {
		name       string
		mutate     func(d *TickDocs)
		violations []string
		changes    []string
		ignored    int
	}{
		{name: "correct", mutate: func(*TickDocs) {}},
		{name: "doubled server", mutate: func(d *TickDocs) { d.Parents[find(d.Parents, "s1")].Online = 14 },
			violations: []string{
				"sum       s1 (server) at " + at + ": online stored 14, expected 7: not the sum over its 2 children: exactly twice the sum (a whole-batch retry counted twice?)",
				"recompute s1 (server) at " + at + ": online stored 14, expected 7: 2 of 2 leaves under it reported",
			},
			changes: []string{"s1 " + at + " 14 7"}},
		{name: "dip from a duplicate", mutate: func(d *TickDocs) {
			p := d.Parents[find(d.Parents, "r")]
			p.Children = map[string]ChildState{"s1": p.Children["s1"]}
			p.Online, p.Reported = 7, 2
			d.Parents = append(d.Parents, p)
		},
			violations: []string{
				"duplicate r (project) at " + at + ": documents stored 2, expected 1: readers may see either document: online 12 (version 1), online 7 (version 1)",
				"recompute r (project) at " + at + ": online stored 7, expected 12: 3 of 3 leaves under it reported",
				"recompute r (project) at " + at + ": reported stored 2, expected 3",
			},
			changes: []string{"r " + at + " 7 12 reported=2->3 (children)"}},
		{name: "missing and stale", mutate: func(d *TickDocs) {
			d.Parents = slices.Delete(d.Parents, find(d.Parents, "s2"), find(d.Parents, "s2")+1)
			d.Leaves[0].Online, d.Leaves[0].Version = 9, 2
		},
			violations: []string{
				"recompute s1 (server) at " + at + ": online stored 7, expected 13: 2 of 2 leaves under it reported",
				"child     s1 (server) at " + at + ": children.a.online stored 3, expected 9: stale: the leaf has online 9 version 2; the entry 3 version 1",
				"missing   s2 (server) at " + at + ": online stored 0, expected 5: no document; 1 of 1 leaves under it reported",
				"recompute r (project) at " + at + ": online stored 12, expected 18: 3 of 3 leaves under it reported",
				"child     r (project) at " + at + ": children.s1.online stored 7, expected 13: stale: the child's recomputed online 13, reported 2, expected 2; the entry 7, 2, 2",
			},
			changes: []string{"s1 " + at + " 7 13 (children)", "s2 " + at + " 0 5 reported=0->1 expected=0->1 (new document)", "r " + at + " 12 18 (children)"}},
		{name: "orphan and foreign child, tree version, ignored doc", mutate: func(d *TickDocs) {
			d.Leaves = append(d.Leaves, LeafDoc{"ghost", Leaf{"process", 2, 1}})
			i := find(d.Parents, "s2")
			p := &d.Parents[i]
			p.Children = clone(p.Children)
			p.Children["ghost"] = ChildState{Type: "process", Online: 2, Version: 1, Reported: 1, Expected: 1}
			p.Children["a"] = ChildState{Type: "process", Online: 0, Version: 1, Reported: 1, Expected: 1}
			p.Online, p.Reported = 7, 3
			p.TreeVersion = 0
			d.Parents = append(d.Parents, Parent{ID: "a", Type: "server", Rev: 1, Timestamp: verifyTick}) // a leaf in the tree
		},
			violations: []string{
				"recompute s2 (server) at " + at + ": online stored 7, expected 5: 1 of 1 leaves under it reported",
				"recompute s2 (server) at " + at + ": reported stored 3, expected 1",
				"expected  s2 (server) at " + at + ": tree_version stored 0, expected 1: computed with another tree version",
				"expected  s2 (server) at " + at + ": reported stored 3, expected 1: more leaves reported than expected",
				"child     s2 (server) at " + at + ": children.a.online stored 0, expected 0: a (process) is not a child of s2 in tree version 1",
				"orphan    s2 (server) at " + at + ": children.ghost.online stored 2, expected 0: orphan leaf (not in tree version 1) counted",
			},
			changes: []string{"s2 " + at + " 7 5 reported=3->1 (children)"}, ignored: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := TickDocs{Tick: verifyTick, Nodes: nodes, TreeVersion: 1, Leaves: slices.Clone(leaves), Parents: good(t)}
			tc.mutate(&d)
			rep, err := Check(d)
			if err != nil {
				t.Fatal(err)
			}
			var got, changes []string
			for _, v := range rep.Violations {
				got = append(got, v.String())
			}
			for _, c := range rep.Changes {
				changes = append(changes, c.String())
			}
			if !slices.Equal(got, tc.violations) {
				t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.violations, "\n"))
			}
			if !slices.Equal(changes, tc.changes) {
				t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(changes, "\n"), strings.Join(tc.changes, "\n"))
			}
			if rep.Checked != 3 || rep.Ignored != tc.ignored {
				t.Errorf("checked %d ignored %d", rep.Checked, rep.Ignored)
			}
		})
	}
	if _, err := Check(TickDocs{Nodes: []Node{{ID: "a", Type: "t", Parent: "b"}, {ID: "b", Type: "t", Parent: "a"}}}); err == nil {
		t.Error("a cyclic tree checked")
	}
	rep, err := Check(TickDocs{Leaves: leaves, Parents: good(t)})
	if err != nil || rep.Checked != 0 || rep.Orphans != 3 || rep.Ignored != 3 || len(rep.Violations) != 0 {
		t.Errorf("no tree: %+v, %v", rep, err)
	}
	// Without a tree every leaf is an orphan, and each is named once, in id order.
	var ids []string
	for _, l := range rep.OrphanLeaves {
		ids = append(ids, l.ID)
	}
	if want := slices.Sorted(slices.Values(ids)); len(ids) != 3 || !slices.Equal(ids, slices.Compact(want)) {
		t.Errorf("orphan leaves %v, want 3 distinct ids in order", ids)
	}
}
