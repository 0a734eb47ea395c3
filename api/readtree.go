package api

import (
	"context"
	"net/url"
	"slices"
	"strings"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// serveTree answers GET /v1/projects/{project}/tree?tick=: every node of the tick's tree
// version with its document's totals (0 of its leaves without one), and the orphans (leaf
// documents that are not a leaf of the tree with their type). It
// reads every document of the tick once (index {project, timestamp}).
func (s *Server) serveTree(ctx context.Context, _ tokenInfo, project string, q url.Values) (any, error) {
	if err := checkParams(q, "tick"); err != nil {
		return nil, err
	}
	t, err := s.read.atTick(ctx, project, q)
	if err != nil {
		return nil, err
	}
	sp, err := s.read.treeAt(ctx, project, t)
	if err != nil {
		return nil, err
	}
	tr := sp.tree
	docs := make(map[string]store.Node, tr.Len())
	orphans := []apiv1.Orphan{}
	err = s.read.tickDocs(ctx, project, t, func(d store.Node) {
		if !d.Parent && !isTreeLeaf(tr, d.ID, d.Type) {
			// counted nowhere: as replay and verify, an orphan is any leaf document
			// that is not a leaf of the tree with its type
			orphans = append(orphans, apiv1.Orphan{ID: d.ID, Type: d.Type, Online: d.Online})
			return
		}
		if !tr.Has(d.ID) {
			return
		}
		docs[d.ID+"\x00"+d.Type] = d
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(orphans, func(a, b apiv1.Orphan) int {
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return strings.Compare(a.Type, b.Type)
	})
	end := t.Add(s.read.tick)
	return apiv1.TreeResponse{
		Project: project, Tick: t, TreeVersion: sp.version, Root: tr.Root().ID,
		Nodes: treeNodes(tr, docs), Orphans: orphans, Open: end.After(s.read.now()), ClosesAt: end,
	}, nil
}

// isTreeLeaf reports whether id is a leaf of tr with type typ.
func isTreeLeaf(tr *tree.Tree, id, typ string) bool {
	n, ok := tr.Node(id)
	return ok && n.Type == typ && tr.IsLeaf(id)
}

// treeNodes lists tr's nodes breadth-first from the root, each with its document in docs
// (keyed id NUL type) or, without one, online 0 and reported 0 of its leaves.
func treeNodes(tr *tree.Tree, docs map[string]store.Node) []apiv1.TreeNode {
	out := make([]apiv1.TreeNode, 0, tr.Len())
	queue := []tree.Node{tr.Root()}
	for len(queue) > 0 {
		nd := queue[0]
		queue = queue[1:]
		children := tr.Children(nd.ID)
		tn := apiv1.TreeNode{ID: nd.ID, Type: nd.Type, Parent: nd.Parent, Expected: int64(tr.LeafCount(nd.ID)),
			Children: make([]string, len(children))}
		if d, ok := docs[nd.ID+"\x00"+nd.Type]; ok {
			tn.Online, tn.Reported, tn.Expected = d.Online, d.Reported, d.Expected
		}
		for i, c := range children {
			tn.Children[i] = c.ID
		}
		out = append(out, tn)
		queue = append(queue, children...)
	}
	return out
}
