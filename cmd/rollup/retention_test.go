package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/retention"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

func TestParseRetention(t *testing.T) {
	t.Setenv("ROLLUP_MONGODB_URI", "")
	const uri = "--mongodb-uri=mongodb://m"
	tests := []struct {
		args    []string
		want    string // sub project default dryRun set clear
		wantErr string
	}{
		{args: []string{"show", uri}, want: "show  false false map[] []"},
		{args: []string{"show", "--project", "p", uri}, want: "show p false false map[] []"},
		{args: []string{"set", "--default", "5m=60d", "1h=forever", uri}, want: "set  true false map[1h:forever 5m:60d] []"},
		{args: []string{"set", "--project", "p", "--dry-run", "leaves=36h", uri}, want: "set p false true map[leaves:36h0m0s] []"},
		{args: []string{"clear", "--project", "p", "5m", "1h", uri}, want: "clear p false false map[] [5m 1h]"},
		{args: []string{"clear", "--default", uri}, want: "clear  true false map[] []"},
		{args: []string{uri}, wantErr: "subcommand is required"},
		{args: []string{"purge", uri}, wantErr: `unknown subcommand "purge"`},
		{args: []string{"show", "x", uri}, wantErr: "unexpected argument"},
		{args: []string{"show", "--default", uri}, wantErr: "are for 'set' and 'clear'"},
		{args: []string{"set", "5m=60d", uri}, wantErr: "needs --project P or --default"},
		{args: []string{"set", "--project", "p", "--default", "5m=60d", uri}, wantErr: "exclude each other"},
		{args: []string{"set", "--project", "p", uri}, wantErr: "at least one TIER=PERIOD"},
		{args: []string{"set", "--project", "p", "5m", uri}, wantErr: "want TIER=PERIOD"},
		{args: []string{"set", "--project", "p", "2h=3d", uri}, wantErr: `unknown tier "2h"`},
		{args: []string{"set", "--project", "p", "5m=a month", uri}, wantErr: "tier 5m"},
		{args: []string{"clear", "--project", "p", "2h", uri}, wantErr: `unknown tier "2h"`},
		{args: []string{"set", "--project", "a b", "5m=60d", uri}, wantErr: "--project"},
		{args: []string{"show"}, wantErr: "pass --mongodb-uri"},
	}
	for _, tc := range tests {
		var out, errOut strings.Builder
		c, err := parseRetention(&env{stdout: &out, stderr: &errOut}, tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err = %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		got := fmt.Sprintf("%s %s %v %v %v %v", c.sub, c.project, c.deflt, c.dryRun, c.set, c.clear)
		if err != nil || got != tc.want {
			t.Errorf("%v: got %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
}

// TestRetentionCommand drives 'rollup retention' as an operator does: show the defaults, try
// a change with --dry-run (nothing written), set a project's override, see it in show,
// have unsafe changes refused with exit status 1 and the reason, and clear it.
func TestRetentionCommand(t *testing.T) {
	e := newOpsEnv(t, 1, 1, 2, 1)
	run := func(args ...string) (string, int) {
		t.Helper()
		out, err := e.cmd(e.ctx, nil, append([]string{"retention"}, args...)...)
		if err != nil {
			out += "\nrollup: " + err.Error()
		}
		return out, exitCode(io.Discard, err)
	}
	stored := func() int {
		n, err := e.db.Collection(retention.Collection).CountDocuments(e.ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	}

	out, code := run("show")
	wantAll(t, "show", out, "deployment default", "leaves  14d      built-in default", "1d      forever  built-in default", "no project overrides it")
	if code != 0 {
		t.Fatalf("show: exit %d", code)
	}

	// An unknown project is an error, as for verify and replay, not the defaults.
	out, code = run("show", "--project", "nosuch")
	if code != 1 || !strings.Contains(out, `unknown project "nosuch"`) {
		t.Fatalf("show --project nosuch: exit %d, want 1 naming it:\n%s", code, out)
	}

	out, code = run("set", "--default", "5m=60d", "--dry-run")
	wantAll(t, "dry run", out, "dry run: nothing written", "5m      60d      deployment default")
	if code != 0 || stored() != 0 {
		t.Fatalf("dry run: exit %d, %d documents stored", code, stored())
	}

	out, code = run("set", "--project", opsProject, "leaves=40d", "5m=60d")
	wantAll(t, "set", out, "saved", "retention of project ops", "leaves  40d      project override  none", "5m      60d      project override")
	if code != 0 || stored() != 1 {
		t.Fatalf("set: exit %d, %d stored:\n%s", code, stored(), out)
	}
	out, _ = run("show")
	wantAll(t, "show", out, "projects with overrides: 1", "  ops  leaves=40d 5m=60d")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"set", "--project", opsProject, "leaves=1d"}, "retention of project ops, tier leaves: 1d is shorter than the minimum 25h5m0s"},
		{[]string{"set", "--default", "1h=40d"}, "retention of project ops, tier 1h: 40d is shorter than the 60d kept of its sources (5m)"},
		{[]string{"clear", "--project", opsProject, "5m"}, "tier 5m: 35d is shorter than the 40d kept of its sources (leaves)"},
	} {
		out, code := run(tc.args...)
		if code != 1 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, want 1 with %q:\n%s", tc.args, code, tc.want, out)
		}
	}
	if out, _ := run("show", "--project", opsProject); !strings.Contains(out, "leaves  40d") {
		t.Errorf("a refused change was stored:\n%s", out)
	}

	out, code = run("clear", "--project", opsProject)
	wantAll(t, "clear", out, "saved", "leaves  14d      built-in default")
	if code != 0 || stored() != 0 {
		t.Fatalf("clear: exit %d, %d stored", code, stored())
	}
}

// TestReplayRefusedAfterRetention: retention deletes a project's old leaves (the enforcer's
// pass, at the real clock: the test's ticks are long expired); 'rollup replay' over the window
// then exits 1 naming the horizon and writes nothing, 'rollup verify' checks the parents
// without the leaves and finds nothing wrong, and 'rollup retention show' shows the horizon.
// The project keeps its 5-minute parents and hourly summaries (an override: the replay built
// the summaries, and the ticks are old enough for the defaults to expire them too).
func TestReplayRefusedAfterRetention(t *testing.T) {
	e := newOpsEnv(t, 2, 2, 3, 3)
	e.replay("--progress", "none")
	e.mustVerify()
	if _, err := store.NewHorizons(e.db).Get(e.ctx, opsProject); err != nil {
		t.Fatal(err)
	}
	if err := retention.NewStore(e.db).Save(e.ctx, retention.DefaultScope, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Collection(store.ProjectsCollection).InsertOne(e.ctx, bson.D{{Key: "_id", Value: opsProject}}); err != nil {
		t.Fatal(err)
	}
	if out, err := e.cmd(e.ctx, nil, "retention", "set", "--project", opsProject, "5m=forever", "1h=forever"); err != nil {
		t.Fatalf("retention set: %v\n%s", err, out)
	}
	rep, err := retention.New(e.db, retention.Options{}, zaptest.NewLogger(t)).Pass(e.ctx)
	if err != nil || rep.Deleted[store.TierLeaves] == 0 || rep.Deleted[store.Tier5m] != 0 || rep.Deleted[store.Tier1h] != 0 {
		t.Fatalf("retention pass: %+v, %v", rep, err)
	}
	hz, _ := store.NewHorizons(e.db).Get(e.ctx, opsProject)
	before := e.snapshot()

	out, err := e.cmd(e.ctx, nil, append([]string{"replay", "--progress", "none"}, e.window()...)...)
	if code := exitCode(io.Discard, err); code != 1 || err == nil {
		t.Fatalf("replay past the horizon: exit %d, %v\n%s", code, err, out)
	}
	wantAll(t, "replay", out+err.Error(), "refused project ops", "refusing to rebuild the 5m tier of project ops",
		"the leaves, whose documents before "+hz.Leaves.Format(time.RFC3339), "nothing was written", "whole window is before the horizon")
	if strings.Contains(out, "resume:") {
		t.Errorf("a refused replay offers to resume:\n%s", out)
	}
	if after := e.snapshot(); !slices.Equal(before, after) {
		t.Fatal("the refused replay wrote")
	}
	out, code := e.verify()
	wantAll(t, "verify", out, "0 ticks checked against their leaves; 3 ticks before the leaves' horizon checked without them", "no violations")
	if code != 0 {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}
	out, _ = e.cmd(e.ctx, nil, "retention", "show", "--project", opsProject)
	wantAll(t, "show", out, "leaves  14d      built-in default  "+hz.Leaves.Format(time.RFC3339), "5m      forever")
	if !hz.Leaves.After(e.ticks[len(e.ticks)-1].Add(tree.DefaultTick)) {
		t.Errorf("horizon %s is not after the window", hz.Leaves)
	}
}

// TestServeEnforcesRetention runs two serve instances in process over a store holding the
// old leaves of two projects, one of which keeps everything by an override set with 'rollup
// retention set', and checks from outside that retention deletes the other's leaves on its
// own: its leaves go, its 5-minute parents stay (kept by its own override), the overridden
// project loses nothing, exactly one instance holds the retention lease and deletes (the
// other's /metrics count nothing deleted), and /readyz lists the retention component ready.
func TestServeEnforcesRetention(t *testing.T) {
	e := newOpsEnv(t, 2, 2, 3, 3)
	e.replay("--progress", "none")
	const keeper = "keeper"
	var keeperDocs []any
	for i, at := range e.ticks {
		for j := range 4 {
			keeperDocs = append(keeperDocs, bson.D{{Key: "id", Value: fmt.Sprintf("keeper-p%d", j)}, {Key: "type", Value: "process"},
				{Key: "timestamp", Value: at}, {Key: "project", Value: keeper}, {Key: "online", Value: int64(i + j)},
				{Key: "version", Value: int64(1)}, {Key: "written_at", Value: at}})
		}
	}
	if _, err := e.counts.InsertMany(e.ctx, keeperDocs); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{opsProject, keeper} {
		if _, err := e.db.Collection(store.ProjectsCollection).InsertOne(e.ctx, bson.D{{Key: "_id", Value: p}}); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := e.cmd(e.ctx, nil, "retention", "set", "--project", keeper, "leaves=forever", "5m=forever", "1h=forever"); err != nil {
		t.Fatalf("retention set: %v\n%s", err, out)
	}
	if out, err := e.cmd(e.ctx, nil, "retention", "set", "--project", opsProject, "5m=forever", "1h=forever"); err != nil {
		t.Fatalf("retention set: %v\n%s", err, out)
	}
	leaves := func(project string) int64 {
		n, err := e.counts.CountDocuments(e.ctx, bson.D{{Key: "project", Value: project}, {Key: "rollup", Value: bson.D{{Key: "$ne", Value: true}}}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	stored := leaves(opsProject)
	parents := len(e.snapshot()) - int(stored) - len(keeperDocs)
	serve := func(id string) *inProcess {
		return serveInProcess(t, "--mongodb-uri", e.uri, "--database", e.db.Name(), "--listen", "127.0.0.1:0",
			"--instance-id", id, "--retention-interval", "1s", "--totals-max-projects", "0")
	}
	instances := []*inProcess{serve("retention-one"), serve("retention-two")}
	waitUntil(t, 60*time.Second, "the old leaves deleted", func() bool { return leaves(opsProject) == 0 })
	if got := len(e.snapshot()); got != parents+len(keeperDocs) {
		t.Errorf("%d documents left, want the %d parents and the %d leaves of %s", got, parents, len(keeperDocs), keeper)
	}
	if n := leaves(keeper); n != int64(len(keeperDocs)) {
		t.Errorf("project %s kept %d of its %d leaves", keeper, n, len(keeperDocs))
	}
	var leader, standby *inProcess
	waitUntil(t, 30*time.Second, "one leader, ready and counted", func() bool {
		leader, standby = nil, nil
		for _, s := range instances {
			code, rd := readyz(s.url)
			ready := false
			for _, c := range rd.Components {
				ready = ready || c.Component == "retention" && c.Ready
			}
			if code != 200 || !ready {
				return false
			}
			switch m := metricsText(s.url); {
			case strings.Contains(m, "rollup_retention_leader 1") &&
				strings.Contains(m, fmt.Sprintf(`rollup_retention_deleted_total{tier="leaves"} %d`, stored)):
				leader = s
			case strings.Contains(m, "rollup_retention_leader 0"):
				standby = s
			}
		}
		return leader != nil && standby != nil
	})
	m := metricsText(standby.url)
	if !strings.Contains(m, `rollup_retention_deleted_total{tier="leaves"} 0`) || !strings.Contains(m, "rollup_retention_passes_total 0") {
		t.Errorf("the standby instance enforced retention too:\n%s", grepLines(m, "rollup_retention_"))
	}
}
