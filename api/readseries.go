package api

import (
	"context"
	"net/url"
	"time"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// Default windows of GET .../series without from, per step: 288, 168 and 90 points.
const (
	defaultWindow5m = 24 * time.Hour
	defaultWindow1h = 7 * 24 * time.Hour
	defaultWindow1d = 90 * 24 * time.Hour
)

// tickValue is one tick of a node's series before downsampling.
type tickValue struct {
	present bool
	// future is set for a tick that has not started by the server's clock: without a
	// document it is not due, so it neither expects leaves nor makes its step incomplete.
	future   bool
	online   int64
	reported int64
	expected int64
}

// serveSeries answers GET /v1/projects/{project}/series?node=&from=&to=&step=&agg=: one point
// per step of [from, to) (from aligned down, to aligned up to the step), gaps included. It
// reads only the node's own documents through the unique {id, type, timestamp} index: for a
// 1h or 1d step of a parent or root, its hourly or daily summaries (one per point); else its
// 5-minute documents, per tree version span.
func (s *Server) serveSeries(ctx context.Context, _ tokenInfo, project string, q url.Values) (any, error) {
	sq, err := s.read.seriesQuery(q)
	if err != nil {
		return nil, err
	}
	typ, points, ok, err := s.read.summarySeries(ctx, project, sq)
	if err != nil {
		return nil, err
	}
	if ok {
		return apiv1.SeriesResponse{Node: sq.node, Type: typ, Step: sq.stepName, Agg: sq.agg,
			Tier: string(tierOfStep(sq.stepName)), Points: markOpen(points, sq.step, s.read.now())}, nil
	}
	typ, ticks, err := s.read.nodeTicks(ctx, project, sq.node, sq.from, sq.to)
	if err != nil {
		return nil, err
	}
	return apiv1.SeriesResponse{
		Node: sq.node, Type: typ, Step: sq.stepName, Agg: sq.agg, Tier: string(store.Tier5m),
		Points: markOpen(downsample(ticks, sq.from, s.read.tick, int(sq.step/s.read.tick), sq.agg), sq.step, s.read.now()),
	}, nil
}

// seriesParams are the validated parameters of a series request.
type seriesParams struct {
	node     string
	stepName string
	step     time.Duration
	agg      string
	from, to time.Time // aligned to step
}

// seriesQuery validates the parameters of a series request (400 naming the parameter).
func (rd *reader) seriesQuery(q url.Values) (seriesParams, error) {
	var sq seriesParams
	if err := checkParams(q, "node", "from", "to", "step", "agg"); err != nil {
		return sq, err
	}
	node, err := nodeParam(q)
	if err != nil {
		return sq, err
	}
	sq.node = node
	sq.stepName = q.Get("step")
	var def time.Duration
	switch sq.stepName {
	case "", apiv1.Step5m:
		sq.stepName, sq.step, def = apiv1.Step5m, 5*time.Minute, defaultWindow5m
	case apiv1.Step1h:
		sq.step, def = time.Hour, defaultWindow1h
	case apiv1.Step1d:
		sq.step, def = 24*time.Hour, defaultWindow1d
	default:
		return sq, badParam("step", "%q is not one of 5m, 1h, 1d", sq.stepName)
	}
	if sq.step%rd.tick != 0 {
		return sq, badParam("step", "%s is not a multiple of the server's tick %s", sq.stepName, rd.tick)
	}
	sq.agg = q.Get("agg")
	switch sq.agg {
	case "":
		sq.agg = apiv1.AggMax
	case apiv1.AggMax, apiv1.AggMin, apiv1.AggMean, apiv1.AggLast:
	default:
		return sq, badParam("agg", "%q is not one of max, min, mean, last", sq.agg)
	}
	if sq.from, sq.to, err = rd.window(q, sq.step, def); err != nil {
		return sq, err
	}
	if n := sq.to.Sub(sq.from) / sq.step; n > MaxSeriesPoints {
		return sq, badParam("from", "the window [%s, %s) has %d points of %s, at most %d allowed: shorten it or use a larger step",
			sq.from.Format(time.RFC3339), sq.to.Format(time.RFC3339), n, sq.stepName, MaxSeriesPoints)
	}
	if sq.to.Sub(sq.from) > MaxSeriesWindow {
		return sq, badParam("from", "the window [%s, %s) is longer than %d days", sq.from.Format(time.RFC3339), sq.to.Format(time.RFC3339),
			MaxSeriesWindow/(24*time.Hour))
	}
	return sq, nil
}

// nodeTicks returns node's value at every tick of [from, to): its document's, or for a tick
// without one the node's leaf count in the tick's tree version as expected (0 where the
// version does not have the node, and for a tick that has not started yet: nothing is due
// for it, so the step in progress is not incomplete for its future ticks). typ is the node's type in the latest version of the window
// that has it; a node in no version of the window is 404 unknown_node.
func (rd *reader) nodeTicks(ctx context.Context, project, node string, from, to time.Time) (string, []tickValue, error) {
	spans, err := rd.spans(ctx, project, from, to)
	if err != nil {
		return "", nil, err
	}
	ticks := make([]tickValue, to.Sub(from)/rd.tick)
	// started is how many ticks of the window have started by the server's clock.
	started := min(len(ticks), max(0, int(tree.AlignTick(rd.now(), rd.tick).Sub(from)/rd.tick)+1))
	typ, known := "", false
	for _, sp := range spans {
		if sp.tree == nil {
			continue
		}
		nd, ok := sp.tree.Node(node)
		if !ok {
			continue
		}
		typ, known = nd.Type, true
		lo, hi := int(sp.from.Sub(from)/rd.tick), int(sp.to.Sub(from)/rd.tick)
		leaves := int64(sp.tree.LeafCount(node))
		for i := lo; i < min(hi, started); i++ {
			ticks[i].expected = leaves
		}
		err := rd.nodeDocs(ctx, project, node, nd.Type, sp.from, sp.to, func(d store.Node) {
			off := d.Tick.Sub(from)
			if off%rd.tick != 0 { // not a tick start: not a count of this API's ticks
				return
			}
			ticks[off/rd.tick] = tickValue{present: true, online: d.Online, reported: d.Reported, expected: d.Expected}
		})
		if err != nil {
			return "", nil, err
		}
	}
	for i := started; i < len(ticks); i++ {
		ticks[i].future = true
	}
	if !known {
		return "", nil, notFound(apiv1.ErrUnknownNode, "node", "node %q is not in the tree of project %q at any tick of [%s, %s)",
			node, project, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	return typ, ticks, nil
}

// markOpen sets every point's end (ClosesAt) and marks open those that have not ended at now.
func markOpen(points []apiv1.SeriesPoint, step time.Duration, now time.Time) []apiv1.SeriesPoint {
	for i := range points {
		points[i].ClosesAt = points[i].T.Add(step)
		points[i].Open = points[i].ClosesAt.After(now)
	}
	return points
}

// downsample combines every per consecutive ticks (starting at from, tick apart) into one
// point: online by agg over the ticks that have a document (null when none has), reported and
// expected summed, complete when some tick has a document and every tick but the future ones
// without a document has one with reported == expected.
func downsample(ticks []tickValue, from time.Time, tick time.Duration, per int, agg string) []apiv1.SeriesPoint {
	out := make([]apiv1.SeriesPoint, 0, (len(ticks)+per-1)/per)
	for lo := 0; lo < len(ticks); lo += per {
		p := apiv1.SeriesPoint{T: from.Add(time.Duration(lo) * tick), Complete: true, Ticks: per}
		var n, sum, maxv, minv, last int64
		for _, tv := range ticks[lo:min(lo+per, len(ticks))] {
			p.Reported += tv.reported
			p.Expected += tv.expected
			if !tv.future || tv.present {
				p.TicksDue++
			}
			if !tv.present {
				p.Complete = p.Complete && tv.future
				continue
			}
			if tv.reported != tv.expected {
				p.Complete = false
			} else {
				p.TicksComplete++
			}
			if n == 0 || tv.online > maxv {
				maxv = tv.online
			}
			if n == 0 || tv.online < minv {
				minv = tv.online
			}
			n++
			sum += tv.online
			last = tv.online
		}
		p.Complete = p.Complete && n > 0
		if n > 0 {
			var v float64
			switch agg {
			case apiv1.AggMean:
				v = float64(sum) / float64(n)
			case apiv1.AggLast:
				v = float64(last)
			case apiv1.AggMin:
				v = float64(minv)
			default:
				v = float64(maxv)
			}
			p.Online = &v
		}
		out = append(out, p)
	}
	return out
}
