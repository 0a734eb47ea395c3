package tree

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
)

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
// it. Build it with Build. All lookups are O(1) (one hash probe, then array reads), and the
// methods that return a slice of k nodes cost O(k); a Tree is safe for concurrent use.
//
// A Tree holds no pointer per node: every id lives in one string (ids are substrings of it,
// so the strings the methods return are never copies), types in a small table, and the
// navigation in int32 arrays, with an open-addressing index of the ids. A serve process keeps
// the trees of every project in memory; this way a 1M-node tree costs about 70 bytes per node
// and nothing for the garbage collector to trace (a Node slice and a map[string]int32 cost
// 168 bytes and 2.5 million objects).
type Tree struct {
	project string
	ids     string   // every id, in Build order
	idOff   []int32  // node i's id is ids[idOff[i]:idOff[i+1]]
	types   []string // distinct types
	typeOf  []uint32 // index in types
	// slots is the id index: open addressing, linear probing, a power of two at least twice
	// the nodes; a slot holds the node's position + 1 (0: empty) in its low 32 bits and the
	// id's hash's high 32 bits above them.
	slots  []uint64
	seed   maphash.Seed
	parent []int32 // -1 for the root
	// children of node i are childIdx[childOff[i]:childOff[i+1]] (in Build order).
	childOff []int32
	childIdx []int32
	leaves   []int32 // leaves under each node (1 for a leaf)
	depth    []int32 // 0 for the root
	levels   [][]int32
	root     int32
}

// Ref is a node's position in one Tree (Lookup returns it): with it, a caller that asks
// several questions about one id pays for the id's lookup once. It is valid only for the
// Tree that returned it.
type Ref int32

// Lookup returns the Ref of node id; false for ids not in the tree.
func (t *Tree) Lookup(id string) (Ref, bool) {
	i := t.find(id)
	return Ref(i), i >= 0
}

// NodeAt returns the node at r.
func (t *Tree) NodeAt(r Ref) Node { return t.node(int32(r)) }

// IDAt returns the id of the node at r.
func (t *Tree) IDAt(r Ref) string { return t.id(int32(r)) }

// TypeAt returns the type of the node at r.
func (t *Tree) TypeAt(r Ref) string { return t.types[t.typeOf[r]] }

// ParentOf returns the Ref of the parent of the node at r; false for the root.
func (t *Tree) ParentOf(r Ref) (Ref, bool) {
	p := t.parent[r]
	return Ref(p), p >= 0
}

// IsLeafAt reports whether the node at r has no children.
func (t *Tree) IsLeafAt(r Ref) bool { return t.childOff[r] == t.childOff[r+1] }

// LeafCountAt returns the number of leaves under the node at r (1 for a leaf).
func (t *Tree) LeafCountAt(r Ref) int { return int(t.leaves[r]) }

// DepthAt returns the distance of the node at r from the root.
func (t *Tree) DepthAt(r Ref) int { return int(t.depth[r]) }

func (t *Tree) id(i int32) string { return t.ids[t.idOff[i]:t.idOff[i+1]] }

func (t *Tree) node(i int32) Node {
	n := Node{ID: t.id(i), Type: t.types[t.typeOf[i]]}
	if p := t.parent[i]; p >= 0 {
		n.Parent = t.id(p)
	}
	return n
}

// find returns the position of id, -1 when absent.
func (t *Tree) find(id string) int32 {
	h := maphash.String(t.seed, id)
	tag := h >> 32
	mask := uint64(len(t.slots) - 1)
	for s := h & mask; ; s = (s + 1) & mask {
		v := t.slots[s]
		if v == 0 {
			return -1
		}
		if v>>32 == tag {
			if i := int32(uint32(v)) - 1; t.id(i) == id {
				return i
			}
		}
	}
}

// Project returns the project the tree belongs to.
func (t *Tree) Project() string { return t.project }

// Root returns the root node.
func (t *Tree) Root() Node { return t.node(t.root) }

// Len returns the number of nodes.
func (t *Tree) Len() int { return len(t.parent) }

// Nodes returns every node, in the order given to Build.
func (t *Tree) Nodes() []Node {
	out := make([]Node, len(t.parent))
	for i := range out {
		out[i] = t.node(int32(i))
	}
	return out
}

// Has reports whether id is a node of the tree.
func (t *Tree) Has(id string) bool { return t.find(id) >= 0 }

// Node returns the node with that id.
func (t *Tree) Node(id string) (Node, bool) {
	i := t.find(id)
	if i < 0 {
		return Node{}, false
	}
	return t.node(i), true
}

// Parent returns the parent of node id; false for the root and for ids not in the tree.
func (t *Tree) Parent(id string) (Node, bool) {
	i := t.find(id)
	if i < 0 || t.parent[i] < 0 {
		return Node{}, false
	}
	return t.node(t.parent[i]), true
}

// Children returns the children of node id in Build order (nil for a leaf or an unknown id).
// The slice is the caller's.
func (t *Tree) Children(id string) []Node {
	i := t.find(id)
	if i < 0 {
		return nil
	}
	return t.collect(t.childIdx[t.childOff[i]:t.childOff[i+1]])
}

// ChildCount returns the number of children of node id (0 for a leaf or an unknown id).
func (t *Tree) ChildCount(id string) int {
	i := t.find(id)
	if i < 0 {
		return 0
	}
	return int(t.childOff[i+1] - t.childOff[i])
}

// IsLeaf reports whether id is a node without children (false for ids not in the tree).
func (t *Tree) IsLeaf(id string) bool {
	i := t.find(id)
	return i >= 0 && t.childOff[i] == t.childOff[i+1]
}

// LeafCount returns the number of leaves under node id: 1 for a leaf, 0 for an unknown id. It
// is the "expected" total of a parent's rollup.
func (t *Tree) LeafCount(id string) int {
	i := t.find(id)
	if i < 0 {
		return 0
	}
	return int(t.leaves[i])
}

// Depth returns the distance from the root (0 for the root), -1 for an unknown id.
func (t *Tree) Depth(id string) int {
	i := t.find(id)
	if i < 0 {
		return -1
	}
	return int(t.depth[i])
}

// Height returns the depth of the deepest node (0 for a tree of one node).
func (t *Tree) Height() int { return len(t.levels) - 1 }

// Ancestors returns the parent of node id, its parent, and so on up to the root (empty for the
// root, nil for an unknown id).
func (t *Tree) Ancestors(id string) []Node {
	i := t.find(id)
	if i < 0 {
		return nil
	}
	out := make([]Node, 0, t.depth[i])
	for p := t.parent[i]; p >= 0; p = t.parent[p] {
		out = append(out, t.node(p))
	}
	return out
}

// Leaves returns every leaf, in Build order.
func (t *Tree) Leaves() []Node {
	var out []Node
	for i := range t.parent {
		if t.childOff[i] == t.childOff[i+1] {
			out = append(out, t.node(int32(i)))
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
		out[k] = t.node(i)
	}
	return out
}

// Build validates nodes as the hierarchy of project and returns the tree. When the nodes do
// not form exactly one tree, the error is a *ValidationError listing every problem found, each
// naming the offending nodes: invalid project, ids or types (ValidateName, ValidateID,
// ValidateType), duplicate ids, parents that are not in the list, cycles, no root or more than
// one root, or ids taking more than 2 GiB together. Build does not keep a reference to nodes.
func Build(project string, nodes []Node) (*Tree, error) {
	ps := validate(project, nodes)
	if len(ps) > 0 {
		return nil, &ValidationError{Project: project, Problems: ps}
	}
	if ps := idBytesProblems(nodes, maxIDBytes); len(ps) > 0 {
		return nil, &ValidationError{Project: project, Problems: ps}
	}
	return assemble(project, nodes), nil
}

// maxIDBytes bounds the bytes of a tree's ids together (positions in them are int32): about
// 16 million nodes of the longest ids, 100 million of typical ones.
const maxIDBytes = 1<<31 - 1

// idBytesProblems reports a tree whose ids take more than limit bytes together.
func idBytesProblems(nodes []Node, limit int) []Problem {
	size := 0
	for _, nd := range nodes {
		size += len(nd.ID)
	}
	if size <= limit {
		return nil
	}
	return []Problem{{Kind: TooLarge, Detail: fmt.Sprintf("%d nodes whose ids take %d bytes; a tree's ids may take at most %d", len(nodes), size, limit)}}
}

// assemble builds the navigation structures of nodes that validate accepted.
func assemble(project string, nodes []Node) *Tree {
	n := len(nodes)
	t := &Tree{
		project:  project,
		idOff:    make([]int32, n+1),
		typeOf:   make([]uint32, n),
		slots:    make([]uint64, slotCount(n)),
		seed:     maphash.MakeSeed(),
		parent:   make([]int32, n),
		childOff: make([]int32, n+1),
		childIdx: make([]int32, 0, max(n-1, 0)),
		leaves:   make([]int32, n),
		depth:    make([]int32, n),
	}
	t.indexIDs(nodes)
	t.link(nodes)
	t.measure(n)
	return t
}

// indexIDs stores the ids (one string) and types of nodes, and the id index (open
// addressing on the ids' hashes).
func (t *Tree) indexIDs(nodes []Node) {
	size := 0
	for _, nd := range nodes {
		size += len(nd.ID)
	}
	var ids strings.Builder
	ids.Grow(size)
	typeIdx := map[string]uint32{}
	for i, nd := range nodes {
		ids.WriteString(nd.ID)
		t.idOff[i+1] = int32(ids.Len())
		k, ok := typeIdx[nd.Type]
		if !ok {
			k = uint32(len(t.types))
			typeIdx[nd.Type] = k
			t.types = append(t.types, strings.Clone(nd.Type))
		}
		t.typeOf[i] = k
	}
	t.ids = ids.String()
	mask := uint64(len(t.slots) - 1)
	for i := range nodes {
		h := maphash.String(t.seed, t.id(int32(i)))
		s := h & mask
		for t.slots[s] != 0 {
			s = (s + 1) & mask
		}
		t.slots[s] = h>>32<<32 | uint64(i+1)
	}
}

// link sets each node's parent and the children lists (childOff, childIdx).
func (t *Tree) link(nodes []Node) {
	n := len(nodes)
	counts := make([]int32, n)
	for i, nd := range nodes {
		if nd.Parent == "" {
			t.parent[i] = -1
			t.root = int32(i)
			continue
		}
		p := t.find(nd.Parent)
		t.parent[i] = p
		counts[p]++
	}
	for i := 0; i < n; i++ {
		t.childOff[i+1] = t.childOff[i] + counts[i]
	}
	t.childIdx = t.childIdx[:n-1]
	fill := slices.Clone(t.childOff[:n])
	for i := range n {
		if p := t.parent[i]; p >= 0 {
			t.childIdx[fill[p]] = int32(i)
			fill[p]++
		}
	}
}

// measure sets each node's depth, the levels and the leaves under each node.
func (t *Tree) measure(n int) {
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
	for d, lv := range t.levels {
		slices.Sort(lv)
		t.levels[d] = slices.Clip(lv)
	}
}

// slotCount is the size of the id index of n nodes: a power of two, at least 2n (probes stay
// short at a load of at most one half).
func slotCount(n int) int {
	s := 2
	for s < 2*n {
		s <<= 1
	}
	return s
}
