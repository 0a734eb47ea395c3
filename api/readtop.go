package api

import (
	"cmp"
	"context"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gameops/rollup/api/apiv1"
)

// serveTop answers GET /v1/projects/{project}/top?node=&tick=&n=: the node's children in the
// tick's tree version, by online descending then id, with the values the node's document holds
// for them (0 of their leaves when it holds none, or when the node has no document).
func (s *Server) serveTop(ctx context.Context, _ tokenInfo, project string, q url.Values) (any, error) {
	if err := checkParams(q, "node", "tick", "n"); err != nil {
		return nil, err
	}
	node, err := nodeParam(q)
	if err != nil {
		return nil, err
	}
	n, err := intParam(q, "n", DefaultTopN, 1, MaxTopN)
	if err != nil {
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
	nd, ok := sp.tree.Node(node)
	if !ok {
		return nil, notFound(apiv1.ErrUnknownNode, "node", "node %q is not in version %d of the tree of project %q (effective at %s)",
			node, sp.version, project, t.Format(time.RFC3339))
	}
	children := sp.tree.Children(node)
	out := apiv1.TopResponse{Node: node, Type: nd.Type, Tick: t, Children: make([]apiv1.TopChild, len(children))}
	for i, c := range children {
		out.Children[i] = apiv1.TopChild{ID: c.ID, Type: c.Type, Expected: int64(sp.tree.LeafCount(c.ID))}
	}
	if len(children) > 0 {
		p, found, err := s.read.parentDoc(ctx, project, node, nd.Type, t)
		if err != nil {
			return nil, err
		}
		if found {
			for i := range out.Children {
				c := &out.Children[i]
				if st, ok := p.Children[c.ID]; ok && st.Type == c.Type {
					c.Online, c.Reported, c.Expected = st.Online, st.Reported, st.Expected
				}
			}
		}
	}
	slices.SortFunc(out.Children, func(a, b apiv1.TopChild) int {
		if c := cmp.Compare(b.Online, a.Online); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	out.Children = out.Children[:min(n, len(out.Children))]
	return out, nil
}
