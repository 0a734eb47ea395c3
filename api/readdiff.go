package api

import (
	"cmp"
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// DefaultDiffN and MaxDiffN bound the nodes and silent leaves listed by GET .../diff.
const (
	DefaultDiffN = 100
	MaxDiffN     = 1000
)

// serveDiff answers GET /v1/projects/{project}/diff?from=&to=&node=&n=: node by node of the
// subtree of node (default the root), how its total changed from the tick from to the tick to
// (default the latest tick), each change's share of the root's, and the leaves that went
// silent (reported at from, not at to) apart from real drops. It reads every document of the
// two ticks once, as the tree answer does.
func (s *Server) serveDiff(ctx context.Context, _ tokenInfo, project string, q url.Values) (any, error) {
	if err := checkParams(q, "from", "to", "node", "n"); err != nil {
		return nil, err
	}
	n, err := intParam(q, "n", DefaultDiffN, 1, MaxDiffN)
	if err != nil {
		return nil, err
	}
	from, ok, err := s.read.tickNamed(q, "from")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, badParam("from", "required: the tick to compare with, e.g. a day before to")
	}
	to, ok, err := s.read.tickNamed(q, "to")
	if err != nil {
		return nil, err
	}
	if !ok {
		if to, err = s.read.atTick(ctx, project, url.Values{}); err != nil {
			return nil, err
		}
	}
	var states [2]tickState
	for i, t := range []time.Time{from, to} {
		sp, err := s.read.treeAt(ctx, project, t)
		if err != nil {
			return nil, err
		}
		st := tickState{tree: sp.tree, version: sp.version, docs: map[string]int64{}}
		err = s.read.tickDocs(ctx, project, t, func(d store.Node) {
			if nd, ok := sp.tree.Node(d.ID); ok && nd.Type == d.Type {
				st.docs[d.ID] = d.Online
			}
		})
		if err != nil {
			return nil, err
		}
		states[i] = st
	}
	node := q.Get("node")
	if node == "" {
		node = states[1].tree.Root().ID
	} else if err := tree.ValidateID(node); err != nil {
		return nil, badParam("node", "%s", err.Error())
	}
	if !states[0].tree.Has(node) && !states[1].tree.Has(node) {
		return nil, notFound(apiv1.ErrUnknownNode, "node", "node %q is in the tree of project %q at neither %s nor %s",
			node, project, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	out := diffTicks(states[0], states[1], node, n)
	out.From, out.To = from, to
	return out, nil
}

// tickNamed is tickParam for the parameter name.
func (rd *reader) tickNamed(q url.Values, name string) (time.Time, bool, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, false, nil
	}
	t, ok, err := rd.tickParam(url.Values{"tick": {v}})
	var herr *httpError
	if errors.As(err, &herr) {
		for i := range herr.body.Errors {
			herr.body.Errors[i].Field = name
		}
		herr.body.Message = strings.Replace(herr.body.Message, "tick:", name+":", 1)
	}
	return t, ok, err
}

// tickState is one tick of a diff: its tree and the online of every node that has a
// document (by id; a document under another type than the tree's is not the node's).
type tickState struct {
	tree    *tree.Tree
	version int
	docs    map[string]int64
}

// subtree returns the ids of node and everything under it in tr (none when tr lacks node).
func subtree(tr *tree.Tree, node string) []string {
	if !tr.Has(node) {
		return nil
	}
	out := []string{node}
	for i := 0; i < len(out); i++ {
		for _, c := range tr.Children(out[i]) {
			out = append(out, c.ID)
		}
	}
	return out
}

// diffTicks computes the diff of node's subtree from a to b: a pure function of the two
// ticks, checked against a naive diff by the tests.
func diffTicks(a, b tickState, node string, n int) apiv1.DiffResponse {
	out := apiv1.DiffResponse{Node: node, FromTreeVersion: a.version, ToTreeVersion: b.version,
		Nodes: []apiv1.DiffNode{}, Silent: []apiv1.SilentLeaf{}}
	byID := map[string]*apiv1.DiffNode{}
	var order []string
	add := func(tr *tree.Tree, id string) *apiv1.DiffNode {
		d := byID[id]
		if d == nil {
			nd, _ := tr.Node(id)
			d = &apiv1.DiffNode{ID: id, Type: nd.Type, Parent: nd.Parent, Leaf: tr.IsLeaf(id)}
			byID[id] = d
			order = append(order, id)
		}
		return d
	}
	for _, id := range subtree(b.tree, node) {
		add(b.tree, id).To = b.docs[id]
	}
	for _, id := range subtree(a.tree, node) {
		add(a.tree, id).From = a.docs[id]
	}
	// Silent: a leaf of both trees (same type) with a document at a and none at b; its
	// loss counts for it and each of its ancestors in b up to node.
	for _, id := range order {
		d := byID[id]
		fromOnline, reported := a.docs[id]
		na, inA := a.tree.Node(id)
		nb, inB := b.tree.Node(id)
		if _, still := b.docs[id]; !reported || still || !inA || !inB || na.Type != nb.Type || !a.tree.IsLeaf(id) || !b.tree.IsLeaf(id) {
			continue
		}
		out.Silent = append(out.Silent, apiv1.SilentLeaf{ID: id, Type: d.Type, Parent: d.Parent, Online: fromOnline})
		out.SilentOnline += fromOnline
		for up := id; ; {
			if u := byID[up]; u != nil {
				u.SilentLeaves++
				u.SilentOnline += fromOnline
			}
			if up == node {
				break
			}
			p, ok := b.tree.Parent(up)
			if !ok {
				break
			}
			up = p.ID
		}
	}
	root := byID[node]
	for _, id := range order {
		d := byID[id]
		d.Change = d.To - d.From
		d.ReportedChange = d.Change + d.SilentOnline
	}
	for _, id := range order {
		d := byID[id]
		if root.Change != 0 {
			share := float64(d.Change) / float64(root.Change)
			d.Share = &share
		}
		if id != node && (d.Change != 0 || d.SilentLeaves > 0) {
			out.Nodes = append(out.Nodes, *d)
		}
	}
	out.Root = *root
	rankDiff(&out, n)
	return out
}

// rankDiff orders out's nodes by the size of their change and its silent leaves by the
// online they lost (ties by id), counts both in the totals and keeps the first n of each.
func rankDiff(out *apiv1.DiffResponse, n int) {
	slices.SortFunc(out.Nodes, func(x, y apiv1.DiffNode) int {
		if c := cmp.Compare(abs(y.Change), abs(x.Change)); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	slices.SortFunc(out.Silent, func(x, y apiv1.SilentLeaf) int {
		if c := cmp.Compare(y.Online, x.Online); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	out.NodesTotal, out.SilentTotal = len(out.Nodes), len(out.Silent)
	out.Nodes, out.Silent = out.Nodes[:min(n, len(out.Nodes))], out.Silent[:min(n, len(out.Silent))]
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
