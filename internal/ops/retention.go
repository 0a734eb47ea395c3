package ops

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/recompute"
	"github.com/gameops/rollup/retention"
	"github.com/gameops/rollup/store"
)

// RetentionShow prints the retention policy at now: the deployment default (project "") with
// where each period comes from and the projects that override it, or one project's effective
// policy with its stored horizons and where retention cuts now. A project with no tree, no
// token, no counts and no override is a *recompute.UnknownProjectError.
func RetentionShow(ctx context.Context, w io.Writer, db *mongo.Database, project string, now time.Time) error {
	ov, err := retention.NewStore(db).Load(ctx)
	if err != nil {
		return err
	}
	var b strings.Builder
	if project == "" {
		writeDefault(&b, ov)
	} else {
		if _, overridden := ov.Projects[project]; !overridden && ov.Invalid[project] == nil {
			// An unknown project is an error, as for verify and replay: a typo must not
			// read as "the defaults apply".
			if err := recompute.CheckProject(ctx, db, project); err != nil {
				return err
			}
		}
		if err := writeProject(ctx, &b, db, ov, project, now); err != nil {
			return err
		}
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// RetentionChange is a change of a scope's overrides for RetentionApply.
type RetentionChange struct {
	// Scope is a project, or retention.DefaultScope for the deployment default.
	Scope string
	// Set are the periods to set; Clear the tiers whose override goes (Clear empty and
	// Set nil: every tier of the scope).
	Set   retention.Override
	Clear []store.Tier
	// DryRun checks and shows the result without writing it.
	DryRun bool
}

// RetentionApply checks a change against every project's effective policy (the change is
// refused with a *retention.PolicyError when any would be unsafe), stores it unless it is a
// dry run, and prints the result as RetentionShow does.
func RetentionApply(ctx context.Context, w io.Writer, db *mongo.Database, c RetentionChange, now time.Time) error {
	st := retention.NewStore(db)
	ov, err := st.Load(ctx)
	if err != nil {
		return err
	}
	next := ov.Set(c.Scope, c.Set)
	if c.Set == nil {
		next = ov.Clear(c.Scope, c.Clear)
	}
	projects, err := store.Projects(ctx, db)
	if err != nil {
		return err
	}
	if err := next.Check(retention.DefaultLimits(), projects...); err != nil {
		return err
	}
	var b strings.Builder
	switch {
	case c.DryRun:
		b.WriteString("dry run: nothing written\n")
	default:
		if err := st.Save(ctx, c.Scope, scopeOf(next, c.Scope), now); err != nil {
			return err
		}
		b.WriteString("saved; the instance that enforces retention in 'rollup serve' applies it at its next pass (within about a minute)\n")
	}
	if c.Scope == retention.DefaultScope {
		writeDefault(&b, next)
	} else {
		if err := recompute.CheckProject(ctx, db, c.Scope); err != nil {
			fmt.Fprintf(&b, "note: project %s has no tree, no token and no counts yet: check the name\n", c.Scope)
		}
		if err := writeProject(ctx, &b, db, next, c.Scope, now); err != nil {
			return err
		}
	}
	_, err = io.WriteString(w, b.String())
	return err
}

func scopeOf(o retention.Overrides, scope string) retention.Override {
	if scope == retention.DefaultScope {
		return o.Default
	}
	return o.Projects[scope]
}

// writeDefault writes the deployment default and the projects that override it.
func writeDefault(b *strings.Builder, ov retention.Overrides) {
	b.WriteString("deployment default (every project keeps a tier this long unless it overrides it)\n")
	eff := ov.For("")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "TIER\tKEEP\tFROM")
	for _, t := range store.Tiers() {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\n", t, eff.Of(t), eff.From[t])
	}
	_ = tw.Flush()
	if err := ov.Invalid[retention.DefaultScope]; err != nil {
		fmt.Fprintf(b, "invalid: %v: retention deletes nothing until it is fixed\n", err)
	}
	names := slices.Sorted(maps.Keys(ov.Projects))
	for n := range ov.Invalid {
		if n != retention.DefaultScope && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		b.WriteString("no project overrides it\n")
		return
	}
	fmt.Fprintf(b, "projects with overrides: %d\n", len(names))
	for _, n := range names {
		if err := ov.Invalid[n]; err != nil {
			fmt.Fprintf(b, "  %s  invalid: %v\n", n, err)
			continue
		}
		var parts []string
		for _, t := range store.Tiers() {
			if v, ok := ov.Projects[n][t]; ok {
				parts = append(parts, fmt.Sprintf("%s=%s", t, v))
			}
		}
		fmt.Fprintf(b, "  %s  %s\n", n, strings.Join(parts, " "))
	}
}

// writeProject writes a project's effective policy, its horizons and where retention cuts now.
func writeProject(ctx context.Context, b *strings.Builder, db *mongo.Database, ov retention.Overrides, project string, now time.Time) error {
	hz, err := store.NewHorizons(db).Get(ctx, project)
	if err != nil {
		return err
	}
	eff := ov.For(project)
	fmt.Fprintf(b, "retention of project %s (per tier: its override, else the deployment default, else built in)\n", project)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "TIER\tKEEP\tFROM\tHORIZON\tDUE NOW")
	for _, t := range store.Tiers() {
		h := "none"
		if at := hz.Of(t); !at.IsZero() {
			h = at.Format(time.RFC3339)
		}
		due := "kept forever"
		if at := retention.Horizon(t, eff.Of(t), now); !at.IsZero() {
			due = at.Format(time.RFC3339)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t, eff.Of(t), eff.From[t], h, due)
	}
	_ = tw.Flush()
	if _, err := ov.Usable(project, retention.DefaultLimits()); err != nil {
		fmt.Fprintf(b, "refused: %v: retention leaves the project alone until it is fixed\n", err)
	}
	b.WriteString("HORIZON: documents of the tier before it may have been deleted (replay refuses to rebuild from them).\n" +
		"DUE NOW: where retention cuts at this moment; a 5m or 1h cut waits for the hourly or daily summaries built from it.\n")
	return nil
}
