package api

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/store"
)

// maxAnnotations bounds the recorded events one answer lists.
const maxAnnotations = 1000

// Annotation kinds besides the store's event kinds.
const annotationTree = "tree"

// serveAnnotations answers GET /v1/projects/{project}/annotations?from=&to=: the tree
// versions that take effect in the window (from the trees collection) and the events rollup
// recorded (replays, retention passes that deleted documents), by time.
func (s *Server) serveAnnotations(ctx context.Context, _ tokenInfo, project string, q url.Values) (any, error) {
	if err := checkParams(q, "from", "to"); err != nil {
		return nil, err
	}
	from, to, err := s.read.window(q, s.read.tick, 7*24*time.Hour)
	if err != nil {
		return nil, err
	}
	out := apiv1.AnnotationsResponse{From: from, To: to, Annotations: []apiv1.Annotation{}}
	vs, err := s.read.trees.Versions(ctx, project)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		if v.EffectiveFrom.Before(from) || !v.EffectiveFrom.Before(to) {
			continue
		}
		out.Annotations = append(out.Annotations, apiv1.Annotation{Time: v.EffectiveFrom, TimeEnd: v.EffectiveFrom, Kind: annotationTree,
			Title: fmt.Sprintf("tree v%d", v.Version),
			Text: fmt.Sprintf("tree version %d takes effect: %d nodes, %d leaves (imported %s)", v.Version, v.Nodes, v.Leaves,
				v.CreatedAt.UTC().Format(time.RFC3339)),
			Tags: []string{"rollup", annotationTree}})
	}
	evs, err := store.NewEvents(s.read.db).Range(ctx, project, from, to, maxAnnotations)
	if err != nil {
		return nil, err
	}
	for _, e := range evs {
		out.Annotations = append(out.Annotations, apiv1.Annotation{Time: e.At.UTC(), TimeEnd: e.End.UTC(), Kind: e.Kind, Title: e.Title, Text: e.Text,
			Tags: []string{"rollup", e.Kind}})
	}
	slices.SortStableFunc(out.Annotations, func(a, b apiv1.Annotation) int { return a.Time.Compare(b.Time) })
	return out, nil
}
