package api

import (
	"context"
	"slices"
	"time"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// tierOfStep is the stored tier a step's points are read from: the hourly or daily summaries
// for 1h and 1d, the 5-minute documents otherwise.
func tierOfStep(step string) store.Tier {
	switch step {
	case apiv1.Step1h:
		return store.Tier1h
	case apiv1.Step1d:
		return store.Tier1d
	}
	return store.Tier5m
}

// summarySeries answers a 1h or 1d series of a parent or root from its hourly or daily
// summaries: one document per point, through the summaries' unique index. ok is false (and
// nothing is read but the tree versions) when the points must come from the 5-minute
// documents instead: a 5m step, a server tick other than the summaries' 5 minutes, or a node
// that is a leaf in some version of the window (leaves have no summaries). A point's
// expected and completeness count the step's ticks without a document as the tick path
// does: each started one expects the node's leaves of its tree version and makes the point
// incomplete.
func (rd *reader) summarySeries(ctx context.Context, project string, sq seriesParams) (typ string, points []apiv1.SeriesPoint, ok bool, err error) {
	tier := tierOfStep(sq.stepName)
	if tier == store.Tier5m || rd.tick != store.SummaryTick || sq.step != store.BucketSpan(tier) {
		return "", nil, false, nil
	}
	spans, err := rd.spans(ctx, project, sq.from, sq.to)
	if err != nil {
		return "", nil, false, err
	}
	var types []string
	for _, sp := range spans {
		if sp.tree == nil {
			continue
		}
		nd, has := sp.tree.Node(sq.node)
		if !has {
			continue
		}
		if sp.tree.IsLeaf(sq.node) {
			return "", nil, false, nil
		}
		typ = nd.Type
		if len(types) == 0 || types[len(types)-1] != nd.Type {
			types = append(types, nd.Type)
		}
	}
	if typ == "" {
		return "", nil, false, nil // unknown: the tick path answers 404
	}
	sums, err := store.NewSummaries(rd.db, tier)
	if err != nil {
		return "", nil, false, err
	}
	per := int(sq.step / rd.tick)
	n := int(sq.to.Sub(sq.from) / sq.step)
	stats := make([]rollup.Stats, n)
	for i, t := range types {
		if i > 0 && slices.Contains(types[:i], t) {
			continue
		}
		err := sums.NodeRange(ctx, project, sq.node, t, sq.from, sq.to, func(s rollup.Summary) {
			b := int(s.Start.Sub(sq.from) / sq.step)
			if b < 0 || b >= n || !s.Start.Equal(sq.from.Add(time.Duration(b)*sq.step)) {
				return
			}
			// A tree edit that changed the node's type within the bucket leaves one
			// summary per type, of disjoint ticks.
			stats[b].Merge(s.Stats, 0)
		})
		if err != nil {
			return "", nil, false, err
		}
	}
	// started is how many ticks of the window have started by the server's clock.
	started := min(n*per, max(0, int(tree.AlignTick(rd.now(), rd.tick).Sub(sq.from)/rd.tick)+1))
	points = make([]apiv1.SeriesPoint, n)
	for b := range n {
		points[b] = rd.summaryPoint(sq, spans, stats[b], b, per, started)
	}
	return typ, points, true, nil
}

// summaryPoint is the point of bucket b (per ticks) of a summary series from s, the merged
// summaries of its ticks; started is how many ticks of the window have started. The ticks
// started without a document each expect the node's leaves of the tree version of their
// span (spans) and make the point incomplete.
func (rd *reader) summaryPoint(sq seriesParams, spans []span, s rollup.Stats, b, per, started int) apiv1.SeriesPoint {
	p := apiv1.SeriesPoint{T: sq.from.Add(time.Duration(b) * sq.step), Reported: s.Reported, Expected: s.Expected, Ticks: per}
	first := b * per
	due := min(per, max(0, started-first)) // the bucket's started ticks
	missing := due - s.Ticks.CountIn(0, due)
	// due, plus the ticks ahead of the clock that already hold a document
	p.TicksDue, p.TicksComplete = due+int(s.Count())-s.Ticks.CountIn(0, due), int(s.Full)
	if missing > 0 {
		for _, sp := range spans {
			lo := max(0, int(sp.from.Sub(p.T)/rd.tick))
			hi := min(due, int(sp.to.Sub(p.T)/rd.tick))
			if lo >= hi || sp.tree == nil || !sp.tree.Has(sq.node) {
				continue
			}
			p.Expected += int64(hi-lo-s.Ticks.CountIn(lo, hi)) * int64(sp.tree.LeafCount(sq.node))
		}
	}
	cnt := s.Count()
	p.Complete = cnt > 0 && missing == 0 && s.Full == cnt
	if cnt > 0 {
		var v float64
		switch sq.agg {
		case apiv1.AggMean:
			v = s.Mean()
		case apiv1.AggLast:
			v = float64(s.Last)
		case apiv1.AggMin:
			v = float64(s.Min)
		default:
			v = float64(s.Max)
		}
		p.Online = &v
	}
	return p
}
