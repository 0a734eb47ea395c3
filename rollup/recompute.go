package rollup

import (
	"fmt"
	"sort"
)

// Node is a tree node as FullRecompute sees it (Parent "" for the root). It has the fields of
// tree.Node, so a tree.Node converts to it: rollup.Node(n).
type Node struct {
	ID, Type, Parent string
}

// Leaf is the stored value of a leaf document: its type, online count and version.
type Leaf struct {
	Type    string
	Online  int64
	Version int64
}

// Totals is what a node's document must hold after every contribution is merged: the online
// sum over the reported leaves under it, how many of them reported, and how many the tree has.
type Totals struct {
	Online   int64
	Reported int64
	Expected int64
}

// FullRecompute is the naive reference for Merge: for every node of the tree (leaves included)
// it sums, straight from the leaves, the values of the reported leaves under it. A tree leaf is
// a node without children; it is reported if leaves has an entry for its id with its type.
// Entries of leaves that are not tree leaves (orphans, interior ids, another type) count
// nowhere. It returns an error for a duplicate id, an unknown parent or a cycle.
func FullRecompute(nodes []Node, leaves map[string]Leaf) (map[string]Totals, error) {
	byID := make(map[string]Node, len(nodes))
	hasChild := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		if _, dup := byID[n.ID]; dup {
			return nil, fmt.Errorf("duplicate node %q", n.ID)
		}
		byID[n.ID] = n
		if n.Parent != "" {
			hasChild[n.Parent] = true
		}
	}
	out := make(map[string]Totals, len(nodes))
	ids := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if n.Parent != "" {
			if _, ok := byID[n.Parent]; !ok {
				return nil, fmt.Errorf("node %q: unknown parent %q", n.ID, n.Parent)
			}
		}
		out[n.ID] = Totals{}
		ids = append(ids, n.ID)
	}
	sort.Strings(ids) // deterministic error for a cycle
	for _, id := range ids {
		cur := id
		for steps := 0; cur != ""; steps++ {
			if steps > len(nodes) {
				return nil, fmt.Errorf("cycle through node %q", id)
			}
			cur = byID[cur].Parent
		}
	}
	for _, id := range ids {
		n := byID[id]
		if hasChild[id] {
			continue
		}
		leaf, reported := leaves[id]
		reported = reported && leaf.Type == n.Type
		// Walk up from the leaf to the root, the leaf itself included.
		for cur := id; cur != ""; cur = byID[cur].Parent {
			t := out[cur]
			t.Expected++
			if reported {
				t.Reported++
				t.Online += leaf.Online
			}
			out[cur] = t
		}
	}
	return out, nil
}
