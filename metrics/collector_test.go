package metrics

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/internal/hist"
	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/internal/testctx"
	"github.com/gameops/rollup/metrics/totals"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
	"github.com/gameops/rollup/watcher"
)

// scrape serves /metrics of reg and returns the body.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body.String())
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func wantLines(t *testing.T, body string, lines ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		have[l] = true
	}
	for _, l := range lines {
		if !have[l] {
			t.Errorf("missing series line %q", l)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}
}

// TestCollectorFakes checks every series' name, labels and value from fixed snapshots.
func TestCollectorFakes(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ops := hist.New(bulk.BatchOpsBounds()...)
	ops.Observe(2)
	ops.Observe(700)
	rec := hist.New(watcher.RecomputeBounds()...)
	rec.Observe(0.02)
	src := Sources{
		API: func() api.Stats {
			return api.Stats{Requests: map[int]int64{200: 3, 400: 1}, Rejections: map[string]int64{"invalid_item": 1},
				Items: map[string]int64{"applied": 5, "stale": 1, "rejected": 0}}
		},
		Bulk: func() bulk.Stats {
			return bulk.Stats{Batches: 2, BatchOps: ops.Snapshot(), Reissued: 4, Conflicts: 9,
				Items:     map[bulk.Outcome]int64{bulk.OutcomeApplied: 6, bulk.OutcomeStale: 1, bulk.OutcomeRejected: 0, bulk.OutcomeUnknown: 0},
				Retries:   map[store.Class]int64{store.ClassWriteConcern: 1},
				Failures:  map[store.Class]int64{store.ClassUnknownOutcome: 2},
				StoreDown: true, DownSince: now.Add(-90 * time.Second), Refused: 40, ProbesOK: 1, ProbesFailed: 12, InFlightLimit: 3}
		},
		Watcher: func() watcher.Stats {
			return watcher.Stats{Events: 10, Batches: 3, ParentWrites: 7, Conflicts: 1, Replays: 1, Orphans: 2, Invalid: 0,
				LastEventTime: now.Add(-1500 * time.Millisecond), Fenced: 0, Takeovers: 1, LeaseLosses: 0}
		},
		Progress: func() watcher.Progress {
			return watcher.Progress{Recompute: rec.Snapshot(), Streams: []watcher.StreamProgress{
				{Checkpoint: "watcher", Position: now.Add(-5 * time.Second), CheckpointSavedAt: now.Add(-2 * time.Second)},
				{Checkpoint: "watcher-p1"}, // nothing processed yet: no lag or age series
			}}
		},
		Leadership: func() []watcher.PartitionState {
			return []watcher.PartitionState{{Partition: "", ID: "watcher", Leader: true, Term: 3}, {Partition: "p1", ID: "watcher-p1"}}
		},
		Components: func() []status.State {
			return []status.State{{Component: "bulk", Ready: true, Since: now.Add(-time.Minute)},
				{Component: "watcher", Since: now.Add(-7 * time.Second), Reason: "store unreachable"}}
		},
		Now: func() time.Time { return now },
	}
	reg := NewRegistry()
	if err := Register(reg, src); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, Handler(reg))
	wantLines(t, body,
		`rollup_ingest_requests_total{status="200"} 3`,
		`rollup_ingest_requests_total{status="400"} 1`,
		`rollup_ingest_rejections_total{reason="invalid_item"} 1`,
		`rollup_ingest_items_total{status="applied"} 5`,
		`rollup_ingest_items_total{status="rejected"} 0`,
		`rollup_bulk_batches_total 2`,
		`rollup_bulk_batch_ops_bucket{le="1"} 0`,
		`rollup_bulk_batch_ops_bucket{le="2"} 1`,
		`rollup_bulk_batch_ops_bucket{le="500"} 1`,
		`rollup_bulk_batch_ops_bucket{le="1000"} 2`,
		`rollup_bulk_batch_ops_bucket{le="+Inf"} 2`,
		`rollup_bulk_batch_ops_sum 702`,
		`rollup_bulk_batch_ops_count 2`,
		`rollup_bulk_items_total{outcome="applied"} 6`,
		`rollup_bulk_items_total{outcome="unknown"} 0`,
		`rollup_bulk_reissued_ops_total 4`,
		`rollup_bulk_conflict_ops_total 9`,
		`rollup_bulk_retries_total{class="write_concern"} 1`,
		`rollup_bulk_retries_total{class="unknown_outcome"} 0`,
		`rollup_bulk_failures_total{class="unknown_outcome"} 2`,
		`rollup_bulk_store_unavailable 1`,
		`rollup_bulk_store_unavailable_seconds 90`,
		`rollup_bulk_refused_items_total 40`,
		`rollup_bulk_probes_total{result="ok"} 1`,
		`rollup_bulk_probes_total{result="failed"} 12`,
		`rollup_bulk_writes_in_flight_limit 3`,
		`rollup_watcher_events_total 10`,
		`rollup_watcher_batches_total 3`,
		`rollup_watcher_parent_writes_total 7`,
		`rollup_watcher_conflicts_total 1`,
		`rollup_watcher_history_lost_replays_total 1`,
		`rollup_watcher_orphans_total 2`,
		`rollup_watcher_invalid_total 0`,
		`rollup_watcher_lease_takeovers_total 1`,
		fmt.Sprintf(`rollup_watcher_last_event_timestamp_seconds %v`, float64(now.Add(-1500*time.Millisecond).UnixNano())/1e9),
		`rollup_watcher_recompute_seconds_bucket{le="0.01"} 0`,
		`rollup_watcher_recompute_seconds_bucket{le="0.025"} 1`,
		`rollup_watcher_recompute_seconds_count 1`,
		`rollup_watcher_lag_seconds{checkpoint="watcher"} 5`,
		`rollup_watcher_checkpoint_age_seconds{checkpoint="watcher"} 2`,
		`rollup_watcher_leader{id="watcher",partition=""} 1`,
		`rollup_watcher_leader{id="watcher-p1",partition="p1"} 0`,
		`rollup_watcher_leader_term{id="watcher",partition=""} 3`,
		`rollup_component_ready{component="bulk"} 1`,
		`rollup_component_ready{component="watcher"} 0`,
		`rollup_component_state_seconds{component="bulk"} 60`,
		`rollup_component_state_seconds{component="watcher"} 7`,
	)
	if strings.Contains(body, `checkpoint="watcher-p1"`) {
		t.Errorf("a stream without position has lag or age series")
	}
	if !strings.Contains(body, "go_goroutines") || !strings.Contains(body, "# TYPE rollup_bulk_batch_ops histogram") {
		t.Errorf("missing the runtime collector or the histogram type")
	}
}

// TestCollectorNilSources exports nothing of rollup when there is nothing to read.
func TestCollectorNilSources(t *testing.T) {
	reg := NewRegistry()
	if err := Register(reg, Sources{}); err != nil {
		t.Fatal(err)
	}
	if body := scrape(t, Handler(reg)); strings.Contains(body, "rollup_") {
		t.Fatalf("series without sources:\n%s", body)
	}
}

// staticTree is one tree for every tick.
type staticTree struct{ tr *tree.Tree }

func (s staticTree) TreeAt(context.Context, string, time.Time) (*tree.Tree, int, error) {
	return s.tr, 1, nil
}

// TestCollectorPipeline drives a real bulk writer and watcher against the embedded store and
// checks the scraped series.
func TestCollectorPipeline(t *testing.T) {
	srv := embeddedtest.Start(t)
	client := srv.Client(t)
	db := srv.Database(t, client)
	ctx := testctx.Context(t)
	counts := db.Collection(store.CountsCollection)
	if _, err := counts.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: store.FieldID, Value: 1}, {Key: store.FieldType, Value: 1}, {Key: store.FieldTimestamp, Value: 1}},
		Options: options.Index().SetUnique(true).SetName(store.CountsKeyIndex),
	}); err != nil {
		t.Fatal(err)
	}
	const project = "proj"
	tr, err := tree.Build(project, tree.Generate(project, 1, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	writer := bulk.New(counts, bulk.Options{MaxDelay: time.Millisecond}, zap.NewNop())
	w := watcher.New(db, staticTree{tr}, watcher.Options{CheckpointInterval: time.Millisecond}, zap.NewNop())
	var flag RunFlag
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- writer.Run(runCtx) }()
	go func() { done <- flag.Wrap(w.Run)(runCtx) }()
	defer func() {
		stop()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		}
	}()

	reg := NewRegistry()
	if err := Register(reg, Sources{Bulk: writer.Stats, Watcher: w.Stats, Progress: w.Progress, Leadership: w.Leadership}); err != nil {
		t.Fatal(err)
	}
	// The watcher opens its stream after Run starts: wait for its first checkpoint.
	testctx.WaitFor(t, "the first checkpoint", func() bool {
		p := w.Progress()
		return len(p.Streams) > 0 && !p.Streams[0].CheckpointSavedAt.IsZero()
	})
	tick := tree.AlignTick(time.Now().UTC(), 5*time.Minute)
	var items []bulk.Item
	for i, l := range tr.Leaves() {
		items = append(items, bulk.Item{Key: bulk.Key{ID: l.ID, Type: l.Type, Timestamp: tick}, Project: project, Online: int64(i + 1), Version: 10})
	}
	if _, err := writer.Submit(ctx, items); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Submit(ctx, items[:2]); err != nil { // resent: stale after a read of the documents
		t.Fatal(err)
	}
	testctx.WaitFor(t, "the watcher to process every leaf", func() bool { return w.Stats().Events >= int64(len(items)) })
	body := scrape(t, Handler(reg))
	wantLines(t, body,
		`rollup_bulk_batches_total 2`,
		fmt.Sprintf(`rollup_bulk_items_total{outcome="applied"} %d`, len(items)),
		`rollup_bulk_items_total{outcome="stale"} 2`,
		`rollup_bulk_conflict_ops_total 2`,
		`rollup_bulk_reissued_ops_total 0`,
		`rollup_bulk_batch_ops_count 2`,
		fmt.Sprintf(`rollup_bulk_batch_ops_sum %d`, len(items)+2),
		fmt.Sprintf(`rollup_watcher_events_total %d`, len(items)),
		`rollup_watcher_orphans_total 0`,
		`rollup_watcher_leader{id="watcher",partition=""} 1`,
	)
	// 1 root + 1 group + 2 servers are written at least once.
	if w.Stats().ParentWrites < 4 {
		t.Errorf("parent writes %d, want at least 4", w.Stats().ParentWrites)
	}
	for _, prefix := range []string{"rollup_watcher_recompute_seconds_count ", `rollup_watcher_lag_seconds{checkpoint="watcher"} `, `rollup_watcher_checkpoint_age_seconds{checkpoint="watcher"} `} {
		v, ok := value(body, prefix)
		if !ok || v < 0 || v > 60 {
			t.Errorf("%s= %v (found %v), want a small non-negative value", prefix, v, ok)
		}
	}
	if v, _ := value(body, "rollup_watcher_recompute_seconds_count "); v < 1 {
		t.Errorf("recompute count %v, want at least 1", v)
	}
	if !flag.Running() {
		t.Error("watcher flag not running")
	}
}

func value(body, prefix string) (float64, bool) {
	for _, l := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			var v float64
			_, err := fmt.Sscan(rest, &v)
			return v, err == nil
		}
	}
	return 0, false
}

// TestCollectorTotalsFakes checks the business series' names, labels and values from a fixed
// snapshot, and that nothing but the refresh counters is exported before the first refresh.
func TestCollectorTotalsFakes(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 10, 0, 0, time.UTC)
	tick := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	snap := totals.Snapshot{
		Tick: tick,
		Projects: []totals.Project{
			{Name: "a", Counts: totals.Counts{Online: 1200, Reported: 9, Expected: 10}, Groups: []totals.Group{
				{ID: "a-g1", Counts: totals.Counts{Online: 1200, Reported: 9, Expected: 9}},
				{ID: "a-g2", Counts: totals.Counts{Expected: 1}},
			}},
			{Name: "b", Counts: totals.Counts{Expected: 4}},
		},
		DroppedProjects: 3, DroppedGroups: 7, Refreshes: 5, Failures: 2,
		LastSuccess: now.Add(-20 * time.Second), LastDuration: 1500 * time.Microsecond, Stale: true, LastError: "boom",
	}
	reg := NewRegistry()
	if err := Register(reg, Sources{Totals: func() totals.Snapshot { return snap }, Now: func() time.Time { return now }}); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, Handler(reg))
	wantLines(t, body,
		`rollup_project_online{project="a"} 1200`,
		`rollup_project_leaves_reported{project="a"} 9`,
		`rollup_project_leaves_expected{project="a"} 10`,
		`rollup_project_completeness_ratio{project="a"} 0.9`,
		`rollup_project_tick_age_seconds{project="a"} 600`,
		`rollup_project_online{project="b"} 0`,
		`rollup_project_completeness_ratio{project="b"} 0`,
		`rollup_project_leaves_expected{project="b"} 4`,
		`rollup_group_online{group="a-g1",project="a"} 1200`,
		`rollup_group_completeness_ratio{group="a-g1",project="a"} 1`,
		`rollup_group_online{group="a-g2",project="a"} 0`,
		`rollup_group_leaves_reported{group="a-g2",project="a"} 0`,
		`rollup_group_leaves_expected{group="a-g2",project="a"} 1`,
		`rollup_group_completeness_ratio{group="a-g2",project="a"} 0`,
		`rollup_totals_refreshes_total{result="ok"} 5`,
		`rollup_totals_refreshes_total{result="error"} 2`,
		`rollup_totals_stale 1`,
		`rollup_totals_dropped{kind="project"} 3`,
		`rollup_totals_dropped{kind="group"} 7`,
		`rollup_totals_invalid_roots 0`,
		`rollup_totals_refresh_seconds 0.0015`,
		fmt.Sprintf(`rollup_totals_last_success_timestamp_seconds %v`, float64(now.Add(-20*time.Second).Unix())),
		fmt.Sprintf(`rollup_totals_tick_timestamp_seconds %v`, float64(tick.Unix())),
	)
	if strings.Contains(body, `rollup_group_online{group="b`) {
		t.Error("groups of a project that is not opted in")
	}

	reg = NewRegistry()
	if err := Register(reg, Sources{Totals: func() totals.Snapshot { return totals.Snapshot{Stale: true} }}); err != nil {
		t.Fatal(err)
	}
	body = scrape(t, Handler(reg))
	wantLines(t, body, `rollup_totals_stale 1`, `rollup_totals_refreshes_total{result="ok"} 0`)
	for _, name := range []string{"rollup_project_", "rollup_group_", "rollup_totals_tick_timestamp_seconds", "rollup_totals_last_success"} {
		if strings.Contains(body, "\n"+name) {
			t.Errorf("before the first refresh: %s series exported", name)
		}
	}
}

// TestCollectorTotalsPipeline writes counts through the bulk writer and the watcher (one
// project with a missing leaf, its groups exported), reads them with a totals.Reader and
// checks the scraped series; then adds projects and groups past the caps and checks the
// number of business series stays within the bound.
func TestCollectorTotalsPipeline(t *testing.T) {
	srv := embeddedtest.Start(t)
	db := srv.Database(t, srv.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := migrations.New(db, zap.NewNop()).Up(ctx, migrations.UpOptions{}); err != nil {
		t.Fatal(err)
	}
	trees := treedb.New(db)
	const project = "game"
	nodes := tree.Generate(project, 2, 1, 3) // game → g1, g2 → one server each → 3 processes
	tick := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	if _, err := trees.Import(ctx, project, nodes, tick.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	tr, err := tree.Build(project, nodes)
	if err != nil {
		t.Fatal(err)
	}
	writer := bulk.New(db.Collection(store.CountsCollection), bulk.Options{MaxDelay: time.Millisecond}, zap.NewNop())
	w := watcher.New(db, treedb.NewCache(trees), watcher.Options{CheckpointInterval: time.Millisecond}, zap.NewNop())
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- writer.Run(runCtx) }()
	go func() { done <- w.Run(runCtx) }()
	defer func() {
		stop()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		}
	}()
	var items []bulk.Item
	for i, l := range tr.Leaves() {
		if l.ID == "g02-s0001-p02" {
			continue // this agent did not report
		}
		items = append(items, bulk.Item{Key: bulk.Key{ID: l.ID, Type: l.Type, Timestamp: tick}, Project: project, Online: int64(10 * (i + 1)), Version: 1})
	}
	if _, err := writer.Submit(ctx, items); err != nil {
		t.Fatal(err)
	}
	testctx.WaitFor(t, "the watcher to roll up every leaf", func() bool { return w.Stats().Events >= int64(len(items)) })

	now := tick.Add(8 * time.Minute) // tick ended 3 minutes ago: complete with the default 2m grace
	r := totals.New(db, totals.Options{GroupProjects: []string{project}, MaxProjects: 4, MaxGroups: 3, Now: func() time.Time { return now }}, zaptest.NewLogger(t))
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry()
	if err := Register(reg, Sources{Totals: r.Snapshot, Now: func() time.Time { return now }}); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, Handler(reg))
	// Leaves 1..6 report 10·i except leaf 5 (g02's second process): 210 − 50 = 160.
	wantLines(t, body,
		`rollup_project_online{project="game"} 160`,
		`rollup_project_leaves_reported{project="game"} 5`,
		`rollup_project_leaves_expected{project="game"} 6`,
		fmt.Sprintf(`rollup_project_completeness_ratio{project="game"} %v`, 5.0/6),
		`rollup_project_tick_age_seconds{project="game"} 480`,
		`rollup_group_online{group="g01",project="game"} 60`,
		`rollup_group_completeness_ratio{group="g01",project="game"} 1`,
		`rollup_group_online{group="g02",project="game"} 100`,
		`rollup_group_leaves_reported{group="g02",project="game"} 2`,
		`rollup_group_leaves_expected{group="g02",project="game"} 3`,
		`rollup_totals_stale 0`,
		`rollup_totals_dropped{kind="project"} 0`,
	)

	// Past the caps: 7 projects of 5 groups, every project's groups asked for, at most 4
	// projects and 3 groups each exported.
	for i := range 6 {
		name := fmt.Sprintf("more%d", i)
		more := tree.Generate(name, 5, 1, 1)
		for k := range more {
			if more[k].Parent != "" {
				more[k].ID = name + "-" + more[k].ID
				if more[k].Parent != name {
					more[k].Parent = name + "-" + more[k].Parent
				}
			}
		}
		if _, err := trees.Import(ctx, name, more, tick.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	const maxProjects, maxGroups = 4, 3
	r = totals.New(db, totals.Options{GroupProjects: []string{totals.AllProjects}, MaxProjects: maxProjects, MaxGroups: maxGroups,
		Now: func() time.Time { return now }}, zaptest.NewLogger(t))
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	reg = NewRegistry()
	if err := Register(reg, Sources{Totals: r.Snapshot, Now: func() time.Time { return now }}); err != nil {
		t.Fatal(err)
	}
	body = scrape(t, Handler(reg))
	projectSeries, groupSeries := 0, 0
	projects := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		switch {
		case strings.HasPrefix(l, "rollup_project_"):
			projectSeries++
			projects[l[strings.Index(l, `project="`)+9:strings.Index(l, `"}`)]] = true
		case strings.HasPrefix(l, "rollup_group_"):
			groupSeries++
		}
	}
	// 5 series per project, 4 per group; "game" has 2 groups, the others 5 (3 exported).
	if projectSeries != 5*maxProjects || groupSeries != 4*(2+3*maxGroups) || len(projects) != maxProjects {
		t.Errorf("%d project series of %v and %d group series, want %d and %d", projectSeries, projects, groupSeries, 5*maxProjects, 4*(2+3*maxGroups))
	}
	if bound := 5*maxProjects + 4*maxProjects*maxGroups; projectSeries+groupSeries > bound {
		t.Errorf("%d business series, bound %d", projectSeries+groupSeries, bound)
	}
	wantLines(t, body, `rollup_totals_dropped{kind="project"} 3`, `rollup_totals_dropped{kind="group"} 6`)
	if !projects["game"] || !projects["more0"] || !projects["more2"] || projects["more3"] {
		t.Errorf("exported projects %v, want the first 4 by name", projects)
	}
}

// BenchmarkScrapeTotals measures a /metrics scrape with the business series of 100 projects
// (the default cap), without groups (500 series) and with 50 groups each exported (the
// default group cap, 20,500 series). A scrape reads the last snapshot only; it never queries
// the store.
//
//	go test -run '^$' -bench ScrapeTotals ./metrics/
func BenchmarkScrapeTotals(b *testing.B) {
	for _, groups := range []int{0, totals.DefaultMaxGroups} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			now := time.Now()
			snap := totals.Snapshot{Tick: now.Add(-10 * time.Minute), LastSuccess: now, Refreshes: 1}
			for i := range totals.DefaultMaxProjects {
				p := totals.Project{Name: fmt.Sprintf("project%03d", i), Counts: totals.Counts{Online: 123456, Reported: 9990, Expected: 10000}}
				for g := range groups {
					p.Groups = append(p.Groups, totals.Group{ID: fmt.Sprintf("p%03d-g%02d", i, g), Counts: totals.Counts{Online: 2469, Reported: 199, Expected: 200}})
				}
				snap.Projects = append(snap.Projects, p)
			}
			reg := NewRegistry()
			if err := Register(reg, Sources{Totals: func() totals.Snapshot { return snap }}); err != nil {
				b.Fatal(err)
			}
			h := Handler(reg)
			var size int
			b.ResetTimer()
			for range b.N {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), "bytes/scrape")
		})
	}
}

// TestCountersAtZeroFromStart: before any request or write, every counter of a known label
// set is exported at 0 (so rate() counts the first failure), and the read API's latency
// histogram has a series per route and status; a read then lands in its own series.
func TestCountersAtZeroFromStart(t *testing.T) {
	srv := api.NewServer(api.Config{Logger: zaptest.NewLogger(t)})
	reg := NewRegistry()
	if err := Register(reg, Sources{API: srv.Stats, Bulk: func() bulk.Stats { return bulk.Stats{} }}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, c := range api.IngestStatuses() {
		want = append(want, fmt.Sprintf(`rollup_ingest_requests_total{status="%d"} 0`, c))
	}
	for _, r := range api.IngestErrorCodes() {
		want = append(want, fmt.Sprintf(`rollup_ingest_rejections_total{reason="%s"} 0`, r))
	}
	for _, s := range []string{"applied", "stale", "rejected"} {
		want = append(want, fmt.Sprintf(`rollup_ingest_items_total{status="%s"} 0`, s), fmt.Sprintf(`rollup_bulk_items_total{outcome="%s"} 0`, s))
	}
	for _, c := range []string{"duplicate_key", "permanent", "write_concern", "unknown_outcome", "context"} {
		want = append(want, fmt.Sprintf(`rollup_bulk_failures_total{class="%s"} 0`, c))
	}
	for _, r := range api.ReadRoutes() {
		for _, c := range api.ReadCodes() {
			want = append(want, fmt.Sprintf(`rollup_read_request_seconds_count{code="%d",route="%s"} 0`, c, r))
		}
	}
	wantLines(t, scrape(t, Handler(reg)), want...)

	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/projects/p/series", nil)) // no token: 401
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("GET without a token: %d", rec.Code)
	}
	body := scrape(t, Handler(reg))
	wantLines(t, body, `rollup_read_request_seconds_count{code="401",route="series"} 1`, `rollup_read_request_seconds_count{code="200",route="series"} 0`,
		`rollup_read_request_seconds_bucket{code="401",route="series",le="+Inf"} 1`)
}
