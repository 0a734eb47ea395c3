package api

import (
	"context"
	"net/url"
	"time"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/store"
)

// defaultTicksWindow is the window of GET .../ticks without from.
const defaultTicksWindow = 24 * time.Hour

// serveTicks answers GET /v1/projects/{project}/ticks?from=&to=: the ticks of [from, to) that
// have a document of their tree version's root, in time order, with the root's totals.
func (s *Server) serveTicks(ctx context.Context, _ tokenInfo, project string, q url.Values) (any, error) {
	if err := checkParams(q, "from", "to"); err != nil {
		return nil, err
	}
	from, to, err := s.read.window(q, s.read.tick, defaultTicksWindow)
	if err != nil {
		return nil, err
	}
	if n := to.Sub(from) / s.read.tick; n > MaxTicksWindow {
		return nil, badParam("from", "the window [%s, %s) has %d ticks, at most %d allowed",
			from.Format(time.RFC3339), to.Format(time.RFC3339), n, MaxTicksWindow)
	}
	spans, err := s.read.spans(ctx, project, from, to)
	if err != nil {
		return nil, err
	}
	out := []apiv1.TickSummary{}
	for _, sp := range spans {
		if sp.tree == nil {
			continue
		}
		root := sp.tree.Root()
		err := s.read.nodeDocs(ctx, project, root.ID, root.Type, sp.from, sp.to, func(d store.Node) {
			out = append(out, apiv1.TickSummary{Tick: d.Tick, Online: d.Online, Reported: d.Reported, Expected: d.Expected})
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
