package recompute

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree/treedb"
)

// KindSummary is the violation of an hourly or daily summary that differs from what its
// sources give (Detail names the tier; Field the first field that differs).
const KindSummary rollup.ViolationKind = "summary"

// verifyTiers checks the hourly summaries of every hour that overlaps [from, to) against the
// 5-minute parents as stored, and the daily summaries of every UTC day that overlaps it
// against its hours (those of the window as the 5-minute parents give them, the others as
// stored), adding what differs to r. Buckets whose sources may have expired (hours before
// r.Horizon's 5-minute horizon, days before its hourly one) are not checked: their stored
// summaries are all that is left of them.
func verifyTiers(ctx context.Context, db *mongo.Database, trees treedb.TreeSource, project string, from, to time.Time, opts VerifyOptions, r *VerifyReport) error {
	e := New(db, trees, Options{}, nil)
	add := func(v rollup.Violation) {
		r.ByKind[v.Kind]++
		r.Total++
		if len(r.Violations) < opts.Max {
			r.Violations = append(r.Violations, v)
		}
	}
	ov := &overlay{hours: map[bucketKey]rollup.Stats{}}
	for _, t := range []store.Tier{store.Tier1h, store.Tier1d} {
		bFrom := store.BucketStart(t, from)
		bTo := store.BucketStart(t, to.Add(-time.Nanosecond)).Add(store.BucketSpan(t))
		src := r.Horizon.FiveMin
		if t == store.Tier1d {
			src = r.Horizon.Hour
		}
		if first := store.BucketStart(t, src.Add(store.BucketSpan(t)-time.Nanosecond)); !src.IsZero() && first.After(bFrom) {
			bFrom = first // the first bucket whose sources are all after the horizon
		}
		if !bFrom.Before(bTo) {
			continue
		}
		var o *overlay
		if t == store.Tier1d {
			o = ov
		}
		_, _, err := e.rebuildBuckets(ctx, t, project, bFrom, bTo, o, func(st bucketState) error {
			if t == store.Tier1h {
				ov.hours[st.key] = st.want
				r.Hours++
			} else {
				r.Days++
			}
			if v, bad := summaryViolation(t, st); bad {
				add(v)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("verify %s summaries: %w", t, err)
		}
	}
	return nil
}

// summaryViolation describes what is wrong with a bucket's stored summary, if anything.
func summaryViolation(t store.Tier, st bucketState) (rollup.Violation, bool) {
	v := rollup.Violation{Kind: KindSummary, Node: st.key.id, Type: st.key.typ, Tick: st.key.start}
	switch {
	case st.invalid != nil:
		v.Kind = rollup.KindInvalid
		v.Detail = fmt.Sprintf("%s summary: %v", t, st.invalid)
		return v, true
	case !st.exists && st.want.Count() == 0:
		return v, false
	case !st.exists:
		v.Detail = fmt.Sprintf("%s summary missing (%d ticks summarized by its sources)", t, st.want.Count())
		return v, true
	}
	got, want := st.stored.Stats, st.want
	fields := []struct {
		name      string
		got, want int64
	}{
		{store.FieldCount, got.Count(), want.Count()},
		{store.FieldMax, got.Max, want.Max},
		{store.FieldMin, got.Min, want.Min},
		{store.FieldSum, got.Sum, want.Sum},
		{store.FieldLastOnline, got.Last, want.Last},
		{store.FieldReported, got.Reported, want.Reported},
		{store.FieldExpected, got.Expected, want.Expected},
		{store.FieldFull, got.Full, want.Full},
	}
	for _, f := range fields {
		if f.got != f.want {
			v.Field, v.Stored, v.Expected = f.name, f.got, f.want
			v.Detail = fmt.Sprintf("%s summary", t)
			return v, true
		}
	}
	if got.Ticks != want.Ticks {
		v.Detail = fmt.Sprintf("%s summary: ticks %v, its sources have %v", t, got.Ticks.Slots(), want.Ticks.Slots())
		return v, true
	}
	return v, false
}
