package tree

import "slices"

// Node is one node of a project's hierarchy as imported: its id, its type and the id of its
// parent ("" for the root).
type Node struct {
	// ID names the node; unique within a deployment (see ValidateID).
	ID string `json:"id" yaml:"id"`
	// Type is the count type the node is reported under (see ValidateType).
	Type string `json:"type" yaml:"type"`
	// Parent is the id of the parent node, "" for the root.
	Parent string `json:"parent,omitempty" yaml:"parent,omitempty"`
}

// Tree is a validated, immutable hierarchy: exactly one root, every other node reachable from
// it. Build it with Build. All lookups are map or slice reads (O(1)), and the methods that
// return a slice of k nodes cost O(k); a Tree is safe for concurrent use.
type Tree struct {
	project string
	nodes   []Node           // in Build order
	index   map[string]int32 // id → position in nodes
	parent  []int32          // -1 for the root
	// children of node i are childIdx[childOff[i]:childOff[i+1]] (in Build order).
	childOff []int32
	childIdx []int32
	leaves   []int32 // leaves under each node (1 for a leaf)
	depth    []int32 // 0 for the root
	levels   [][]int32
	root     int32
}

// Project returns the project the tree belongs to.
func (t *Tree) Project() string { return t.project }

// Root returns the root node.
func (t *Tree) Root() Node { return t.nodes[t.root] }

// Len returns the number of nodes.
func (t *Tree) Len() int { return len(t.nodes) }

// Nodes returns every node, in the order given to Build.
func (t *Tree) Nodes() []Node { return slices.Clone(t.nodes) }

// Has reports whether id is a node of the tree.
func (t *Tree) Has(id string) bool {
	_, ok := t.index[id]
	return ok
}

// Node returns the node with that id.
func (t *Tree) Node(id string) (Node, bool) {
	i, ok := t.index[id]
	if !ok {
		return Node{}, false
	}
	return t.nodes[i], true
}

// Parent returns the parent of node id; false for the root and for ids not in the tree.
func (t *Tree) Parent(id string) (Node, bool) {
	i, ok := t.index[id]
	if !ok || t.parent[i] < 0 {
		return Node{}, false
	}
	return t.nodes[t.parent[i]], true
}

// Children returns the children of node id in Build order (nil for a leaf or an unknown id).
// The slice is the caller's.
func (t *Tree) Children(id string) []Node {
	i, ok := t.index[id]
	if !ok {
		return nil
	}
	return t.collect(t.childIdx[t.childOff[i]:t.childOff[i+1]])
}

// ChildCount returns the number of children of node id (0 for a leaf or an unknown id).
func (t *Tree) ChildCount(id string) int {
	i, ok := t.index[id]
	if !ok {
		return 0
	}
	return int(t.childOff[i+1] - t.childOff[i])
}

// IsLeaf reports whether id is a node without children (false for ids not in the tree).
func (t *Tree) IsLeaf(id string) bool {
	i, ok := t.index[id]
	return ok && t.childOff[i] == t.childOff[i+1]
}

// LeafCount returns the number of leaves under node id: 1 for a leaf, 0 for an unknown id. It
// is the "expected" total of a parent's rollup.
func (t *Tree) LeafCount(id string) int {
	i, ok := t.index[id]
	if !ok {
		return 0
	}
	return int(t.leaves[i])
}

// Depth returns the distance from the root (0 for the root), -1 for an unknown id.
func (t *Tree) Depth(id string) int {
	i, ok := t.index[id]
	if !ok {
		return -1
	}
	return int(t.depth[i])
}

// Height returns the depth of the deepest node (0 for a tree of one node).
func (t *Tree) Height() int { return len(t.levels) - 1 }

// Ancestors returns the parent of node id, its parent, and so on up to the root (empty for the
// root, nil for an unknown id).
func (t *Tree) Ancestors(id string) []Node {
	i, ok := t.index[id]
	if !ok {
		return nil
	}
	out := make([]Node, 0, t.depth[i])
	for p := t.parent[i]; p >= 0; p = t.parent[p] {
		out = append(out, t.nodes[p])
	}
	return out
}

// Leaves returns every leaf, in Build order.
func (t *Tree) Leaves() []Node {
	var out []Node
	for i := range t.nodes {
		if t.childOff[i] == t.childOff[i+1] {
			out = append(out, t.nodes[i])
		}
	}
	return out
}

// Levels returns the nodes grouped by depth, deepest first: Levels()[0] holds the nodes at
// depth Height(), the last element holds the root alone. Within a level nodes are in Build
// order. Recomputing parents level by level in this order sees every child before its parent.
func (t *Tree) Levels() [][]Node {
	out := make([][]Node, len(t.levels))
	for d, lv := range t.levels {
		out[len(t.levels)-1-d] = t.collect(lv)
	}
	return out
}

func (t *Tree) collect(idx []int32) []Node {
	if len(idx) == 0 {
		return nil
	}
	out := make([]Node, len(idx))
	for k, i := range idx {
		out[k] = t.nodes[i]
	}
	return out
}

// Build validates nodes as the hierarchy of project and returns the tree. When the nodes do
// not form exactly one tree, the error is a *ValidationError listing every problem found, each
// naming the offending nodes: invalid project, ids or types (ValidateName, ValidateID,
// ValidateType), duplicate ids, parents that are not in the list, cycles, no root or more than
// one root. Build does not keep a reference to nodes.
func Build(project string, nodes []Node) (*Tree, error) {
	ps := validate(project, nodes)
	if len(ps) > 0 {
		return nil, &ValidationError{Project: project, Problems: ps}
	}
	return assemble(project, nodes), nil
}

// assemble builds the navigation structures of nodes that validate accepted.
func assemble(project string, nodes []Node) *Tree {
	n := len(nodes)
	t := &Tree{
		project:  project,
		nodes:    slices.Clone(nodes),
		index:    make(map[string]int32, n),
		parent:   make([]int32, n),
		childOff: make([]int32, n+1),
		childIdx: make([]int32, 0, max(n-1, 0)),
		leaves:   make([]int32, n),
		depth:    make([]int32, n),
	}
	for i, nd := range t.nodes {
		t.index[nd.ID] = int32(i)
	}
	counts := make([]int32, n)
	for i, nd := range t.nodes {
		if nd.Parent == "" {
			t.parent[i] = -1
			t.root = int32(i)
			continue
		}
		p := t.index[nd.Parent]
		t.parent[i] = p
		counts[p]++
	}
	for i := 0; i < n; i++ {
		t.childOff[i+1] = t.childOff[i] + counts[i]
	}
	t.childIdx = t.childIdx[:n-1]
	fill := slices.Clone(t.childOff[:n])
	for i := range t.nodes {
		if p := t.parent[i]; p >= 0 {
			t.childIdx[fill[p]] = int32(i)
			fill[p]++
		}
	}
	// Breadth-first from the root: order lists every node after its parent.
	order := make([]int32, 0, n)
	order = append(order, t.root)
	for k := 0; k < len(order); k++ {
		i := order[k]
		d := t.depth[i]
		if int(d) == len(t.levels) {
			t.levels = append(t.levels, nil)
		}
		t.levels[d] = append(t.levels[d], i)
		for _, c := range t.childIdx[t.childOff[i]:t.childOff[i+1]] {
			t.depth[c] = d + 1
			order = append(order, c)
		}
	}
	for k := len(order) - 1; k >= 0; k-- {
		i := order[k]
		if t.childOff[i] == t.childOff[i+1] {
			t.leaves[i] = 1
		}
		if p := t.parent[i]; p >= 0 {
			t.leaves[p] += t.leaves[i]
		}
	}
	// Levels in Build order (BFS order groups siblings by parent).
	for _, lv := range t.levels {
		slices.Sort(lv)
	}
	return t
}
