package storage

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestPlanChoiceMatchesEagerPlanner plans random filters (equalities, $in lists, ranges,
// $and, fields no index has) over random index lists (compound, unique or not, multikey)
// with planOver, which builds only the chosen index's key ranges, and with the planner it
// replaced (below, as it was: every usable index's ranges built, then compared): the plans
// must be the same, index, ranges and all.
func TestPlanChoiceMatchesEagerPlanner(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 2))
	fields := []string{"a", "b", "c", "d"}
	value := func() any { return int32(r.IntN(4)) }
	for i := range 3000 {
		var indexes []*index
		for range 1 + r.IntN(4) {
			var key bson.D
			for _, f := range r.Perm(len(fields))[:1+r.IntN(3)] {
				key = append(key, bson.E{Key: fields[f], Value: int32(1)})
			}
			ix := newIndex(IndexSpec{Name: fmt.Sprint(len(indexes)), Key: key, Unique: r.IntN(2) == 0})
			ix.multikey.Store(r.IntN(4) == 0)
			indexes = append(indexes, ix)
		}
		var filter bson.D
		for _, f := range r.Perm(len(fields))[:r.IntN(len(fields)+1)] {
			var v any
			switch r.IntN(5) {
			case 0:
				v = bson.D{{Key: "$in", Value: bson.A{value(), value(), value()}[:r.IntN(4)]}}
			case 1:
				v = bson.D{{Key: "$gte", Value: value()}}
			case 2:
				v = bson.D{{Key: "$gt", Value: value()}, {Key: "$lt", Value: value()}}
			default:
				v = value()
			}
			filter = append(filter, bson.E{Key: fields[f], Value: v})
		}
		if r.IntN(5) == 0 {
			filter = bson.D{{Key: "$and", Value: bson.A{filter, bson.D{{Key: "d", Value: value()}}}}}
		}
		var bufA, bufB []cond
		got, want := planOver(indexes, filter, &bufA), eagerPlanOver(indexes, filter, &bufB)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: filter %v: planned %+v, the eager planner %+v", i, filter, got, want)
		}
	}
}

// eagerPlanOver is planOver as it was before (issue 25, item 4): every usable index's ranges built.
func eagerPlanOver(indexes []*index, filter bson.D, buf *[]cond) plan {
	conds := collectConds(filter, (*buf)[:0])
	*buf = conds
	best := plan{}
	if len(conds) == 0 {
		return best
	}
	for _, ix := range indexes {
		p, ok := eagerPlanIndex(ix, conds)
		if !ok {
			continue
		}
		if p.score > best.score || (p.score == best.score && best.ix != nil && p.ix.spec.Unique && !best.ix.spec.Unique) {
			best = p
		}
	}
	return best
}

// eagerPlanIndex is the old planIndex: an index's plan with its ranges.
func eagerPlanIndex(ix *index, conds []cond) (plan, bool) {
	var pts []*cond
	combos := 1
	var rng *cond
	for _, e := range ix.spec.Key {
		c := findCond(conds, e.Key)
		if c == nil {
			break
		}
		if !c.isPt {
			rng = c
			break
		}
		if combos*max(len(c.points), 1) > maxPoints {
			break
		}
		combos *= max(len(c.points), 1)
		pts = append(pts, c)
		if len(c.points) == 0 {
			break
		}
	}
	if len(pts) == 0 && rng == nil {
		return plan{}, false
	}
	p := plan{ix: ix, score: 2*len(pts) + 1, dedupe: ix.multikey.Load()}
	if rng != nil {
		p.score++
		p.rangePath, p.rangeClass = rng.path, rng.lo[0]
	}
	p.exact = ix.spec.Unique && rng == nil && len(pts) == len(ix.spec.Key)
	single := true
	n := 0
	for _, c := range pts {
		single = single && len(c.points) == 1
		if len(c.points) > 0 {
			n += len(c.points[0])
		}
	}
	if p.exact && single {
		// Fast path: one full key of a unique index.
		k := make([]byte, 0, n)
		for _, c := range pts {
			k = append(k, c.points[0]...)
		}
		p.ranges = []keyRange{{lo: k}}
		return p, true
	}
	// Cartesian product of the point prefixes, in key order.
	prefixes := [][]byte{nil}
	for _, c := range pts {
		next := make([][]byte, 0, len(prefixes)*len(c.points))
		for _, pre := range prefixes {
			for _, k := range c.points {
				nk := make([]byte, 0, len(pre)+len(k))
				nk = append(append(nk, pre...), k...)
				next = append(next, nk)
			}
		}
		prefixes = next
	}
	for _, pre := range prefixes {
		if rng == nil {
			p.ranges = append(p.ranges, keyRange{lo: pre, hi: prefixEnd(pre)})
			continue
		}
		lo, hi := rng.lo, rng.hi
		if hi == nil {
			hi = []byte{rng.lo[0] + 1}
		}
		if ix.multikey.Load() && rng.lohi {
			// Different array elements may satisfy each bound: keep only the lower bound.
			hi = []byte{rng.lo[0] + 1}
		}
		r := keyRange{lo: append(slices.Clip(pre), lo...), hi: append(slices.Clip(pre), hi...)}
		p.ranges = append(p.ranges, r)
	}
	return p, true
}
