package recompute

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
)

// bucket is a summary bucket in the naive computation.
type bucket struct {
	id, typ string
	start   time.Time
}

// naiveTiers computes the hourly and daily summaries of project from its stored 5-minute
// parent documents with plain loops: every parent or root document whose tick's tree has
// the node, with that type, as a parent, summarized by rollup.NaiveStats per hour and per
// UTC day (the day straight from the ticks, not from the hours).
func (e *env) naiveTiers(project string) map[store.Tier]map[bucket]rollup.Stats {
	e.t.Helper()
	cur, err := e.counts.Find(e.ctx, bson.D{{Key: store.FieldProject, Value: project}, {Key: store.FieldRollup, Value: true}})
	if err != nil {
		e.t.Fatal(err)
	}
	var docs []bson.Raw
	if err := cur.All(e.ctx, &docs); err != nil {
		e.t.Fatal(err)
	}
	byTier := map[store.Tier]map[bucket][]rollup.TickTotals{store.Tier1h: {}, store.Tier1d: {}}
	for _, raw := range docs {
		n, err := store.DecodeNode(raw)
		if err != nil {
			e.t.Fatalf("parent document: %v", err)
		}
		tr, _, _ := e.trees.TreeAt(e.ctx, project, n.Tick)
		if tr == nil {
			continue
		}
		if nd, ok := tr.Node(n.ID); !ok || nd.Type != n.Type || tr.IsLeaf(n.ID) {
			continue
		}
		for t, span := range map[store.Tier]time.Duration{store.Tier1h: time.Hour, store.Tier1d: 24 * time.Hour} {
			b := bucket{n.ID, n.Type, n.Tick.UTC().Truncate(span)}
			byTier[t][b] = append(byTier[t][b], rollup.TickTotals{Slot: int(n.Tick.Sub(b.start) / tick),
				Online: n.Online, Reported: n.Reported, Expected: n.Expected})
		}
	}
	out := map[store.Tier]map[bucket]rollup.Stats{}
	for t, bs := range byTier {
		out[t] = map[bucket]rollup.Stats{}
		for b, ts := range bs {
			out[t][b] = rollup.NaiveStats(ts)
		}
	}
	return out
}

// storedTiers reads every summary of project (summaries of no tick included).
func (e *env) storedTiers(project string) map[store.Tier]map[bucket]rollup.Summary {
	e.t.Helper()
	out := map[store.Tier]map[bucket]rollup.Summary{}
	for _, t := range []store.Tier{store.Tier1h, store.Tier1d} {
		sums, err := store.NewSummaries(e.db, t)
		if err != nil {
			e.t.Fatal(err)
		}
		out[t] = map[bucket]rollup.Summary{}
		err = sums.Project(e.ctx, project, time.Time{}, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), func(k store.Key, s rollup.Summary, err error) error {
			if err != nil {
				return err
			}
			b := bucket{k.ID, k.Type, k.Tick}
			if _, dup := out[t][b]; dup {
				return fmt.Errorf("two %s summaries of %s at %s", t, k.ID, k.Tick)
			}
			out[t][b] = s
			return nil
		})
		if err != nil {
			e.t.Fatal(err)
		}
	}
	return out
}

// tierMismatch returns the first difference between the stored summaries of project and
// naiveTiers ("" when there is none); a stored summary of no tick counts as absent.
func (e *env) tierMismatch(project string) string {
	e.t.Helper()
	want, got := e.naiveTiers(project), e.storedTiers(project)
	for _, t := range []store.Tier{store.Tier1h, store.Tier1d} {
		for b, w := range want[t] {
			if g := got[t][b]; g.Stats != w {
				return fmt.Sprintf("%s summary of %s (%s) at %s: %+v, want %+v", t, b.id, b.typ, b.start, g.Stats, w)
			}
		}
		for b, g := range got[t] {
			if _, ok := want[t][b]; !ok && g.Count() > 0 {
				return fmt.Sprintf("%s summary of %s at %s: %+v, want none", t, b.id, b.start, g.Stats)
			}
		}
	}
	return ""
}

// writeLeaves upserts leaves as ingest does (an older version than the stored one is
// ignored).
func (e *env) writeLeaves(leaves []store.Leaf) {
	e.t.Helper()
	models := make([]mongo.WriteModel, 0, len(leaves))
	for _, l := range leaves {
		w := store.LeafWrite{ID: l.ID, Type: l.Type, Tick: l.Tick, Project: l.Project, Online: l.Online, Version: l.Version,
			SubmissionID: fmt.Sprintf("s-%s-%d", l.ID, l.Version)}
		models = append(models, mongo.NewUpdateOneModel().SetFilter(store.LeafFilter(w)).SetUpdate(store.LeafUpdate(w, time.Now())).SetUpsert(true))
	}
	// A duplicate key is a stale version (a newer one is stored): ingest ignores it too.
	if _, err := e.counts.BulkWrite(e.ctx, models, options.BulkWrite().SetOrdered(false)); err != nil && !onlyDuplicates(err) {
		e.t.Fatalf("write leaves: %v", err)
	}
}

func onlyDuplicates(err error) bool {
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil {
		return false
	}
	for _, we := range bwe.WriteErrors {
		if !mongo.IsDuplicateKeyError(we) {
			return false
		}
	}
	return true
}

// TestTiersRandomized cross-checks the hourly and daily summaries the engine maintains with
// naiveTiers, over random submissions across a UTC midnight, a tree edit, late corrections,
// bursts redelivered after crashes between the 5-minute writes and the summaries', and
// summaries that wait over several bursts (as the watcher holds them); then replay finds
// nothing to change, repairs summaries damaged by hand, and is idempotent.
func TestTiersRandomized(t *testing.T) {
	// 2 seeds cover every statement 4 did (go test -coverpkg over the module: the same
	// 3,151 blocks), for half the CPU under -race; ROLLUP_TEST_SEEDS runs more.
	for seed := range uint64(testctx.Seeds(t, 2)) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 14))
			e := newEnv(t)
			const project = "proj"
			midnight := baseTick().Truncate(24*time.Hour).AddDate(0, 0, -2)
			from := midnight.Add(-3 * time.Hour)
			to := midnight.Add(3 * time.Hour)
			tr1, _ := e.trees.Add(t, project, from.Add(-time.Hour), tree.Generate(project, 2, 2, 2))
			edit := midnight.Add(time.Duration(rng.IntN(24)-12) * tick)
			tr2, _ := e.trees.Add(t, project, edit, tree.Generate(project, 2, 3, 2))
			var all []store.Leaf
			for at := from; at.Before(to); at = at.Add(tick) {
				if rng.IntN(4) == 0 {
					continue // a tick nobody reported
				}
				tr := tr1
				if !at.Before(edit) {
					tr = tr2
				}
				for _, l := range tr.Leaves() {
					if rng.IntN(5) == 0 {
						continue // a leaf that did not report
					}
					all = append(all, store.Leaf{Project: project, ID: l.ID, Type: l.Type, Tick: at,
						Online: int64(rng.IntN(500)), Version: 1})
				}
			}
			// Late corrections: newer versions of some leaves.
			for range len(all) / 10 {
				l := all[rng.IntN(len(all))]
				l.Online, l.Version = int64(rng.IntN(500)), l.Version+1+int64(rng.IntN(3))
				all = append(all, l)
			}
			crash := false
			eng := New(e.db, e.trees, Options{ChunkSize: 7, TierChunk: 5 + rng.IntN(20), Knobs: &Knobs{BeforeTiers: func() bool { return crash }}}, nil)
			queue := [][]store.Leaf{}
			for len(all) > 0 {
				n := min(len(all), 1+rng.IntN(60))
				queue = append(queue, all[:n])
				all = all[n:]
			}
			rng.Shuffle(len(queue), func(i, j int) { queue[i], queue[j] = queue[j], queue[i] })
			held := NewDirty()
			var heldBursts [][]store.Leaf
			crashes := 0
			for len(queue) > 0 {
				b := queue[0]
				queue = queue[1:]
				e.writeLeaves(b)
				if err := eng.Parents(e.ctx, b, held); err != nil {
					t.Fatal(err)
				}
				heldBursts = append(heldBursts, b)
				if rng.IntN(3) != 0 && len(queue) > 0 {
					continue // the summaries wait, as while events flow
				}
				crash = crashes == 0 || rng.IntN(3) == 0
				err := eng.Summarize(e.ctx, held)
				crash = false
				switch {
				case errors.Is(err, ErrCrashed):
					// A crash: the waiting bursts come again (the checkpoint did not pass
					// them) to a fresh set.
					crashes++
					held = NewDirty()
					queue = append(queue, heldBursts...)
				case err != nil:
					t.Fatal(err)
				}
				heldBursts = nil
			}
			if msg := e.mismatch(project, from, to); msg != "" {
				t.Fatal(msg)
			}
			if msg := e.tierMismatch(project); msg != "" {
				t.Fatal(msg)
			}
			if eng.Stats().TierWrites == 0 {
				t.Fatal("no summary written")
			}

			if r, err := Verify(e.ctx, e.db, e.trees, project, from, to, VerifyOptions{Max: 10}); err != nil || !r.OK() || r.Hours == 0 || r.Days == 0 {
				t.Fatalf("verify: %+v, %v", r, err)
			}

			// Replay over the whole window finds nothing to change.
			st, err := Replay(e.ctx, e.db, e.trees, project, from, to, ReplayOptions{})
			if err != nil || st.ParentWrites != 0 || st.TierWrites != 0 || st.Hours == 0 || st.Days == 0 {
				t.Fatalf("replay of a current window: %+v, %v", st, err)
			}

			// Damage: a wrong hour, a daily summary deleted, a summary of a bucket without
			// sources, and an hour whose parents are stale (a 5-minute parent deleted).
			stored := e.storedTiers(project)
			hours := keysOf(stored[store.Tier1h])
			victim := hours[rng.IntN(len(hours))]
			hourly := e.db.Collection(store.HourlyCollection)
			if _, err := hourly.UpdateOne(e.ctx, store.KeyFilter(store.Key{ID: victim.id, Type: victim.typ, Tick: victim.start}),
				bson.D{{Key: "$set", Value: bson.D{{Key: store.FieldMax, Value: int64(-7)}}}}); err != nil {
				t.Fatal(err)
			}
			days := keysOf(stored[store.Tier1d])
			gone := days[rng.IntN(len(days))]
			if _, err := e.db.Collection(store.DailyCollection).DeleteOne(e.ctx, store.KeyFilter(store.Key{ID: gone.id, Type: gone.typ, Tick: gone.start})); err != nil {
				t.Fatal(err)
			}
			ghost := rollup.Summary{ID: "ghost", Type: tree.TypeServer, Project: project, Start: midnight, Rev: 3}
			ghost.Add(2, 10, 1, 1)
			if _, err := hourly.UpdateOne(e.ctx, store.KeyFilter(store.Key{ID: ghost.ID, Type: ghost.Type, Tick: ghost.Start}),
				store.SummaryUpdate(store.Tier1h, ghost, time.Now()), options.UpdateOne().SetUpsert(true)); err != nil {
				t.Fatal(err)
			}
			if msg := e.tierMismatch(project); msg == "" {
				t.Fatal("damage not seen by the naive check")
			}
			r, err := Verify(e.ctx, e.db, e.trees, project, from, to, VerifyOptions{Max: 10})
			if err != nil || r.Total != 3 || r.ByKind[KindSummary] != 3 {
				t.Fatalf("verify of the damage: %+v, %v", r, err)
			}
			seen := map[string]bool{}
			for _, v := range r.Violations {
				switch {
				case v.Node == victim.id && v.Tick.Equal(victim.start) && v.Field == store.FieldMax && v.Stored == -7:
					seen["hour"] = true
				case v.Node == gone.id && v.Tick.Equal(gone.start) && strings.Contains(v.Detail, "1d summary missing"):
					seen["day"] = true
				case v.Node == ghost.ID && v.Field == store.FieldCount && v.Stored == 1 && v.Expected == 0:
					seen["ghost"] = true
				}
			}
			if len(seen) != 3 {
				t.Fatalf("violations %v: found %v", r.Violations, seen)
			}
			if rp := r.Repairs(); len(rp) != 1 || !strings.Contains(rp[0].Command, "rollup replay --tiers-only --project proj") {
				t.Fatalf("repairs: %+v", rp)
			}
			st, err = Replay(e.ctx, e.db, e.trees, project, from, to, ReplayOptions{TiersOnly: true})
			if err != nil || st.ParentWrites != 0 || st.Ticks != 0 || st.TierWrites < 3 {
				t.Fatalf("tiers-only replay: %+v, %v", st, err)
			}
			if msg := e.tierMismatch(project); msg != "" {
				t.Fatal(msg)
			}
			if g := e.storedTiers(project)[store.Tier1h][bucket{ghost.ID, ghost.Type, ghost.Start}]; g.Count() != 0 || g.Rev != 4 {
				t.Fatalf("ghost summary after replay: %+v", g)
			}
			st, err = Replay(e.ctx, e.db, e.trees, project, from, to, ReplayOptions{TiersOnly: true})
			if err != nil || st.TierWrites != 0 {
				t.Fatalf("second tiers-only replay: %+v, %v", st, err)
			}
			if r, err := Verify(e.ctx, e.db, e.trees, project, from, to, VerifyOptions{Max: 10}); err != nil || !r.OK() {
				t.Fatalf("verify after the repair: %+v, %v", r, err)
			}

			// A window inside one hour rebuilds that hour whole (its ticks outside the window
			// included) and its day.
			part := midnight.Add(time.Hour + 10*time.Minute)
			if _, err := hourly.DeleteMany(e.ctx, bson.D{{Key: store.FieldProject, Value: project}}); err != nil {
				t.Fatal(err)
			}
			st, err = Replay(e.ctx, e.db, e.trees, project, part, part.Add(tick), ReplayOptions{})
			if err != nil || st.Hours == 0 || st.Days == 0 {
				t.Fatalf("replay of one tick: %+v, %v", st, err)
			}
			got := e.storedTiers(project)[store.Tier1h]
			for b, w := range e.naiveTiers(project)[store.Tier1h] {
				if b.start.Equal(midnight.Add(time.Hour)) && got[b].Stats != w {
					t.Fatalf("hour %s of %s after a one-tick replay: %+v, want %+v", b.start, b.id, got[b].Stats, w)
				}
			}
			// The other hours are gone, so their days hold only the hour rebuilt.
			if _, err := Replay(e.ctx, e.db, e.trees, project, from, to, ReplayOptions{TiersOnly: true}); err != nil {
				t.Fatal(err)
			}
			if msg := e.tierMismatch(project); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

func keysOf[V any](m map[bucket]V) []bucket {
	out := make([]bucket, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	// Map order is random: sort for a reproducible pick.
	slices.SortFunc(out, func(a, b bucket) int {
		return cmp.Or(a.start.Compare(b.start), cmp.Compare(a.id, b.id), cmp.Compare(a.typ, b.typ))
	})
	return out
}

// TestSummaryWriteFaults: a summary BulkWrite whose outcome is unknown (a writeConcernError)
// is recomputed at once and finds its writes applied; an outage (every update failing) is
// returned to the caller, whose backoff retries, with the dirty hours kept, and the next
// Summarize after it writes them. The fail points match this engine's own client only.
func TestSummaryWriteFaults(t *testing.T) {
	embeddedtest.ParallelWithFailPoints(t)
	e := newEnv(t)
	const project = "proj"
	t0 := baseTick()
	tr, _ := e.trees.Add(t, project, t0.Add(-24*time.Hour), tree.Generate(project, 2, 2, 3))
	c := e.store.Client(t, options.Client().SetAppName("tiers-faults"))
	eng := New(c.Database(e.db.Name()), e.trees, Options{}, nil)
	parents := int64(1 + 2 + 4)
	failUpdates := func(times int) {
		e.store.FailPoint(t, e.client, bson.D{
			{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: times}}},
			{Key: "data", Value: bson.D{
				{Key: "failCommands", Value: bson.A{"update"}},
				{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}, {Key: "errmsg", Value: "waiting for replication timed out"}}},
				{Key: "appName", Value: "tiers-faults"},
			}},
		})
	}
	leavesAt := func(at time.Time, seed int64) []store.Leaf {
		var out []store.Leaf
		for i, l := range tr.Leaves() {
			out = append(out, store.Leaf{Project: project, ID: l.ID, Type: l.Type, Tick: at, Online: seed*100 + int64(i), Version: seed})
		}
		e.writeLeaves(out)
		return out
	}

	d := NewDirty()
	if err := eng.Parents(e.ctx, leavesAt(t0, 1), d); err != nil {
		t.Fatal(err)
	}
	failUpdates(1) // the hourly summaries' write
	if err := eng.Summarize(e.ctx, d); err != nil {
		t.Fatalf("Summarize after one unknown outcome: %v", err)
	}
	if msg := e.tierMismatch(project); msg != "" {
		t.Fatal(msg)
	}
	// Every hour and day written once: the recomputation found the first write applied.
	if st := eng.Stats(); st.TierWrites != 2*parents || d.Len() != 0 {
		t.Fatalf("stats %+v, %d dirty hours left", st, d.Len())
	}

	d = NewDirty()
	if err := eng.Parents(e.ctx, leavesAt(t0, 2), d); err != nil {
		t.Fatal(err)
	}
	// An outage: every update of this client fails, without being applied.
	fp := func(mode any) {
		e.store.FailPoint(t, e.client, bson.D{
			{Key: "configureFailPoint", Value: "failCommand"},
			{Key: "mode", Value: mode},
			{Key: "data", Value: bson.D{
				{Key: "failCommands", Value: bson.A{"update"}},
				{Key: "errorCode", Value: 91}, // ShutdownInProgress
				{Key: "appName", Value: "tiers-faults"},
			}},
		})
	}
	fp("alwaysOn")
	// Without a deadline: with one, the driver retries a retryable error until it (the
	// watcher's contexts have none; see package retry).
	err := eng.Summarize(context.WithoutCancel(e.ctx), d)
	if err == nil || d.Len() != int(parents) {
		t.Fatalf("Summarize in an outage: %v, %d dirty hours kept; want an error and %d", err, d.Len(), parents)
	}
	if msg := e.tierMismatch(project); msg == "" {
		t.Fatal("the summaries are current although no write went through")
	}
	fp("off")
	if err := eng.Summarize(e.ctx, d); err != nil {
		t.Fatalf("Summarize after the outage: %v", err)
	}
	if msg := e.tierMismatch(project); msg != "" {
		t.Fatal(msg)
	}
}

// TestTiersManyProjects cross-checks with naiveTiers the summaries of projects whose buckets
// share chunks (small random TierChunk): bursts mixing every project, across a UTC midnight,
// each project's tree edited at its own tick (some not at all) and one project with no tree for
// its first hour, with a TreeSource that answers for many projects at once and with one that
// does not.
func TestTiersManyProjects(t *testing.T) {
	// 1 seed (with and without batched tree lookups) covers every statement 3 did, with
	// TestTiersRandomized's 2 (the same 3,151 blocks); ROLLUP_TEST_SEEDS runs more.
	for seed := range uint64(testctx.Seeds(t, 1)) {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed%d/batch=%v", seed, batch), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 17))
				e := newEnv(t)
				midnight := baseTick().Truncate(24*time.Hour).AddDate(0, 0, -2)
				from, to := midnight.Add(-2*time.Hour), midnight.Add(2*time.Hour)
				var trees treedb.TreeSource = e.trees
				if batch {
					trees = &batchTrees{Trees: e.trees}
				}
				projects := []string{"p0", "p1", "p2", "p3", "p4", "p5"}
				type version struct {
					from time.Time
					tr   *tree.Tree
				}
				versions := map[string][]version{}
				for i, p := range projects {
					first := from.Add(-time.Hour)
					if i == 5 {
						first = from.Add(time.Hour) // no tree before: its first hour's leaves are orphans
					}
					tr, _ := e.trees.Add(t, p, first, tree.Prefixed(p, tree.Generate(p, 1+rng.IntN(2), 2, 2)))
					versions[p] = append(versions[p], version{first, tr})
					if rng.IntN(3) != 0 {
						edit := from.Add(time.Duration(rng.IntN(48)) * tick)
						tr, _ := e.trees.Add(t, p, edit, tree.Prefixed(p, tree.Generate(p, 1+rng.IntN(2), 3, 2)))
						versions[p] = append(versions[p], version{edit, tr})
					}
				}
				var all []store.Leaf
				for at := from; at.Before(to); at = at.Add(tick) {
					for _, p := range projects {
						if rng.IntN(4) == 0 {
							continue
						}
						vs := versions[p]
						tr := vs[0].tr
						for _, v := range vs[1:] {
							if !at.Before(v.from) {
								tr = v.tr
							}
						}
						for _, l := range tr.Leaves() {
							if rng.IntN(5) != 0 {
								all = append(all, store.Leaf{Project: p, ID: l.ID, Type: l.Type, Tick: at, Online: int64(rng.IntN(500)), Version: 1})
							}
						}
					}
				}
				rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
				eng := New(e.db, trees, Options{ChunkSize: 11, TierChunk: 3 + rng.IntN(30), TierWorkers: 1 + rng.IntN(3)}, nil)
				d := NewDirty()
				for len(all) > 0 {
					n := min(len(all), 1+rng.IntN(200))
					e.writeLeaves(all[:n])
					if err := eng.Parents(e.ctx, all[:n], d); err != nil {
						t.Fatal(err)
					}
					all = all[n:]
					if rng.IntN(3) == 0 || len(all) == 0 {
						if err := eng.Summarize(e.ctx, d); err != nil {
							t.Fatal(err)
						}
					}
				}
				for _, p := range projects {
					if msg := e.mismatch(p, from, to); msg != "" {
						t.Fatalf("%s: %s", p, msg)
					}
					if msg := e.tierMismatch(p); msg != "" {
						t.Fatalf("%s: %s", p, msg)
					}
				}
				if eng.Stats().TierWrites == 0 {
					t.Fatal("no summary written")
				}
			})
		}
	}
}

// TestSummariesOfManyProjects checks that the summaries of a tick of 40 projects are read in a
// fixed number of commands, not per project: per tier one find of the stored summaries and
// one of their sources, and one TreesAt question for the trees.
func TestSummariesOfManyProjects(t *testing.T) {
	e := newEnv(t)
	at := baseTick().Add(-time.Hour)
	trees := &batchTrees{Trees: e.trees}
	var leaves []store.Leaf
	var projects []string
	for i := range 40 {
		p := fmt.Sprintf("proj%02d", i)
		projects = append(projects, p)
		tr, _ := e.trees.Add(t, p, at.Add(-24*time.Hour), tree.Prefixed(p, tree.Generate(p, 2, 2, 2)))
		for j, l := range tr.Leaves() {
			leaves = append(leaves, store.Leaf{Project: p, ID: l.ID, Type: l.Type, Tick: at, Online: int64(i*10 + j), Version: 1})
		}
	}
	e.writeLeaves(leaves)
	var counting atomic.Bool
	var mu sync.Mutex
	commands := map[string]int{}
	c := e.store.Client(t, options.Client().SetMonitor(&event.CommandMonitor{Started: func(_ context.Context, ev *event.CommandStartedEvent) {
		if counting.Load() {
			mu.Lock()
			commands[ev.CommandName]++
			mu.Unlock()
		}
	}}))
	eng := New(c.Database(e.db.Name()), trees, Options{}, nil)
	d := NewDirty()
	if err := eng.Parents(e.ctx, leaves, d); err != nil {
		t.Fatal(err)
	}
	trees.single.Store(0)
	trees.batch.Store(0)
	counting.Store(true)
	if err := eng.Summarize(e.ctx, d); err != nil {
		t.Fatal(err)
	}
	counting.Store(false)
	mu.Lock()
	defer mu.Unlock()
	if commands["find"] != 4 || commands["update"] != 2 || commands["getMore"] != 0 {
		t.Errorf("commands of the summaries of %d projects: %v; want 4 finds and 2 updates", len(projects), commands)
	}
	if trees.single.Load() != 0 || trees.batch.Load() != 1 {
		t.Errorf("tree questions: %d TreeAt, %d TreesAt; want 0 and 1", trees.single.Load(), trees.batch.Load())
	}
	for _, p := range projects {
		if msg := e.tierMismatch(p); msg != "" {
			t.Fatalf("%s: %s", p, msg)
		}
	}
}
