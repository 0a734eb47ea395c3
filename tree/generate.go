package tree

import (
	"strconv"
	"strings"
)

// Node types of the trees Generate builds.
const (
	TypeProject = "project"
	TypeGroup   = "group"
	TypeServer  = "server"
	TypeProcess = "process"
)

// Generate returns a demo hierarchy: one root (id project, type "project"; project must not itself look like a group id such as "g01") with groups
// children of type "group", each with servers children of type "server", each with processes
// leaves of type "process". Ids are deterministic and count from 1: "g03", "g03-s0012",
// "g03-s0012-p07" (at least 2, 4 and 2 digits, more when a count needs them). The ids do not
// contain the project: two generated projects in one deployment share node ids, which the
// deployment's rule (ids unique across projects) forbids, so give each demo project its own
// database, or pass the nodes through Prefixed. Negative counts are taken as 0 (a level of 0
// makes the level above the leaves). Nodes come parents first, so the result passes Build for
// any valid project name.
func Generate(project string, groups, servers, processes int) []Node {
	groups, servers, processes = max(groups, 0), max(servers, 0), max(processes, 0)
	total := 1 + groups + groups*servers + groups*servers*processes
	out := make([]Node, 0, total)
	out = append(out, Node{ID: project, Type: TypeProject})
	gw, sw, pw := width(groups, 2), width(servers, 4), width(processes, 2)
	var b strings.Builder
	for g := 1; g <= groups; g++ {
		gid := pad(&b, "g", g, gw, "")
		out = append(out, Node{ID: gid, Type: TypeGroup, Parent: project})
		for s := 1; s <= servers; s++ {
			sid := pad(&b, "-s", s, sw, gid)
			out = append(out, Node{ID: sid, Type: TypeServer, Parent: gid})
			for p := 1; p <= processes; p++ {
				out = append(out, Node{ID: pad(&b, "-p", p, pw, sid), Type: TypeProcess, Parent: sid})
			}
		}
	}
	return out
}

// Prefixed returns a copy of nodes with every id but the root's (project) prefixed by
// "project-", so that several projects' trees can live in one deployment (node ids are unique
// across its projects).
func Prefixed(project string, nodes []Node) []Node {
	out := make([]Node, len(nodes))
	for i, n := range nodes {
		if n.ID != project {
			n.ID = project + "-" + n.ID
		}
		if n.Parent != "" && n.Parent != project {
			n.Parent = project + "-" + n.Parent
		}
		out[i] = n
	}
	return out
}

// width is the number of digits of n, at least minimum.
func width(n, minimum int) int {
	return max(len(strconv.Itoa(n)), minimum)
}

// pad returns prefix + tag + n zero-padded to w digits.
func pad(b *strings.Builder, tag string, n, w int, prefix string) string {
	b.Reset()
	b.WriteString(prefix)
	b.WriteString(tag)
	d := strconv.Itoa(n)
	for i := len(d); i < w; i++ {
		b.WriteByte('0')
	}
	b.WriteString(d)
	return b.String()
}
