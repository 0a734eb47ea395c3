package ops

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gameops/rollup/migrations"
)

// MigrateUp applies the pending migrations (dryRun: reports what it would do, changes
// nothing), waiting at most lockWait for another instance's lock (0: not at all), and prints
// the report, also after a failure.
func MigrateUp(ctx context.Context, w io.Writer, m *migrations.Migrator, dryRun bool, lockWait time.Duration) error {
	if lockWait == 0 {
		lockWait = -1 // UpOptions: negative means do not wait
	}
	r, err := m.Up(ctx, migrations.UpOptions{DryRun: dryRun, LockWait: lockWait})
	if fmtErr := r.Format(w); fmtErr != nil && err == nil {
		err = fmt.Errorf("print report: %w", fmtErr)
	}
	return err
}

// MigrateStatus prints one line per step of database, the number pending and the schema
// drift (an applied step's index missing or defined differently; `migrate up` repairs it).
func MigrateStatus(ctx context.Context, w io.Writer, m *migrations.Migrator, database string) error {
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	drift, err := m.Drift(ctx)
	if err != nil {
		return err
	}
	return printMigrateStatus(w, database, st, drift)
}

// printMigrateStatus prints one line per step, the number pending and the schema drift.
func printMigrateStatus(w io.Writer, database string, st []migrations.StepStatus, drift []migrations.StepDrift) error {
	var b strings.Builder
	fmt.Fprintf(&b, "database %s:\n", database)
	pending, width := 0, 0
	for _, s := range st {
		width = max(width, len(s.Name))
	}
	for _, s := range st {
		state := "pending"
		switch {
		case s.Applied && s.Unknown:
			state = "applied " + s.AppliedAt.UTC().Format(time.RFC3339) + " (unknown to this rollup: a newer version applied it)"
		case s.Applied:
			state = "applied " + s.AppliedAt.UTC().Format(time.RFC3339)
		default:
			pending++
		}
		fmt.Fprintf(&b, "  %3d  %-*s  %s\n", s.Version, width, s.Name, state)
	}
	for _, d := range drift {
		fmt.Fprintf(&b, "schema drift: %s\n", d)
	}
	switch {
	case pending == 0 && len(drift) == 0:
		b.WriteString("up to date\n")
	case pending == 0:
		fmt.Fprintf(&b, "%d indexes drifted: run 'rollup migrate up'\n", len(drift))
	default:
		fmt.Fprintf(&b, "%d pending: run 'rollup migrate up'\n", pending)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
