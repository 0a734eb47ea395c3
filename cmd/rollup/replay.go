package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/gameops/rollup/metrics"
	"github.com/gameops/rollup/recompute"
	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

const replayUsage = `usage: rollup replay --project P --from T1 --to T2 [--dry-run | --tiers-only] [--progress auto|bar|lines|none] [flags]

Recompute every parent and root of a project for the ticks in [T1, T2) (RFC3339) from the
leaves, with the tree version in effect at each tick: after a tree import effective in the
past, an outage, a bug, or what 'rollup verify' reports. Each tick's parents are rebuilt
bottom-up (children maps replaced, totals recomputed) and written with a revision guard, so
the replay is idempotent and safe while the service runs (a parent the watcher changes
meanwhile is merged, not overwritten). Ticks are finished in order; after an interrupt,
run the command again (it redoes the window; nothing is lost), or resume from the tick it
prints. Progress goes to stderr: a bar on a terminal, plain lines (about one a second)
otherwise; the summary goes to stdout. --dry-run writes nothing and prints, one line per
parent a replay would change, "node tick old new" (online totals; other changed fields
follow; parents whose only change would be a child's new revision are not listed).
A window that starts before the leaves' retention horizon (leaves older than it may have
been deleted: see 'rollup retention show') is refused, naming the horizon, with exit status
1 and nothing written: a rebuild would compute totals from nothing. Replay from the horizon.

The hourly and daily summaries of every hour and UTC day that overlaps the window are
rebuilt too, whole (an hour from its 5-minute parents, a day from its hours), after the
window's ticks in them. --tiers-only rebuilds only those summaries, from the 5-minute parents
as stored (what 'rollup verify' asks for when only summaries are wrong).

Examples:
  rollup replay --project demo --from 2024-05-01T00:00:00Z --to 2024-05-02T00:00:00Z --dry-run \
      --mongodb-uri 'mongodb://db1/?replicaSet=rs0'
  ROLLUP_MONGODB_URI='mongodb://db1/?replicaSet=rs0' rollup replay --project demo \
      --from 2024-05-01T10:00:00Z --to 2024-05-01T12:00:00Z --progress lines

Exit status: 0 done, 1 failure or interrupt (rerun to finish), 2 usage error.

Flags:
`

// replayConfig is the parsed command line of rollup replay.
type replayConfig struct {
	window   windowFlags
	dryRun   bool
	tiers    bool
	progress string
	logLevel string
	store    storeFlags
}

func parseReplay(e *env, args []string) (replayConfig, error) {
	var c replayConfig
	fs := e.flags("replay", replayUsage)
	fs.BoolVar(&c.dryRun, "dry-run", false, "print what would change, write nothing")
	fs.BoolVar(&c.tiers, "tiers-only", false, "rebuild only the hourly and daily summaries, from the 5-minute parents as stored")
	fs.StringVar(&c.progress, "progress", "auto", "progress on stderr: auto (bar on a terminal, else lines), bar, lines or none")
	fs.StringVar(&c.logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	err := parseWindowCommand(e, fs, args, &c.window, &c.store, func() error {
		if c.progress != "auto" && c.progress != "bar" && c.progress != "lines" && c.progress != "none" {
			return fmt.Errorf("--progress %q: want auto, bar, lines or none", c.progress)
		}
		if c.dryRun && c.tiers {
			return errors.New("--dry-run and --tiers-only do not go together")
		}
		return nil
	}, "replay works on a MongoDB deployment: pass --mongodb-uri (or set ROLLUP_MONGODB_URI)")
	return c, err
}

func runReplay(ctx context.Context, e *env, args []string) error {
	c, err := parseReplay(e, args)
	if err != nil {
		return usageError(err)
	}
	if c.progress == "auto" {
		c.progress = "lines"
		if isTerminal(e.stderr) {
			c.progress = "bar"
		}
	}
	log, err := metrics.NewLogger(c.logLevel, false, e.stderr)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	defer func() { _ = log.Sync() }()
	return c.store.withDB(ctx, func(db *mongo.Database) error {
		trees := treedb.NewCache(treedb.New(db))
		if c.dryRun {
			return replayDryRun(ctx, e.stdout, db, trees, c)
		}
		p := newProgress(e.stderr, c.progress, time.Now)
		st, err := recompute.Replay(ctx, db, trees, c.window.project, c.window.from, c.window.to, recompute.ReplayOptions{
			Progress:  p.update,
			Logger:    log,
			TiersOnly: c.tiers,
		})
		p.finish()
		if err == nil && st.Ticks+st.Hours+st.Days > 0 {
			// The dashboard's and Grafana's annotations show it on the window's chart.
			if rerr := store.NewEvents(db).Record(ctx, store.Event{Kind: store.EventReplay, Project: c.window.project,
				At: c.window.from, End: c.window.to, Title: "rollup replay",
				Text: fmt.Sprintf("%d ticks, %d parent writes (%d conflicts), %d hourly and %d daily summaries rebuilt",
					st.Ticks, st.ParentWrites, st.Conflicts, st.Hours, st.Days)}); rerr != nil {
				log.Warn("replay done, but not recorded as an annotation", zap.Error(rerr))
			}
		}
		return replaySummary(e.stdout, c, st, p.elapsed(), err)
	})
}

// replaySummary prints the totals and, after a failure, where to resume.
func replaySummary(w io.Writer, c replayConfig, st recompute.ReplayStats, took time.Duration, err error) error {
	var b strings.Builder
	verb := "replayed"
	var refused *recompute.HorizonError
	switch {
	case errors.As(err, &refused):
		verb = "refused"
	case err != nil:
		verb = "interrupted"
	}
	fmt.Fprintf(&b, "%s %s: %d ticks, %d leaves, %d parent writes (%d conflicts), %d orphans, %d invalid in %s (%s leaves/s)\n",
		verb, c.window, st.Ticks, st.Leaves, st.ParentWrites, st.Conflicts, st.Orphans, st.Invalid,
		took.Round(time.Millisecond), rate(st.Leaves, took))
	fmt.Fprintf(&b, "summaries: %d hourly and %d daily buckets rebuilt, %d writes\n", st.Hours, st.Days, st.TierWrites)
	if err == nil && st.Ticks == 0 && !c.tiers {
		fmt.Fprintf(&b, "note: project %s has no documents in the window\n", c.window.project)
	}
	if err != nil && refused == nil {
		from := c.window.from
		if !st.LastTick.IsZero() {
			// After the last tick finished; from that tick itself when the next one starts an
			// hour, so the resumed replay rebuilds the summaries of its hour and day too.
			from = st.LastTick.Add(tree.DefaultTick)
			if from.Equal(store.BucketStart(store.Tier1h, from)) {
				from = st.LastTick
			}
		}
		flag := ""
		if c.tiers {
			flag, from = "--tiers-only ", c.window.from
		}
		fmt.Fprintf(&b, "resume: rollup replay %s--project %s --from %s --to %s\n",
			flag, c.window.project, from.Format(time.RFC3339), c.window.to.Format(time.RFC3339))
	}
	if _, werr := io.WriteString(w, b.String()); werr != nil && err == nil {
		err = fmt.Errorf("print summary: %w", werr)
	}
	return err
}

// replayDryRun prints the parents a replay would change, and a summary.
func replayDryRun(ctx context.Context, w io.Writer, db *mongo.Database, trees treedb.TreeSource, c replayConfig) error {
	st, err := recompute.Plan(ctx, db, trees, c.window.project, c.window.from, c.window.to, func(ch rollup.Change) error {
		if _, err := io.WriteString(w, ch.String()+"\n"); err != nil {
			return fmt.Errorf("print changes: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "dry run %s: %d ticks, %d leaves, %d parents would change; nothing written\n",
		c.window, st.Ticks, st.Leaves, st.Changes)
	return err
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// rate formats n per d as a rounded number ("-" for no time).
func rate(n int64, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(n)/d.Seconds())
}

// progress prints a replay's progress: a redrawn bar (mode "bar"), a line about once a
// second and at the end ("lines"), or nothing ("none").
type progress struct {
	w       io.Writer
	mode    string
	now     func() time.Time
	start   time.Time
	last    time.Time // last print
	drawn   bool      // a bar is on the current line
	lastLen int
}

// Intervals between progress prints.
const (
	progressLineEvery = time.Second
	progressBarEvery  = 100 * time.Millisecond
	progressBarWidth  = 30
)

func newProgress(w io.Writer, mode string, now func() time.Time) *progress {
	return &progress{w: w, mode: mode, now: now, start: now()}
}

func (p *progress) elapsed() time.Duration { return p.now().Sub(p.start) }

// update is recompute.ReplayOptions.Progress.
func (p *progress) update(r recompute.ReplayProgress) {
	now := p.now()
	final := r.Done == r.Total
	every := progressLineEvery
	if p.mode == "bar" {
		every = progressBarEvery
	}
	if p.mode == "none" || (!final && !p.last.IsZero() && now.Sub(p.last) < every) {
		return
	}
	p.last = now
	took := now.Sub(p.start)
	eta := "-"
	if r.Done > 0 && took > 0 {
		eta = (took * time.Duration(r.Total-r.Done) / time.Duration(r.Done)).Round(time.Second).String()
	}
	if p.mode == "lines" {
		_, _ = fmt.Fprintf(p.w, "replay: %d/%d ticks, %d leaves, %s leaves/s, %d parent writes, tick %s, eta %s\n",
			r.Done, r.Total, r.Stats.Leaves, rate(r.Stats.Leaves, took), r.Stats.ParentWrites, r.Tick.Format(time.RFC3339), eta)
		return
	}
	filled := progressBarWidth
	if r.Total > 0 {
		filled = progressBarWidth * r.Done / r.Total
	}
	line := fmt.Sprintf("[%s%s] %d/%d ticks  %s leaves/s  ETA %s",
		strings.Repeat("#", filled), strings.Repeat(".", progressBarWidth-filled), r.Done, r.Total, rate(r.Stats.Leaves, took), eta)
	pad := ""
	if n := p.lastLen - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	p.lastLen = len(line)
	_, _ = fmt.Fprintf(p.w, "\r%s%s", line, pad)
	p.drawn = true
}

// finish ends a bar's line.
func (p *progress) finish() {
	if p.drawn {
		_, _ = io.WriteString(p.w, "\n")
		p.drawn = false
	}
}
