package tree

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func n(id, typ, parent string) Node { return Node{ID: id, Type: typ, Parent: parent} }

func TestBuildValidation(t *testing.T) {
	type want struct {
		kind  ProblemKind
		nodes []string
		text  string // substring of Detail
	}
	tests := []struct {
		name    string
		project string
		nodes   []Node
		want    []want
	}{
		{"empty", "p", nil, []want{{NoRoot, nil, "no nodes"}}},
		{"bad project", "a b", []Node{n("r", "t", "")}, []want{{InvalidProject, nil, `character 1 is " "`}}},
		{"bad id", "p", []Node{n("r", "t", ""), n("a.b", "t", "r")}, []want{{InvalidID, []string{"a.b"}, `character 1 is "."`}}},
		{"empty id", "p", []Node{n("r", "t", ""), n("", "t", "r")}, []want{{InvalidID, []string{""}, "empty"}}},
		{"bad type", "p", []Node{n("r", "t", ""), n("a", "$t", "r")}, []want{{InvalidType, []string{"a"}, `type "$t" of node "a": character 0 is "$"`}}},
		{"bad parent id", "p", []Node{n("r", "t", ""), n("a", "t", "r/x")}, []want{{InvalidID, []string{"a"}, `parent "r/x" of node "a"`}}},
		{"duplicate", "p", []Node{n("r", "t", ""), n("a", "t", "r"), n("b", "t", "r"), n("a", "u", "b"), n("a", "t", "r")},
			[]want{{DuplicateID, []string{"a"}, "appears 3 times (positions 1, 3, 4)"}}},
		{"missing parent", "p", []Node{n("r", "t", ""), n("a", "t", "r"), n("b", "t", "ghost"), n("c", "t", "b")},
			[]want{{MissingParent, []string{"b"}, `parent "ghost"`}}},
		{"two roots", "p", []Node{n("r", "t", ""), n("a", "t", "r"), n("s", "t", "")},
			[]want{{MultipleRoots, []string{"r", "s"}, `2 nodes have no parent: "r", "s"`}}},
		{"self parent", "p", []Node{n("r", "t", ""), n("a", "t", "a")}, []want{{Cycle, []string{"a"}, "its own parent"}}},
		{"cycle", "p", []Node{n("r", "t", ""), n("x", "t", "c"), n("c", "t", "b"), n("b", "t", "x"), n("leaf", "t", "b")},
			[]want{{Cycle, []string{"b", "x", "c"}, `"b" → "x" → "c" → "b"`}}},
		{"only a cycle", "p", []Node{n("a", "t", "b"), n("b", "t", "a")},
			[]want{{Cycle, []string{"a", "b"}, ""}, {NoRoot, nil, "every node has a parent"}}},
		{"two cycles", "p", []Node{n("r", "t", ""), n("a", "t", "a"), n("b", "t", "c"), n("c", "t", "b")},
			[]want{{Cycle, []string{"a"}, ""}, {Cycle, []string{"b", "c"}, ""}}},
		{"everything", "", []Node{n("r", "t", ""), n("r2", "t", ""), n("bad id", "", "r"), n("d", "t", "r"), n("d", "t", "r"), n("m", "t", "nope"), n("y", "t", "y")},
			[]want{{InvalidProject, nil, "empty"}, {InvalidID, []string{"bad id"}, ""}, {InvalidType, []string{"bad id"}, "empty"},
				{DuplicateID, []string{"d"}, ""}, {MissingParent, []string{"m"}, ""}, {Cycle, []string{"y"}, ""},
				{MultipleRoots, []string{"r", "r2"}, ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Build(tc.project, tc.nodes)
			if tr != nil {
				t.Fatalf("Build accepted an invalid tree")
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v (%T), want *ValidationError", err, err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not match ErrInvalid")
			}
			if len(ve.Problems) != len(tc.want) {
				t.Fatalf("problems = %v, want %d", ve.Problems, len(tc.want))
			}
			for i, w := range tc.want {
				p := ve.Problems[i]
				if p.Kind != w.kind || !slices.Equal(p.Nodes, w.nodes) || !strings.Contains(p.Detail, w.text) {
					t.Errorf("problem %d = %+v, want kind %q nodes %q detail containing %q", i, p, w.kind, w.nodes, w.text)
				}
				if !strings.Contains(err.Error(), p.Detail) {
					t.Errorf("Error() %q lacks %q", err, p.Detail)
				}
			}
		})
	}
}

// TestIDBytesBound: a tree whose ids take more than the bound is refused as too large.
func TestIDBytesBound(t *testing.T) {
	nodes := Generate("p", 2, 3, 4)
	size := 0
	for _, nd := range nodes {
		size += len(nd.ID)
	}
	if ps := idBytesProblems(nodes, size); len(ps) != 0 {
		t.Fatalf("at the bound: %v", ps)
	}
	ps := idBytesProblems(nodes, size-1)
	if len(ps) != 1 || ps[0].Kind != TooLarge || !strings.Contains(ps[0].Detail, fmt.Sprint(size)) {
		t.Fatalf("over the bound: %v", ps)
	}
}

func TestValidationErrorTruncates(t *testing.T) {
	nodes := []Node{n("r", "t", "")}
	for i := 0; i < 30; i++ {
		nodes = append(nodes, n(fmt.Sprintf("n%d", i), "t", "gone"))
	}
	_, err := Build("p", nodes)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 30 {
		t.Fatalf("err = %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "30 problems") || !strings.Contains(msg, "and 10 more") || strings.Contains(msg, `"n25"`) {
		t.Fatalf("Error() = %q", msg)
	}
}

func TestBuildNavigation(t *testing.T) {
	nodes := []Node{
		n("w1", "process", "s1"), // children before parents is fine
		n("root", "project", ""),
		n("g1", "group", "root"),
		n("s1", "server", "g1"),
		n("s2", "server", "g1"),
		n("g2", "group", "root"),
		n("w2", "process", "s1"),
	}
	tr, err := Build("demo", nodes)
	if err != nil {
		t.Fatal(err)
	}
	nodes[0].ID = "mutated" // Build keeps no reference
	if tr.Project() != "demo" || tr.Root() != n("root", "project", "") || tr.Len() != 7 || tr.Height() != 3 {
		t.Fatalf("project %q root %v len %d height %d", tr.Project(), tr.Root(), tr.Len(), tr.Height())
	}
	if got, _ := tr.Node("w1"); got != n("w1", "process", "s1") {
		t.Fatalf("Node(w1) = %v", got)
	}
	if _, ok := tr.Node("mutated"); ok || tr.Has("mutated") || !tr.Has("g2") {
		t.Fatal("Has/Node wrong")
	}
	if p, ok := tr.Parent("s2"); !ok || p.ID != "g1" || p.Type != "group" {
		t.Fatalf("Parent(s2) = %v %v", p, ok)
	}
	if _, ok := tr.Parent("root"); ok {
		t.Fatal("root has a parent")
	}
	if _, ok := tr.Parent("nope"); ok {
		t.Fatal("unknown id has a parent")
	}
	ids := func(ns []Node) []string {
		var out []string
		for _, x := range ns {
			out = append(out, x.ID)
		}
		return out
	}
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"Children(root)", ids(tr.Children("root")), []string{"g1", "g2"}},
		{"Children(s1)", ids(tr.Children("s1")), []string{"w1", "w2"}},
		{"Children(w1)", ids(tr.Children("w1")), []string(nil)},
		{"Children(nope)", ids(tr.Children("nope")), []string(nil)},
		{"ChildCount(g1)", tr.ChildCount("g1"), 2},
		{"Leaves", ids(tr.Leaves()), []string{"w1", "s2", "g2", "w2"}},
		{"LeafCount(root)", tr.LeafCount("root"), 4},
		{"LeafCount(g1)", tr.LeafCount("g1"), 3},
		{"LeafCount(g2)", tr.LeafCount("g2"), 1},
		{"LeafCount(nope)", tr.LeafCount("nope"), 0},
		{"IsLeaf(s2)", tr.IsLeaf("s2"), true},
		{"IsLeaf(s1)", tr.IsLeaf("s1"), false},
		{"IsLeaf(nope)", tr.IsLeaf("nope"), false},
		{"Depth(w2)", tr.Depth("w2"), 3},
		{"Depth(root)", tr.Depth("root"), 0},
		{"Depth(nope)", tr.Depth("nope"), -1},
		{"Ancestors(w2)", ids(tr.Ancestors("w2")), []string{"s1", "g1", "root"}},
		{"Ancestors(root)", len(tr.Ancestors("root")), 0},
		{"Nodes", tr.Nodes()[0].ID, "w1"},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	var levels [][]string
	for _, lv := range tr.Levels() {
		levels = append(levels, ids(lv))
	}
	want := [][]string{{"w1", "w2"}, {"s1", "s2"}, {"g1", "g2"}, {"root"}}
	if !reflect.DeepEqual(levels, want) {
		t.Fatalf("Levels = %v, want %v", levels, want)
	}
}

func TestBuildSingleNode(t *testing.T) {
	tr, err := Build("p", []Node{n("only", "project", "")})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.IsLeaf("only") || tr.LeafCount("only") != 1 || tr.Height() != 0 || len(tr.Levels()) != 1 || len(tr.Leaves()) != 1 {
		t.Fatalf("single node tree wrong: leaf %v count %d height %d", tr.IsLeaf("only"), tr.LeafCount("only"), tr.Height())
	}
}

// randomTree returns a random valid tree of size nodes in shuffled order: node i's parent is
// a random earlier node (so every shape, from a chain to a star, can occur).
func randomTree(r *rand.Rand, size int) []Node {
	nodes := make([]Node, size)
	for i := range nodes {
		nodes[i] = Node{ID: fmt.Sprintf("n%d", i), Type: []string{"a", "b", "c"}[r.IntN(3)]}
		if i > 0 {
			lo := 0
			if r.IntN(4) == 0 { // sometimes chain-like
				lo = max(i-2, 0)
			}
			nodes[i].Parent = nodes[lo+r.IntN(i-lo)].ID
		}
	}
	r.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	return nodes
}

// TestTreeRandomAgainstNaive cross-checks Children, LeafCount, Depth, Ancestors and Levels
// with naive recursion over the node list.
func TestTreeRandomAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for iter := 0; iter < 300; iter++ {
		nodes := randomTree(r, 1+r.IntN(60))
		tr, err := Build("p", nodes)
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		parentOf := map[string]string{}
		for _, x := range nodes {
			parentOf[x.ID] = x.Parent
		}
		children := func(id string) []string {
			var out []string
			for _, x := range nodes {
				if x.Parent == id {
					out = append(out, x.ID)
				}
			}
			return out
		}
		var leaves func(id string) int
		leaves = func(id string) int {
			cs := children(id)
			if len(cs) == 0 {
				return 1
			}
			s := 0
			for _, c := range cs {
				s += leaves(c)
			}
			return s
		}
		var depth func(id string) int
		depth = func(id string) int {
			if parentOf[id] == "" {
				return 0
			}
			return 1 + depth(parentOf[id])
		}
		maxDepth := 0
		for _, x := range nodes {
			maxDepth = max(maxDepth, depth(x.ID))
		}
		for _, x := range nodes {
			var gotChildren []string
			for _, c := range tr.Children(x.ID) {
				gotChildren = append(gotChildren, c.ID)
			}
			if !slices.Equal(gotChildren, children(x.ID)) {
				t.Fatalf("Children(%s) = %v, want %v", x.ID, gotChildren, children(x.ID))
			}
			if got, want := tr.LeafCount(x.ID), leaves(x.ID); got != want {
				t.Fatalf("LeafCount(%s) = %d, want %d", x.ID, got, want)
			}
			if got, want := tr.Depth(x.ID), depth(x.ID); got != want {
				t.Fatalf("Depth(%s) = %d, want %d", x.ID, got, want)
			}
			var anc []string
			for p := parentOf[x.ID]; p != ""; p = parentOf[p] {
				anc = append(anc, p)
			}
			var gotAnc []string
			for _, a := range tr.Ancestors(x.ID) {
				gotAnc = append(gotAnc, a.ID)
			}
			if !slices.Equal(gotAnc, anc) {
				t.Fatalf("Ancestors(%s) = %v, want %v", x.ID, gotAnc, anc)
			}
			if p, ok := tr.Parent(x.ID); ok != (x.Parent != "") || p.ID != x.Parent {
				t.Fatalf("Parent(%s) = %v %v", x.ID, p, ok)
			}
			// The Ref API answers the same as the id API.
			ref, ok := tr.Lookup(x.ID)
			if !ok || tr.NodeAt(ref) != x || tr.IDAt(ref) != x.ID || tr.TypeAt(ref) != x.Type ||
				tr.IsLeafAt(ref) != tr.IsLeaf(x.ID) || tr.LeafCountAt(ref) != leaves(x.ID) || tr.DepthAt(ref) != depth(x.ID) {
				t.Fatalf("Lookup(%s) = %d %v: node %v", x.ID, ref, ok, tr.NodeAt(ref))
			}
			if pr, ok := tr.ParentOf(ref); ok != (x.Parent != "") || ok && tr.IDAt(pr) != x.Parent {
				t.Fatalf("ParentOf(%s) = %d %v", x.ID, pr, ok)
			}
		}
		for _, x := range nodes {
			if tr.Has(x.ID+"x") != slices.ContainsFunc(nodes, func(y Node) bool { return y.ID == x.ID+"x" }) {
				t.Fatalf("Has(%sx) wrong", x.ID)
			}
			if _, ok := tr.Lookup(x.ID + "-absent"); ok {
				t.Fatalf("Lookup(%s-absent) found", x.ID)
			}
		}
		if !slices.Equal(tr.Nodes(), nodes) {
			t.Fatal("Nodes() differs from the input")
		}
		levels := tr.Levels()
		if len(levels) != maxDepth+1 || tr.Height() != maxDepth {
			t.Fatalf("%d levels, height %d, want %d", len(levels), tr.Height(), maxDepth+1)
		}
		for k, lv := range levels {
			var want []string
			for _, x := range nodes {
				if depth(x.ID) == maxDepth-k {
					want = append(want, x.ID)
				}
			}
			var got []string
			for _, x := range lv {
				got = append(got, x.ID)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("Levels()[%d] = %v, want %v", k, got, want)
			}
		}
		if root := tr.Root(); root.Parent != "" || tr.LeafCount(root.ID) != len(tr.Leaves()) {
			t.Fatalf("root %v: leaf count %d, leaves %d", root, tr.LeafCount(root.ID), len(tr.Leaves()))
		}
	}
}

// TestBuildRandomBroken breaks random trees in one way and checks the problem is found and
// names the node.
func TestBuildRandomBroken(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for iter := 0; iter < 300; iter++ {
		nodes := randomTree(r, 2+r.IntN(40))
		var nonRoot []int
		for i, x := range nodes {
			if x.Parent != "" {
				nonRoot = append(nonRoot, i)
			}
		}
		i := nonRoot[r.IntN(len(nonRoot))]
		victim := nodes[i].ID
		var kind ProblemKind
		switch r.IntN(4) {
		case 0:
			nodes[i].Parent = "missing"
			kind = MissingParent
		case 1:
			nodes[i].Parent = ""
			kind = MultipleRoots
		case 2:
			nodes = append(nodes, Node{ID: victim, Type: "x", Parent: nodes[i].Parent})
			kind = DuplicateID
		case 3:
			nodes[i].Parent = victim
			kind = Cycle
		}
		_, err := Build("p", nodes)
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("iter %d: %s not detected: %v", iter, kind, err)
		}
		found := false
		for _, p := range ve.Problems {
			if p.Kind == kind && slices.Contains(p.Nodes, victim) {
				found = true
			}
		}
		if !found {
			t.Fatalf("iter %d: want %s naming %q, got %v", iter, kind, victim, ve.Problems)
		}
	}
}

func TestGenerate(t *testing.T) {
	tests := []struct {
		groups, servers, processes int
		wantLen, wantLeaves        int
		someIDs                    []string
	}{
		{3, 12, 7, 1 + 3 + 36 + 252, 252, []string{"g03", "g03-s0012", "g03-s0012-p07", "g01-s0001-p01"}},
		{0, 5, 5, 1, 1, []string{"demo"}},
		{2, 0, 9, 3, 2, []string{"g02"}},
		{1, 2, 0, 4, 2, []string{"g01-s0002"}},
		{100, 1, 1, 301, 100, []string{"g001", "g100-s0001-p01"}},
		{1, 1, 100, 103, 100, []string{"g01-s0001-p001"}},
		{-1, 3, 3, 1, 1, nil},
	}
	for _, tc := range tests {
		nodes := Generate("demo", tc.groups, tc.servers, tc.processes)
		if !reflect.DeepEqual(nodes, Generate("demo", tc.groups, tc.servers, tc.processes)) {
			t.Fatal("not deterministic")
		}
		tr, err := Build("demo", nodes)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if tr.Len() != tc.wantLen || tr.LeafCount("demo") != tc.wantLeaves {
			t.Errorf("%+v: len %d leaves %d", tc, tr.Len(), tr.LeafCount("demo"))
		}
		for _, id := range tc.someIDs {
			if !tr.Has(id) {
				t.Errorf("%+v: no node %q", tc, id)
			}
		}
	}
	tr, _ := Build("demo", Generate("demo", 2, 3, 4))
	if nd, _ := tr.Node("g02-s0003-p04"); nd.Type != TypeProcess || nd.Parent != "g02-s0003" {
		t.Fatalf("node = %+v", nd)
	}
	if p, _ := tr.Parent("g02"); p.ID != "demo" || p.Type != TypeProject {
		t.Fatalf("parent of g02 = %+v", p)
	}
	if tr.Height() != 3 || tr.LeafCount("g01") != 12 {
		t.Fatalf("height %d, leaves(g01) %d", tr.Height(), tr.LeafCount("g01"))
	}
}

func BenchmarkBuild(b *testing.B) {
	nodes := Generate("demo", 10, 100, 10) // 11k nodes
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build("demo", nodes); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNavigation(b *testing.B) {
	tr, _ := Build("demo", Generate("demo", 10, 100, 10))
	leaves := tr.Leaves()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l := leaves[i%len(leaves)]
		p, _ := tr.Parent(l.ID)
		_ = tr.LeafCount(p.ID)
		i++
	}
}

// bigNodes returns the nodes of a 1,010,201-node tree (200 groups × 50 servers × 100
// processes, ids as rollup-bench scale makes them), every id its own allocation as a store
// decoder makes them.
func bigNodes() []Node {
	nodes := Generate("big", 200, 50, 100)
	for i := range nodes {
		nodes[i].ID = strings.Clone(nodes[i].ID)
		nodes[i].Type = strings.Clone(nodes[i].Type)
		nodes[i].Parent = strings.Clone(nodes[i].Parent)
	}
	return nodes
}

// BenchmarkTreeMemory reports the heap a 1M-node tree keeps once its input is gone (what a
// serve process holds per tree node) and its objects, which the garbage collector traces.
func BenchmarkTreeMemory(b *testing.B) {
	for range b.N {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		nodes := bigNodes()
		n := len(nodes)
		tr, err := Build("big", nodes)
		if err != nil {
			b.Fatal(err)
		}
		nodes = nil
		runtime.GC()
		runtime.ReadMemStats(&m1)
		// What stays is the tree, with whatever of the input it shares.
		b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/float64(n), "heap-B/node")
		b.ReportMetric(float64(int64(m1.HeapObjects)-int64(m0.HeapObjects)), "objects")
		runtime.KeepAlive(tr)
		_ = nodes
	}
}

// bigShuffled builds the 1M-node tree and returns it with its leaves in a seeded random order.
func bigShuffled(b *testing.B) (*Tree, []Node) {
	b.Helper()
	tr, err := Build("big", bigNodes())
	if err != nil {
		b.Fatal(err)
	}
	leaves := tr.Leaves()
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(leaves), func(i, j int) { leaves[i], leaves[j] = leaves[j], leaves[i] })
	return tr, leaves
}

// BenchmarkLeafLookups is the watcher's per-leaf navigation in a 1M-node tree: is the id a
// leaf, its node (type), its parent and the parent's depth.
func BenchmarkLeafLookups(b *testing.B) {
	tr, leaves := bigShuffled(b)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		id := leaves[i%len(leaves)].ID
		i++
		if !tr.IsLeaf(id) {
			b.Fatal("not a leaf")
		}
		n, _ := tr.Node(id)
		p, _ := tr.Parent(id)
		if tr.Depth(p.ID) != 2 || n.Type != TypeProcess {
			b.Fatal("wrong navigation")
		}
	}
}

// BenchmarkBuild1M builds a 1M-node tree (what a store load or an import of one costs).
func BenchmarkBuild1M(b *testing.B) {
	nodes := bigNodes()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build("big", nodes); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLeafLookupsRef is BenchmarkLeafLookups through one Lookup and the Ref methods: what
// the watcher's per-leaf navigation costs when it looks each id up once.
func BenchmarkLeafLookupsRef(b *testing.B) {
	tr, leaves := bigShuffled(b)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		id := leaves[i%len(leaves)].ID
		i++
		r, ok := tr.Lookup(id)
		if !ok || !tr.IsLeafAt(r) {
			b.Fatal("not a leaf")
		}
		p, _ := tr.ParentOf(r)
		if tr.DepthAt(p) != 2 || tr.TypeAt(r) != TypeProcess || tr.IDAt(p) == "" {
			b.Fatal("wrong navigation")
		}
	}
}
