package main

import (
	"flag"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/gameops/rollup/metrics/totals"
	"github.com/gameops/rollup/tree"
)

// Bounds of the business metrics' settings.
const (
	maxTotalsGrace    = 24 * time.Hour
	maxTotalsRefresh  = time.Hour
	maxTotalsProjects = 10_000
	maxTotalsGroups   = 10_000
)

// totalsConfig are serve's settings of the business metrics (package metrics/totals): the
// rollup_project_* and rollup_group_* series.
type totalsConfig struct {
	grace       time.Duration
	refresh     time.Duration
	maxProjects int
	groups      string
	maxGroups   int
}

// register adds the settings' flags to fs.
func (c *totalsConfig) register(fs *flag.FlagSet) {
	fs.DurationVar(&c.grace, "totals-grace", totals.DefaultGrace, "business metrics: a tick is complete this long after it ends (agents reported, the watcher rolled it up)")
	fs.DurationVar(&c.refresh, "totals-refresh", totals.DefaultInterval, "business metrics: how often the last complete tick's totals are read from the store")
	fs.IntVar(&c.maxProjects, "totals-max-projects", totals.DefaultMaxProjects, "business metrics: most projects exported, the first by name (0 turns the business metrics off)")
	fs.StringVar(&c.groups, "totals-groups", "", `business metrics: projects whose groups (the root's children) are exported too, comma-separated, or "*" for all`)
	fs.IntVar(&c.maxGroups, "totals-max-groups", totals.DefaultMaxGroups, "business metrics: most groups exported per project, the first by id")
}

// groupProjects returns the --totals-groups list.
func (c totalsConfig) groupProjects() []string {
	var out []string
	for _, p := range strings.Split(c.groups, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// validate checks the settings; an error names the setting and its source.
func (c totalsConfig) validate(s *settings) error {
	switch {
	case c.grace < 0 || c.grace > maxTotalsGrace:
		return s.errorf("totals-grace", "want 0 to %s, got %s", maxTotalsGrace, c.grace)
	case c.refresh < time.Second || c.refresh > maxTotalsRefresh:
		return s.errorf("totals-refresh", "want 1s to %s, got %s", maxTotalsRefresh, c.refresh)
	case c.maxProjects < 0 || c.maxProjects > maxTotalsProjects:
		return s.errorf("totals-max-projects", "want 0 (off) to %d, got %d", maxTotalsProjects, c.maxProjects)
	case c.maxGroups < 1 || c.maxGroups > maxTotalsGroups:
		return s.errorf("totals-max-groups", "want 1 to %d, got %d", maxTotalsGroups, c.maxGroups)
	}
	for _, p := range c.groupProjects() {
		if p == totals.AllProjects {
			continue
		}
		if err := tree.ValidateName("project", p); err != nil {
			return s.errorf("totals-groups", `%w (want project names separated by commas, or "*")`, err)
		}
	}
	return nil
}

// enabled says whether serve runs the business metrics.
func (c totalsConfig) enabled() bool { return c.maxProjects > 0 }

// options returns the totals.Options of the settings.
func (c totalsConfig) options() totals.Options {
	grace := c.grace
	if grace == 0 {
		grace = -1 // totals.Options: negative is none, zero the default
	}
	return totals.Options{Grace: grace, Interval: c.refresh, MaxProjects: c.maxProjects,
		GroupProjects: c.groupProjects(), MaxGroups: c.maxGroups}
}

// logFields describe the settings for the start-up log line.
func (c totalsConfig) logFields() []zap.Field {
	return []zap.Field{
		zap.Duration("totals_grace", c.grace), zap.Duration("totals_refresh", c.refresh),
		zap.Int("totals_max_projects", c.maxProjects), zap.String("totals_groups", c.groups), zap.Int("totals_max_groups", c.maxGroups),
	}
}
