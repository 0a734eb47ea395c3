package retention

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gameops/rollup/store"
)

// Period is how long a tier's documents are kept after their bucket starts; Forever keeps them.
type Period time.Duration

// Forever keeps a tier's documents (nothing is deleted). It is larger than every other
// Period, so the ordering rule (a coarser tier is kept at least as long) reads naturally.
const Forever Period = math.MaxInt64

// MaxPeriod is the longest finite Period (about 100 years); longer is Forever.
const MaxPeriod = Period(36500 * 24 * time.Hour)

const day = 24 * time.Hour

// ParsePeriod reads a period: a whole number of days ("14d"), a Go duration ("36h", "90m",
// "1h30m"), or "forever". It must be positive and at most MaxPeriod.
func ParsePeriod(s string) (Period, error) {
	s = strings.TrimSpace(s)
	if s == "forever" {
		return Forever, nil
	}
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || strings.TrimLeft(n, "0123456789") != "" {
			return 0, fmt.Errorf("%q: want a whole number of days such as 14d, a duration such as 36h, or forever", s)
		}
		if maxDays := int64(MaxPeriod / Period(day)); days < 1 || days > maxDays {
			return 0, fmt.Errorf("%q: want 1d to %dd (or forever)", s, maxDays)
		}
		d = time.Duration(days) * day
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q: want a whole number of days such as 14d, a duration such as 36h, or forever", s)
		}
	}
	if d <= 0 || Period(d) > MaxPeriod {
		return 0, fmt.Errorf("%q: want a positive period of at most %s (or forever)", s, MaxPeriod)
	}
	return Period(d), nil
}

// String formats p as ParsePeriod reads it: whole days as "14d", other periods as Go
// durations, Forever as "forever".
func (p Period) String() string {
	switch {
	case p == Forever:
		return "forever"
	case p > 0 && time.Duration(p)%day == 0:
		return fmt.Sprintf("%dd", time.Duration(p)/day)
	}
	return time.Duration(p).String()
}

// Policy is how long each tier is kept.
type Policy struct {
	Leaves, FiveMin, Hour, Day Period
}

// Of returns tier t's period (0 for an unknown tier).
func (p Policy) Of(t store.Tier) Period {
	switch t {
	case store.TierLeaves:
		return p.Leaves
	case store.Tier5m:
		return p.FiveMin
	case store.Tier1h:
		return p.Hour
	case store.Tier1d:
		return p.Day
	}
	return 0
}

// With returns p with tier t kept for v.
func (p Policy) With(t store.Tier, v Period) Policy {
	switch t {
	case store.TierLeaves:
		p.Leaves = v
	case store.Tier5m:
		p.FiveMin = v
	case store.Tier1h:
		p.Hour = v
	case store.Tier1d:
		p.Day = v
	}
	return p
}

// String formats p as "leaves=14d 5m=35d 1h=400d 1d=forever".
func (p Policy) String() string {
	parts := make([]string, 0, 4)
	for _, t := range store.Tiers() {
		parts = append(parts, fmt.Sprintf("%s=%s", t, p.Of(t)))
	}
	return strings.Join(parts, " ")
}

// Defaults is the built-in policy, what a game operator keeps: raw leaves two weeks (long
// enough to replay any incident noticed within days), 5-minute totals a month and a bit
// (month-over-month at full resolution), hourly summaries 400 days (year-over-year), daily
// summaries forever (a few hundred bytes per node and day).
func Defaults() Policy {
	return Policy{Leaves: Period(14 * day), FiveMin: Period(35 * day), Hour: Period(400 * day), Day: Forever}
}

// DefaultLateWindow is how late a leaf may arrive: the ingest API refuses ticks older than
// this (api.DefaultLateWindow; a test keeps them equal).
const DefaultLateWindow = 24 * time.Hour

// SafetyMargin is added to every minimum period: clock skew between instances and the time
// a pass or a replay takes.
const SafetyMargin = time.Hour

// Limits are what a policy is checked against.
type Limits struct {
	// LateWindow is how late a leaf may arrive (DefaultLateWindow); a bucket can change until
	// its end plus LateWindow.
	LateWindow time.Duration
}

// DefaultLimits are serve's limits.
func DefaultLimits() Limits { return Limits{LateWindow: DefaultLateWindow} }

// Minimum is the shortest safe period of tier t: its documents are the sources of the tier
// built from them, whose bucket can still change until the bucket ends plus the late window
// (a late leaf changes its 5-minute parent, which changes the hour, which changes the day),
// plus SafetyMargin. Daily summaries, the sources of nothing, are kept at least until their
// own day is final.
func (l Limits) Minimum(t store.Tier) Period {
	b := store.Bucket(t)
	if built, ok := store.Built(t); ok {
		b = store.Bucket(built)
	}
	return Period(b + l.LateWindow + SafetyMargin)
}

// PolicyError says why a policy is unsafe, naming the tier and the rule.
type PolicyError struct {
	// Project is the project whose effective policy it is ("" for the deployment default).
	Project string
	// Tier is the tier whose period is refused.
	Tier store.Tier
	// Reason says what rule it breaks and what would be accepted.
	Reason string
}

// Error names the project, the tier and the reason.
func (e *PolicyError) Error() string {
	who := "the deployment default"
	if e.Project != "" {
		who = "project " + e.Project
	}
	return fmt.Sprintf("retention of %s, tier %s: %s", who, e.Tier, e.Reason)
}

// Validate checks that p is safe to enforce: every period is set, at least its tier's
// Minimum, and a tier is kept at least as long as the tier it is built from (leaves ≤ 5m ≤
// 1h ≤ 1d), so that no tier's sources go before the documents built from them. The error is
// a *PolicyError for project ("" for the deployment default).
func (p Policy) Validate(project string, l Limits) error {
	for _, t := range store.Tiers() {
		v := p.Of(t)
		if v <= 0 {
			return &PolicyError{Project: project, Tier: t, Reason: "no period set"}
		}
		if minimum := l.Minimum(t); v < minimum {
			built, ok := store.Built(t)
			why := fmt.Sprintf("its %s buckets can change for %s after they end (the late-data window)", t, l.LateWindow)
			if ok {
				why = fmt.Sprintf("they are the sources of the %s tier, whose %s buckets can change for %s after they end (the late-data window)",
					built, store.Bucket(built), l.LateWindow)
			}
			return &PolicyError{Project: project, Tier: t, Reason: fmt.Sprintf(
				"%s is shorter than the minimum %s: %s, plus a %s margin", v, minimum, why, SafetyMargin)}
		}
	}
	for _, t := range store.Tiers() {
		v := p.Of(t)
		if built, ok := store.Built(t); ok && p.Of(built) < v {
			return &PolicyError{Project: project, Tier: built, Reason: fmt.Sprintf(
				"%s is shorter than the %s kept of its sources (%s): keep %s at least %s, or shorten %s",
				p.Of(built), v, t, built, v, t)}
		}
	}
	return nil
}

// Horizon is where tier t's documents start to be kept at now under period p: the start of
// the bucket now − p falls in (zero for Forever: nothing is deleted).
func Horizon(t store.Tier, p Period, now time.Time) time.Time {
	if p == Forever || p <= 0 {
		return time.Time{}
	}
	return now.Add(-time.Duration(p)).UTC().Truncate(store.Bucket(t))
}

// ErrNoTiers is returned by ParseAssignments for an empty list.
var ErrNoTiers = errors.New("name at least one TIER=PERIOD (tiers: leaves, 5m, 1h, 1d)")

// ParseTier reads a tier name.
func ParseTier(s string) (store.Tier, error) {
	t := store.Tier(s)
	if !t.Valid() {
		return "", fmt.Errorf("unknown tier %q: want leaves, 5m, 1h or 1d", s)
	}
	return t, nil
}

// ParseAssignments reads "TIER=PERIOD" arguments (leaves=14d 5m=35d) into an Override.
func ParseAssignments(args []string) (Override, error) {
	if len(args) == 0 {
		return nil, ErrNoTiers
	}
	out := Override{}
	for _, a := range args {
		name, val, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want TIER=PERIOD, such as 5m=35d", a)
		}
		t, err := ParseTier(name)
		if err != nil {
			return nil, err
		}
		if _, dup := out[t]; dup {
			return nil, fmt.Errorf("tier %s is set twice", t)
		}
		p, err := ParsePeriod(val)
		if err != nil {
			return nil, fmt.Errorf("tier %s: %w", t, err)
		}
		out[t] = p
	}
	return out, nil
}
