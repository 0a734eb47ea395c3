package recompute

import (
	"context"
	"fmt"
	"time"

	"github.com/gameops/rollup/store"
)

// HorizonError is a rebuild refused because its sources may have been deleted by retention:
// rebuilding Tier over the window needs Source documents from before Source's horizon, and a
// rebuild from what is left would overwrite the stored totals with totals computed from
// nothing (TimescaleDB's refresh-after-drop pitfall). Nothing of the refused ticks is written.
type HorizonError struct {
	Project string
	// Tier is the tier the rebuild writes; Source the tier it is built from.
	Tier, Source store.Tier
	// Horizon is Source's horizon: its documents before it may have been deleted.
	Horizon time.Time
	// From and To are the window asked for.
	From, To time.Time
}

// Error names the tier, its sources and the horizon, and says what can still be replayed.
func (e *HorizonError) Error() string {
	h := e.Horizon.UTC().Format(time.RFC3339)
	msg := fmt.Sprintf("refusing to rebuild the %s tier of project %s from %s: it is built from the %s, whose documents before %s "+
		"(their retention horizon) may have been deleted, so a rebuild would compute totals from nothing; nothing was written for it",
		e.Tier, e.Project, e.From.UTC().Format(time.RFC3339), sourceName(e.Source), h)
	if e.To.After(e.Horizon) {
		return msg + fmt.Sprintf("; the window from the horizon on can be rebuilt: rollup replay --project %s --from %s --to %s",
			e.Project, h, e.To.UTC().Format(time.RFC3339))
	}
	return msg + "; the whole window is before the horizon: its stored totals are final"
}

// Permanent marks the refusal as one that retrying cannot change (retry.IsPermanent).
func (e *HorizonError) Permanent() bool { return true }

func sourceName(t store.Tier) string {
	if t == store.TierLeaves {
		return "leaves"
	}
	return string(t) + " documents"
}

// replayTiers are the tiers Replay rebuilds: the 5-minute parents and the hourly and daily
// summaries, or only the summaries (ReplayOptions.TiersOnly).
func replayTiers(tiersOnly bool) []store.Tier {
	if tiersOnly {
		return []store.Tier{store.Tier1h, store.Tier1d}
	}
	return []store.Tier{store.Tier5m, store.Tier1h, store.Tier1d}
}

// CheckRebuild returns a *HorizonError when rebuilding tier t of project over [from, to)
// needs sources before their horizon in h: the sources of t's bucket that from falls in.
// A tier built from nothing (leaves) is never refused.
func CheckRebuild(h store.Horizon, project string, t store.Tier, from, to time.Time) error {
	src, ok := store.SourceOf(t)
	if !ok {
		return nil
	}
	hz := h.Of(src)
	if hz.IsZero() || !from.UTC().Truncate(store.Bucket(t)).Before(hz) {
		return nil
	}
	return &HorizonError{Project: project, Tier: t, Source: src, Horizon: hz, From: from, To: to}
}

// checkHorizons refuses a rebuild of the tiers over [from, to) (CheckRebuild) with project's
// stored horizons.
func checkHorizons(ctx context.Context, hs store.Horizons, project string, from, to time.Time, tiers []store.Tier) error {
	h, err := hs.Get(ctx, project)
	if err != nil {
		return err
	}
	for _, t := range tiers {
		if err := CheckRebuild(h, project, t, from, to); err != nil {
			return err
		}
	}
	return nil
}
