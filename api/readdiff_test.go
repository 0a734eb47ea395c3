package api

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/tree"
)

// diffState builds a tickState of nodes with the given leaf documents, and a document for
// every parent with a reported leaf under it, holding their sum (as the watcher writes).
func diffState(t testing.TB, nodes []tree.Node, leaves map[string]int64) tickState {
	t.Helper()
	tr, err := tree.Build("p", nodes)
	if err != nil {
		t.Fatal(err)
	}
	st := tickState{tree: tr, version: len(nodes), docs: map[string]int64{}}
	for id, v := range leaves {
		st.docs[id] = v
		for p, ok := tr.Parent(id); ok; p, ok = tr.Parent(p.ID) {
			st.docs[p.ID] += v
		}
	}
	return st
}

func share(v float64) *float64 { return &v }

func TestDiffTicks(t *testing.T) {
	base := []tree.Node{{ID: "r", Type: "project"}, {ID: "g1", Type: "group", Parent: "r"}, {ID: "g2", Type: "group", Parent: "r"},
		{ID: "a", Type: "process", Parent: "g1"}, {ID: "b", Type: "process", Parent: "g1"}, {ID: "c", Type: "process", Parent: "g2"}}
	tests := []struct {
		name     string
		a, b     tickState
		node     string
		root     apiv1.DiffNode
		nodes    []apiv1.DiffNode
		silent   []apiv1.SilentLeaf
		silentOn int64
	}{
		{
			name: "a real drop and a leaf gone silent",
			a:    diffState(t, base, map[string]int64{"a": 10, "b": 20, "c": 30}),
			b:    diffState(t, base, map[string]int64{"a": 10, "c": 10}),
			node: "r",
			root: apiv1.DiffNode{ID: "r", Type: "project", From: 60, To: 20, Change: -40, Share: share(1), SilentLeaves: 1, SilentOnline: 20, ReportedChange: -20},
			nodes: []apiv1.DiffNode{
				{ID: "b", Type: "process", Parent: "g1", Leaf: true, From: 20, To: 0, Change: -20, Share: share(0.5), SilentLeaves: 1, SilentOnline: 20},
				{ID: "c", Type: "process", Parent: "g2", Leaf: true, From: 30, To: 10, Change: -20, Share: share(0.5), ReportedChange: -20},
				{ID: "g1", Type: "group", Parent: "r", From: 30, To: 10, Change: -20, Share: share(0.5), SilentLeaves: 1, SilentOnline: 20},
				{ID: "g2", Type: "group", Parent: "r", From: 30, To: 10, Change: -20, Share: share(0.5), ReportedChange: -20},
			},
			silent:   []apiv1.SilentLeaf{{ID: "b", Type: "process", Parent: "g1", Online: 20}},
			silentOn: 20,
		},
		{
			name: "no change at the root: no shares, moves listed",
			a:    diffState(t, base, map[string]int64{"a": 5, "c": 5}),
			b:    diffState(t, base, map[string]int64{"a": 8, "c": 2}),
			node: "r",
			root: apiv1.DiffNode{ID: "r", Type: "project", From: 10, To: 10},
			nodes: []apiv1.DiffNode{
				{ID: "a", Type: "process", Parent: "g1", Leaf: true, From: 5, To: 8, Change: 3, ReportedChange: 3},
				{ID: "c", Type: "process", Parent: "g2", Leaf: true, From: 5, To: 2, Change: -3, ReportedChange: -3},
				{ID: "g1", Type: "group", Parent: "r", From: 5, To: 8, Change: 3, ReportedChange: 3},
				{ID: "g2", Type: "group", Parent: "r", From: 5, To: 2, Change: -3, ReportedChange: -3},
			},
		},
		{
			name: "a subtree; a leaf removed from the tree is a change, not silence",
			a:    diffState(t, base, map[string]int64{"a": 4, "b": 6}),
			b:    diffState(t, base[:4], map[string]int64{"a": 4}),
			node: "g1",
			root: apiv1.DiffNode{ID: "g1", Type: "group", Parent: "r", From: 10, To: 4, Change: -6, Share: share(1), ReportedChange: -6},
			nodes: []apiv1.DiffNode{
				{ID: "b", Type: "process", Parent: "g1", Leaf: true, From: 6, Change: -6, Share: share(1), ReportedChange: -6},
			},
		},
		{
			name: "a new leaf",
			a:    diffState(t, base[:4], map[string]int64{"a": 4}),
			b:    diffState(t, base, map[string]int64{"a": 4, "b": 2}),
			node: "r",
			root: apiv1.DiffNode{ID: "r", Type: "project", From: 4, To: 6, Change: 2, Share: share(1), ReportedChange: 2},
			nodes: []apiv1.DiffNode{
				{ID: "b", Type: "process", Parent: "g1", Leaf: true, To: 2, Change: 2, Share: share(1), ReportedChange: 2},
				{ID: "g1", Type: "group", Parent: "r", From: 4, To: 6, Change: 2, Share: share(1), ReportedChange: 2},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := diffTicks(tt.a, tt.b, tt.node, 100)
			if tt.silent == nil {
				tt.silent = []apiv1.SilentLeaf{}
			}
			if !reflect.DeepEqual(got.Root, tt.root) || !reflect.DeepEqual(got.Nodes, tt.nodes) || !reflect.DeepEqual(got.Silent, tt.silent) ||
				got.SilentOnline != tt.silentOn || got.NodesTotal != len(tt.nodes) || got.SilentTotal != len(tt.silent) {
				t.Errorf("got root %s\nnodes %s\nsilent %+v (%d)\nwant root %s\nnodes %s\nsilent %+v (%d)",
					fmtDiff(got.Root), fmtDiffs(got.Nodes), got.Silent, got.SilentOnline, fmtDiff(tt.root), fmtDiffs(tt.nodes), tt.silent, tt.silentOn)
			}
		})
	}
}

func fmtDiff(d apiv1.DiffNode) string {
	s := "nil"
	if d.Share != nil {
		s = strconv.FormatFloat(*d.Share, 'g', 4, 64)
	}
	return fmt.Sprintf("{%s %s ^%s leaf=%v %d→%d Δ%d share %s silent %d/%d reported Δ%d}", d.ID, d.Type, d.Parent, d.Leaf, d.From, d.To, d.Change, s,
		d.SilentLeaves, d.SilentOnline, d.ReportedChange)
}

func fmtDiffs(ds []apiv1.DiffNode) string {
	out := ""
	for _, d := range ds {
		out += "\n  " + fmtDiff(d)
	}
	return out
}

// TestDiffTicksRandom checks diffTicks against a naive diff on random trees (edited
// between the two ticks) and random reports.
func TestDiffTicksRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("ROLLUP_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("ROLLUP_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	for round := range 200 {
		nodesA := tree.Generate("p", 1+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(4))
		nodesB := slices.Clone(nodesA)
		if rng.IntN(2) == 0 { // an edit: a leaf removed, a leaf added
			nodesB = slices.DeleteFunc(nodesB, func(n tree.Node) bool { return n.ID == nodesA[len(nodesA)-1].ID })
			nodesB = append(nodesB, tree.Node{ID: "new-leaf", Type: tree.TypeProcess, Parent: nodesA[1].ID})
		}
		report := func(nodes []tree.Node) map[string]int64 {
			tr, _ := tree.Build("p", nodes)
			out := map[string]int64{}
			for _, l := range tr.Leaves() {
				if rng.IntN(4) > 0 {
					out[l.ID] = int64(rng.IntN(20))
				}
			}
			return out
		}
		a, b := diffState(t, nodesA, report(nodesA)), diffState(t, nodesB, report(nodesB))
		node := a.tree.Root().ID
		if rng.IntN(3) == 0 {
			node = nodesA[1].ID
		}
		n := 1 + rng.IntN(30)
		got := diffTicks(a, b, node, n)
		want := naiveDiff(a, b, node)
		if !reflect.DeepEqual(got.Root, want.Root) || got.NodesTotal != len(want.Nodes) || got.SilentTotal != len(want.Silent) ||
			!reflect.DeepEqual(got.Nodes, want.Nodes[:min(n, len(want.Nodes))]) || !reflect.DeepEqual(got.Silent, want.Silent[:min(n, len(want.Silent))]) ||
			got.SilentOnline != want.SilentOnline {
			t.Fatalf("round %d (node %s, n %d):\ngot  root %s nodes %s\nsilent %+v\nwant root %s nodes %s\nsilent %+v", round, node, n,
				fmtDiff(got.Root), fmtDiffs(got.Nodes), got.Silent, fmtDiff(want.Root), fmtDiffs(want.Nodes), want.Silent)
		}
	}
}

// naiveDiff is the definition, node by node: totals summed from the reported leaves under
// the node in each tick's tree, silence per leaf, shares, then a sort by |change| and id.
func naiveDiff(a, b tickState, node string) apiv1.DiffResponse {
	under := func(tr *tree.Tree, id, top string) bool {
		for x := id; ; {
			if x == top {
				return true
			}
			p, ok := tr.Parent(x)
			if !ok {
				return false
			}
			x = p.ID
		}
	}
	total := func(st tickState, id string) int64 {
		var s int64
		for _, l := range st.tree.Leaves() {
			if under(st.tree, l.ID, id) {
				s += st.docs[l.ID]
			}
		}
		return s
	}
	ids := map[string]bool{}
	for _, st := range []tickState{a, b} {
		for _, nd := range st.tree.Nodes() {
			if st.tree.Has(node) && under(st.tree, nd.ID, node) {
				ids[nd.ID] = true
			}
		}
	}
	silent := map[string]int64{}
	for id := range ids {
		_, ra := a.docs[id]
		_, rb := b.docs[id]
		na, inA := a.tree.Node(id)
		nb, inB := b.tree.Node(id)
		if ra && !rb && inA && inB && na.Type == nb.Type && a.tree.IsLeaf(id) && b.tree.IsLeaf(id) {
			silent[id] = a.docs[id]
		}
	}
	mk := func(id string) apiv1.DiffNode {
		tr := b.tree
		if !tr.Has(id) {
			tr = a.tree
		}
		nd, _ := tr.Node(id)
		d := apiv1.DiffNode{ID: id, Type: nd.Type, Parent: nd.Parent, Leaf: tr.IsLeaf(id)}
		if a.tree.Has(id) {
			d.From = total(a, id)
		}
		if b.tree.Has(id) {
			d.To = total(b, id)
		}
		for l, v := range silent {
			if under(b.tree, l, id) {
				d.SilentLeaves++
				d.SilentOnline += v
			}
		}
		d.Change = d.To - d.From
		d.ReportedChange = d.Change + d.SilentOnline
		return d
	}
	out := apiv1.DiffResponse{Root: mk(node), Nodes: []apiv1.DiffNode{}, Silent: []apiv1.SilentLeaf{}}
	for id := range ids {
		if d := mk(id); id != node && (d.Change != 0 || d.SilentLeaves > 0) {
			if out.Root.Change != 0 {
				d.Share = share(float64(d.Change) / float64(out.Root.Change))
			}
			out.Nodes = append(out.Nodes, d)
		}
	}
	if out.Root.Change != 0 {
		out.Root.Share = share(1)
	}
	for l, v := range silent {
		nd, _ := b.tree.Node(l)
		out.Silent = append(out.Silent, apiv1.SilentLeaf{ID: l, Type: nd.Type, Parent: nd.Parent, Online: v})
		out.SilentOnline += v
	}
	slices.SortFunc(out.Nodes, func(x, y apiv1.DiffNode) int {
		ax, ay := max(x.Change, -x.Change), max(y.Change, -y.Change)
		if ax != ay {
			if ax > ay {
				return -1
			}
			return 1
		}
		if x.ID < y.ID {
			return -1
		}
		return 1
	})
	slices.SortFunc(out.Silent, func(x, y apiv1.SilentLeaf) int {
		if x.Online != y.Online {
			if x.Online > y.Online {
				return -1
			}
			return 1
		}
		if x.ID < y.ID {
			return -1
		}
		return 1
	})
	return out
}
