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
// recorded (replays, retention passes that deleted documents, store outages, history-lost
// replays), by time. Overlapping outages (each instance records its own view of one) are
// merged into one annotation.
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
	for _, e := range mergeOutages(evs) {
		tags := []string{"rollup", e.Kind}
		if e.Kind == store.EventHistoryLost {
			tags = append(tags, "alert")
		}
		out.Annotations = append(out.Annotations, apiv1.Annotation{Time: e.At.UTC(), TimeEnd: e.End.UTC(), Kind: e.Kind, Title: e.Title, Text: e.Text,
			Tags: tags})
	}
	slices.SortStableFunc(out.Annotations, func(a, b apiv1.Annotation) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// mergeOutages returns evs (sorted by At) with each run of overlapping outage events merged
// into one spanning them all, its text each instance's view: two serve instances record one
// outage twice, and a chart showing it twice would mislead.
func mergeOutages(evs []store.Event) []store.Event {
	out := make([]store.Event, 0, len(evs))
	last := -1 // index in out of the latest outage
	seen := 0  // the events merged into it
	for _, e := range evs {
		if e.Kind != store.EventOutage {
			out = append(out, e)
			continue
		}
		if last >= 0 && e.At.Before(out[last].End) {
			m := &out[last]
			if e.End.After(m.End) {
				m.End = e.End
			}
			seen++
			m.Title = fmt.Sprintf("store outage (seen by %d instances)", seen)
			m.Text += "; " + e.Text
			continue
		}
		out = append(out, e)
		last, seen = len(out)-1, 1
	}
	return out
}
