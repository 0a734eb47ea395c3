package tree

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ProblemKind classifies a Problem.
type ProblemKind string

// The problems Build reports.
const (
	// InvalidProject: the project name fails ValidateName("project", ...).
	InvalidProject ProblemKind = "invalid project"
	// InvalidID: a node id, or a parent id, fails ValidateID.
	InvalidID ProblemKind = "invalid id"
	// InvalidType: a node type fails ValidateType.
	InvalidType ProblemKind = "invalid type"
	// DuplicateID: two or more nodes have the same id.
	DuplicateID ProblemKind = "duplicate id"
	// MissingParent: a node's parent is not in the tree.
	MissingParent ProblemKind = "missing parent"
	// Cycle: following parents from a node comes back to it.
	Cycle ProblemKind = "cycle"
	// MultipleRoots: more than one node has no parent.
	MultipleRoots ProblemKind = "more than one root"
	// NoRoot: no node is without a parent (or there are no nodes at all).
	NoRoot ProblemKind = "no root"
	// TooLarge: the ids of the nodes take more than 2 GiB together.
	TooLarge ProblemKind = "too large"
)

// Problem is one reason a list of nodes is not a valid tree.
type Problem struct {
	// Kind classifies the problem.
	Kind ProblemKind
	// Nodes are the ids of the offending nodes (a cycle in parent order, starting from its
	// smallest id; every root for MultipleRoots; empty for NoRoot and InvalidProject).
	Nodes []string
	// Detail explains the problem in words.
	Detail string
}

// String returns "kind: detail".
func (p Problem) String() string { return string(p.Kind) + ": " + p.Detail }

// maxListedProblems bounds the problems ValidationError.Error spells out.
const maxListedProblems = 20

// ValidationError is the error of Build: every problem found, in a stable order (by kind in
// the order of the ProblemKind constants, then by node order).
type ValidationError struct {
	// Project is the project of the rejected tree.
	Project string
	// Problems lists every problem (at least one).
	Problems []Problem
}

// Error lists the problems, the first 20 of them spelled out.
func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid tree for project %q: %d problem", e.Project, len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteString("s")
	}
	for i, p := range e.Problems {
		if i == maxListedProblems {
			fmt.Fprintf(&b, "; and %d more", len(e.Problems)-i)
			break
		}
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Kinds returns the kinds of the problems, in order (for tests and summaries).
func (e *ValidationError) Kinds() []ProblemKind {
	out := make([]ProblemKind, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p.Kind
	}
	return out
}

// validate returns every problem of nodes as the tree of project, nil when they form a tree.
func validate(project string, nodes []Node) []Problem {
	var ps []Problem
	if err := ValidateName("project", project); err != nil {
		ps = append(ps, Problem{Kind: InvalidProject, Detail: fmt.Sprintf("project %q: %s", project, reason(err))})
	}
	badID, badType, first, dupAt := checkNodes(nodes)
	par, roots, missing := parents(nodes, first)
	ps = append(ps, badID...)
	ps = append(ps, badType...)
	ps = append(ps, duplicates(nodes, dupAt)...)
	ps = append(ps, missing...)
	ps = append(ps, cycles(nodes, par)...)
	switch {
	case len(roots) > 1:
		ps = append(ps, Problem{Kind: MultipleRoots, Nodes: roots,
			Detail: fmt.Sprintf("%d nodes have no parent: %s", len(roots), quoteList(roots, 10))})
	case len(roots) == 0 && len(nodes) == 0:
		ps = append(ps, Problem{Kind: NoRoot, Detail: "the tree has no nodes"})
	case len(roots) == 0:
		ps = append(ps, Problem{Kind: NoRoot, Detail: "every node has a parent"})
	}
	return ps
}

// checkNodes checks every node's id, type and parent id, and finds each id's first position
// and the positions of ids that appear more than once.
func checkNodes(nodes []Node) (badID, badType []Problem, first map[string]int, dupAt map[string][]int) {
	first = make(map[string]int, len(nodes)) // id → first position
	dupAt = map[string][]int{}
	for i, n := range nodes {
		if err := ValidateID(n.ID); err != nil {
			badID = append(badID, Problem{Kind: InvalidID, Nodes: []string{n.ID},
				Detail: fmt.Sprintf("node %d (%q): %s", i, n.ID, reason(err))})
		}
		if err := ValidateType(n.Type); err != nil {
			badType = append(badType, Problem{Kind: InvalidType, Nodes: []string{n.ID},
				Detail: fmt.Sprintf("type %q of node %q: %s", n.Type, n.ID, reason(err))})
		}
		if n.Parent != "" {
			if err := ValidateID(n.Parent); err != nil {
				badID = append(badID, Problem{Kind: InvalidID, Nodes: []string{n.ID},
					Detail: fmt.Sprintf("parent %q of node %q: %s", n.Parent, n.ID, reason(err))})
			}
		}
		if j, ok := first[n.ID]; ok {
			if dupAt[n.ID] == nil {
				dupAt[n.ID] = []int{j}
			}
			dupAt[n.ID] = append(dupAt[n.ID], i)
			continue
		}
		first[n.ID] = i
	}
	return badID, badType, first, dupAt
}

// duplicates reports each id of dupAt once, in order of first appearance.
func duplicates(nodes []Node, dupAt map[string][]int) []Problem {
	var dups []Problem
	for i, n := range nodes {
		at := dupAt[n.ID]
		if len(at) == 0 || at[0] != i {
			continue
		}
		pos := make([]string, len(at))
		for k, p := range at {
			pos[k] = fmt.Sprint(p)
		}
		dups = append(dups, Problem{Kind: DuplicateID, Nodes: []string{n.ID},
			Detail: fmt.Sprintf("node %q appears %d times (positions %s)", n.ID, len(at), strings.Join(pos, ", "))})
	}
	return dups
}

// parents is the graph of the first node of each id: par[i] is the position of node i's
// parent, -1 for a root, -2 for a missing parent, -3 for a duplicate (not in the graph).
func parents(nodes []Node, first map[string]int) (par []int, roots []string, missing []Problem) {
	par = make([]int, len(nodes))
	for i, n := range nodes {
		if first[n.ID] != i {
			par[i] = -3
			continue
		}
		switch p, ok := first[n.Parent]; {
		case n.Parent == "":
			par[i] = -1
			roots = append(roots, n.ID)
		case !ok:
			par[i] = -2
			if ValidateID(n.Parent) == nil { // an invalid parent id is reported as such
				missing = append(missing, Problem{Kind: MissingParent, Nodes: []string{n.ID},
					Detail: fmt.Sprintf("node %q has parent %q, which is not in the tree", n.ID, n.Parent)})
			}
		default:
			par[i] = p
		}
	}
	return par, roots, missing
}

// cycles walks parents with colours (0 new, 1 on the current walk, 2 done) and reports each
// cycle once, from its smallest id.
func cycles(nodes []Node, par []int) []Problem {
	var out []Problem
	colour := make([]uint8, len(nodes))
	var path []int
	for i := range nodes {
		if par[i] == -3 || colour[i] != 0 {
			continue
		}
		path = path[:0]
		j := i
		for j >= 0 && colour[j] == 0 {
			colour[j] = 1
			path = append(path, j)
			j = par[j]
		}
		if j >= 0 && colour[j] == 1 { // back on this walk: path from j on is a cycle
			out = append(out, cycleProblem(nodes, path[slices.Index(path, j):]))
		}
		for _, x := range path {
			colour[x] = 2
		}
	}
	return out
}

// cycleProblem describes the cycle cyc (positions), starting from its smallest id.
func cycleProblem(nodes []Node, cyc []int) Problem {
	m := 0
	for x := range cyc {
		if nodes[cyc[x]].ID < nodes[cyc[m]].ID {
			m = x
		}
	}
	ids := make([]string, 0, len(cyc)+1)
	for x := range cyc {
		ids = append(ids, nodes[cyc[(m+x)%len(cyc)]].ID)
	}
	detail := "node " + fmt.Sprintf("%q", ids[0]) + " is its own parent"
	if len(ids) > 1 {
		quoted := make([]string, 0, len(ids)+1)
		for _, id := range append(ids, ids[0]) {
			quoted = append(quoted, fmt.Sprintf("%q", id))
		}
		detail = "parents lead back: " + strings.Join(quoted, " → ")
	}
	return Problem{Kind: Cycle, Nodes: ids, Detail: detail}
}

// reason returns the Reason of a *NameError, else the error text.
func reason(err error) string {
	var ne *NameError
	if errors.As(err, &ne) {
		return ne.Reason
	}
	return err.Error()
}

// quoteList quotes ids, listing at most limit of them.
func quoteList(ids []string, limit int) string {
	var b strings.Builder
	for i, id := range ids {
		if i == limit {
			fmt.Fprintf(&b, " and %d more", len(ids)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", id)
	}
	return b.String()
}
