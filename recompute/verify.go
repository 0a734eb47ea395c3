package recompute

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree/treedb"
)

// readTick reads the tree and every document of project at tick, as rollup.Check takes them.
func readTick(ctx context.Context, counts store.Counts, trees treedb.TreeSource, project string, tick time.Time) (rollup.TickDocs, error) {
	d, err := counts.TickDocs(ctx, project, tick)
	if err != nil {
		return d, err
	}
	tr, version, err := trees.TreeAt(ctx, project, tick)
	if err != nil {
		return d, err
	}
	if tr != nil {
		nodes := tr.Nodes()
		d.Nodes = make([]rollup.Node, len(nodes))
		for i, n := range nodes {
			d.Nodes[i] = rollup.Node(n)
		}
		d.TreeVersion = version
	}
	return d, nil
}

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// Max bounds the violations and orphan leaves listed (every one is counted); 0 lists
	// none.
	Max int
}

// KindIndex is the violation of a missing or differently defined unique index on counts.
const KindIndex rollup.ViolationKind = "index"

// VerifyReport is what Verify found in a window.
type VerifyReport struct {
	// Project, From and To are the window checked.
	Project  string
	From, To time.Time
	// Ticks is the number of ticks with documents; Checked the (node, tick) pairs checked;
	// Leaves the leaf documents read; NoTree the ticks without a tree version; Ignored the
	// parent documents of nodes that are not parents in their tick's tree.
	Ticks, Checked, Leaves, NoTree, Ignored int
	// Orphans is the number of orphan leaves (not in their tick's tree: kept, not counted);
	// OrphanLeaves are the first Max of them, by tick and id.
	Orphans      int
	OrphanLeaves []OrphanLeaf
	// Index is what is wrong with the unique index on counts (nil: it is as rollup needs it).
	Index *store.Drift
	// ByKind counts the violations of each kind (an index problem included); Total is their
	// sum; Violations are the first Max.
	ByKind     map[rollup.ViolationKind]int
	Total      int
	Violations []rollup.Violation
}

// OrphanLeaf is a leaf document whose id is not in its tick's tree.
type OrphanLeaf struct {
	ID, Type string
	Tick     time.Time
	Online   int64
}

// OK reports whether the window has no violation.
func (r VerifyReport) OK() bool { return r.Total == 0 }

// Verify proves the totals of project for the ticks in [from, to): for every parent and root
// (node, tick) that it is the sum of its children and a full recompute of its leaves over the
// tick's tree, with the tree's expectations; that no key has two documents, no orphan is
// counted and every document decodes; and that the unique index on counts exists as rollup
// defines it. It writes nothing. An unknown project is an *UnknownProjectError.
func Verify(ctx context.Context, db *mongo.Database, trees treedb.TreeSource, project string, from, to time.Time, opts VerifyOptions) (VerifyReport, error) {
	r := VerifyReport{Project: project, From: from, To: to, ByKind: map[rollup.ViolationKind]int{}}
	if err := CheckProject(ctx, db, project); err != nil {
		return r, err
	}
	ix, ok := store.IndexNamed(store.CountsCollection, store.CountsKeyIndex)
	if !ok {
		return r, fmt.Errorf("verify: no index %s in store.Indexes", store.CountsKeyIndex)
	}
	drift, err := store.CheckIndex(ctx, db, ix)
	if err != nil {
		return r, err
	}
	if drift != nil {
		r.Index = drift
		r.ByKind[KindIndex]++
		r.Total++
	}
	counts := store.NewCounts(db)
	ticks, err := counts.Ticks(ctx, project, from, to)
	if err != nil {
		return r, err
	}
	for _, tick := range ticks {
		d, err := readTick(ctx, counts, trees, project, tick)
		if err != nil {
			return r, err
		}
		rep, err := rollup.Check(d)
		if err != nil {
			return r, fmt.Errorf("check %s: %w", tick.Format(time.RFC3339), err)
		}
		r.Ticks++
		r.Checked += rep.Checked
		r.Leaves += len(d.Leaves)
		r.Orphans += rep.Orphans
		r.Ignored += rep.Ignored
		if d.Nodes == nil {
			r.NoTree++
		}
		for _, l := range rep.OrphanLeaves {
			if len(r.OrphanLeaves) < opts.Max {
				r.OrphanLeaves = append(r.OrphanLeaves, OrphanLeaf{ID: l.ID, Type: l.Type, Tick: tick, Online: l.Online})
			}
		}
		for _, v := range rep.Violations {
			r.ByKind[v.Kind]++
			r.Total++
			if len(r.Violations) < opts.Max {
				r.Violations = append(r.Violations, v)
			}
		}
	}
	return r, nil
}

// Repair is one step that fixes some kinds of violations.
type Repair struct {
	// Kinds are the violation kinds it fixes (those found).
	Kinds []rollup.ViolationKind
	// Command is what to run (a command line, or what to do by hand).
	Command string
	// Why says what it does.
	Why string
}

// Repairs lists, in the order to run them, what fixes the violations found: `rollup migrate
// up` for duplicates and the unique index (replay cannot: it writes through the index), the
// invalid documents by hand (every reader skips them, replay included), then `rollup replay`
// over the window for the totals. Running them and then Verify again gives no violation.
func (r VerifyReport) Repairs() []Repair {
	found := func(kinds ...rollup.ViolationKind) []rollup.ViolationKind {
		var out []rollup.ViolationKind
		for _, k := range kinds {
			if r.ByKind[k] > 0 {
				out = append(out, k)
			}
		}
		return out
	}
	var out []Repair
	if ks := found(rollup.KindDuplicate, KindIndex); len(ks) > 0 {
		out = append(out, Repair{Kinds: ks, Command: "rollup migrate up",
			Why: fmt.Sprintf("removes the duplicate documents (keeping the newest of each key) and rebuilds the unique index %s", store.CountsKeyIndex)})
	}
	if ks := found(rollup.KindInvalid); len(ks) > 0 {
		out = append(out, Repair{Kinds: ks, Command: "fix or delete each invalid document listed, by hand",
			Why: "every reader skips it, replay included: give a leaf's counts whole numbers (NumberLong), or delete the document " +
				"(a parent's is rebuilt by the replay)"})
	}
	replayKinds := []rollup.ViolationKind{rollup.KindSum, rollup.KindRecompute, rollup.KindExpected, rollup.KindOrphan, rollup.KindChild, rollup.KindMissing}
	ks := found(replayKinds...)
	if len(out) > 0 && len(ks) == 0 {
		// After migrate up or a hand fix the parents of the window must be rebuilt too.
		ks = found(rollup.KindDuplicate, rollup.KindInvalid)
	}
	if len(ks) > 0 {
		out = append(out, Repair{Kinds: ks, Command: fmt.Sprintf("rollup replay --project %s --from %s --to %s",
			r.Project, r.From.UTC().Format(time.RFC3339), r.To.UTC().Format(time.RFC3339)),
			Why: "recomputes every parent and root of the window from its leaves"})
	}
	return out
}

// Format writes the report for an operator: the summary, the orphan leaves, the violations
// listed and the repairs in order.
func (r VerifyReport) Format(w io.Writer) error {
	var b strings.Builder
	window := fmt.Sprintf("project %s [%s, %s)", r.Project, r.From.UTC().Format(time.RFC3339), r.To.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "verify %s: %d ticks, %d (node, tick) checked, %d leaf documents, %d orphan leaves\n",
		window, r.Ticks, r.Checked, r.Leaves, r.Orphans)
	if r.Ticks == 0 {
		fmt.Fprintf(&b, "note: project %s has no documents in the window\n", r.Project)
	}
	if r.NoTree > 0 {
		fmt.Fprintf(&b, "note: %d ticks have no tree version (every leaf is an orphan, nothing to check)\n", r.NoTree)
	}
	if r.Ignored > 0 {
		fmt.Fprintf(&b, "note: %d parent documents of nodes that are not parents in their tick's tree (left by a tree edit) were not checked\n", r.Ignored)
	}
	if r.Orphans > 0 {
		fmt.Fprintf(&b, "orphan leaves (kept, not counted: their ids are not in their tick's tree; import a tree that has them, or ignore them)")
		if len(r.OrphanLeaves) < r.Orphans {
			fmt.Fprintf(&b, "; the first %d", len(r.OrphanLeaves))
		}
		b.WriteString(":\n")
		for _, o := range r.OrphanLeaves {
			fmt.Fprintf(&b, "  %s (%s) at %s: online %d\n", o.ID, o.Type, o.Tick.UTC().Format(time.RFC3339), o.Online)
		}
	}
	if r.Index == nil {
		fmt.Fprintf(&b, "unique index %s: ok\n", store.CountsKeyIndex)
	}
	if r.OK() {
		b.WriteString("no violations\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	kinds := make([]string, 0, len(r.ByKind))
	for k := range r.ByKind {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, r.ByKind[rollup.ViolationKind(k)])
	}
	fmt.Fprintf(&b, "%d violations (%s)", r.Total, strings.Join(parts, ", "))
	listed := len(r.Violations)
	if r.Index != nil {
		listed++
	}
	if listed < r.Total {
		fmt.Fprintf(&b, "; the first %d:\n", listed)
	} else {
		b.WriteString(":\n")
	}
	if r.Index != nil {
		fmt.Fprintf(&b, "  %-9s %s\n", KindIndex, r.Index)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	b.WriteString("repair, in this order, then verify again:\n")
	for i, rp := range r.Repairs() {
		ks := make([]string, len(rp.Kinds))
		for j, k := range rp.Kinds {
			ks[j] = string(k)
		}
		fmt.Fprintf(&b, "  %d. %s\n     (%s: %s)\n", i+1, rp.Command, strings.Join(ks, ", "), rp.Why)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// PlanStats are the totals of Plan.
type PlanStats struct {
	// Ticks and Leaves are the ticks and leaf documents read; Changes the parents a replay
	// would change.
	Ticks, Leaves, Changes int
}

// Plan calls fn with every parent a Replay of the window would change, tick by tick in
// order, writing nothing (`rollup replay --dry-run`). An unknown project is an
// *UnknownProjectError.
func Plan(ctx context.Context, db *mongo.Database, trees treedb.TreeSource, project string, from, to time.Time, fn func(rollup.Change) error) (PlanStats, error) {
	var st PlanStats
	if err := CheckProject(ctx, db, project); err != nil {
		return st, err
	}
	counts := store.NewCounts(db)
	ticks, err := counts.Ticks(ctx, project, from, to)
	if err != nil {
		return st, err
	}
	for _, tick := range ticks {
		d, err := readTick(ctx, counts, trees, project, tick)
		if err != nil {
			return st, err
		}
		rep, err := rollup.Check(d)
		if err != nil {
			return st, fmt.Errorf("check %s: %w", tick.Format(time.RFC3339), err)
		}
		st.Ticks++
		st.Leaves += len(d.Leaves)
		for _, c := range rep.Changes {
			st.Changes++
			if err := fn(c); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}
