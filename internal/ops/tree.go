package ops

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// nextTickStart returns t when it is a tick start, else the next tick start after it.
func nextTickStart(t time.Time) time.Time {
	a := tree.AlignTick(t, tree.DefaultTick)
	if a.Equal(t) {
		return a
	}
	return a.Add(tree.DefaultTick)
}

// ImportTree stores t as its project's next version, effective from the tick starting at
// effective (rounded up to a tick start; zero: the next tick), and reports the version.
func ImportTree(ctx context.Context, w io.Writer, s *treedb.Store, t *tree.Tree, effective time.Time) error {
	if effective.IsZero() {
		effective = tree.AlignTick(time.Now(), tree.DefaultTick).Add(tree.DefaultTick)
	}
	eff := nextTickStart(effective)
	v, err := s.Import(ctx, t.Project(), t.Nodes(), eff)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "project %s: version %d, effective from %s, %d nodes, %d leaves\n",
		t.Project(), v, eff.Format(time.RFC3339), t.Len(), t.LeafCount(t.Root().ID))
	if !eff.Equal(effective) {
		fmt.Fprintf(&b, "note: --effective %s rounded up to the tick start %s\n", effective.Format(time.RFC3339), eff.Format(time.RFC3339))
	}
	if eff.Before(time.Now()) {
		b.WriteString("note: the effective time is in the past: rollups already computed for those ticks keep the old tree until replayed\n")
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// ShowTree says which version of a project's tree to print.
type ShowTree struct {
	Project string
	Version int       // 0: the latest, or the one in effect At
	At      time.Time // zero: the latest
	JSON    bool      // a nested JSON file 'rollup tree import' reads back, instead of an outline
}

// Show prints the version q names: a header and an indented outline, or JSON.
func (q ShowTree) Show(ctx context.Context, w io.Writer, s *treedb.Store) error {
	versions, err := s.Versions(ctx, q.Project)
	if err != nil {
		return err
	}
	if len(versions) == 0 {
		return fmt.Errorf("project %q has no tree: import one with 'rollup tree import FILE'", q.Project)
	}
	v := versions[len(versions)-1].Version
	switch {
	case q.Version != 0:
		v = q.Version
	case !q.At.IsZero():
		var ok bool
		if v, _, ok, err = s.VersionAt(ctx, q.Project, q.At); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("no version of project %q is in effect at %s (the first is effective from %s)",
				q.Project, q.At.UTC().Format(time.RFC3339), versions[0].EffectiveFrom.Format(time.RFC3339))
		}
	}
	t, err := s.Load(ctx, q.Project, v)
	if err != nil {
		return err
	}
	if q.JSON {
		layout := tree.Nested
		if t.Height() > tree.MaxNestedDepth {
			layout = tree.Flat
		}
		out, err := tree.Encode(t, tree.FormatJSON, layout)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	for _, info := range versions {
		if info.Version == v {
			_, err := fmt.Fprintf(w, "project %s version %d of %d, effective from %s, %d nodes, %d leaves\n",
				q.Project, v, versions[len(versions)-1].Version, info.EffectiveFrom.Format(time.RFC3339), info.Nodes, info.Leaves)
			if err != nil {
				return err
			}
		}
	}
	return t.WriteText(w)
}

// ValidTree reports a tree file that is valid.
func ValidTree(w io.Writer, path string, t *tree.Tree) error {
	_, err := fmt.Fprintf(w, "%s: project %s, %d nodes, %d leaves, %d levels: valid\n",
		path, t.Project(), t.Len(), t.LeafCount(t.Root().ID), t.Height()+1)
	return err
}
