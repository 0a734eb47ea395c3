package api_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/rollup"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
)

// Fixed ticks of the read fixture.
var (
	tickFull   = rt0.Add(10 * time.Hour)        // every leaf but one, an orphan, a tie
	tickEmpty  = rt0.Add(11 * time.Hour)        // nothing reported
	tickV2     = rt0.Add(30 * time.Hour)        // tree version 2
	tickLagged = rt0.Add(48*time.Hour - rtick)  // leaves only: the watcher is behind
	v2From     = rt0.Add(24 * time.Hour)        // version 2 (adds g03) is effective
	readEnd    = rt0.Add(48 * time.Hour)        // end of the fixture's data
	missingLf  = "g02-s0002-p02"                // not reported at tickFull
	readPath   = apiv1.ProjectsPath + "/proj-r" // the fixture project's read paths
	v2Extra    = []tree.Node{{ID: "g03", Type: tree.TypeGroup, Parent: "proj-r"}, {ID: "g03-p", Type: tree.TypeProcess, Parent: "g03"}}
	allWindow  = url.Values{"from": {rt0.Format(time.RFC3339)}, "to": {readEnd.Format(time.RFC3339)}}
	tickValues = func(t time.Time) url.Values { return url.Values{"tick": {t.Format(time.RFC3339)}} }
)

// readFixture is project proj-r over two days: tree version 1 (2 groups × 2 servers × 2
// processes) from rt0 and version 2 (plus g03 with one leaf) from rt0+24h; random counts with
// missing leaves (incomplete ticks), whole missing ticks (gaps) and an orphan leaf.
type readFixture struct {
	*readStack
	w                *world
	tokIngest, tokRd string
	tokOther         string
}

func newReadFixture(t *testing.T) *readFixture {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("ROLLUP_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("ROLLUP_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	s := newReadStack(t, zaptest.NewLogger(t))
	f := &readFixture{readStack: s, w: newWorld("proj-r")}
	v1 := tree.Generate("proj-r", 2, 2, 2)
	f.w.importTree(t, s, v1, rt0)
	f.w.importTree(t, s, append(v1, v2Extra...), v2From)
	other := newWorld("proj-o")
	other.importTree(t, s, []tree.Node{{ID: "o-root", Type: tree.TypeProject}, {ID: "o-leaf", Type: tree.TypeProcess, Parent: "o-root"}}, rt0)
	other.set(tickFull, "o-leaf", 99)
	other.write(t, s)

	for tk := rt0; tk.Before(readEnd); tk = tk.Add(rtick) {
		if rng.IntN(20) == 0 {
			continue // a gap
		}
		for _, leaf := range f.w.at(tk).tree.Leaves() {
			if rng.IntN(10) > 0 {
				f.w.set(tk, leaf.ID, int64(rng.IntN(50)))
			}
		}
		if rng.IntN(10) == 0 {
			f.w.set(tk, "stray-2", 3) // an orphan
		}
	}
	// tickFull: every leaf but missingLf, a tie between g01-s0001's leaves, an orphan.
	delete(f.w.leaves, tickFull)
	for i, leaf := range f.w.at(tickFull).tree.Leaves() {
		if leaf.ID != missingLf {
			f.w.set(tickFull, leaf.ID, int64(10+i))
		}
	}
	f.w.set(tickFull, "g01-s0001-p01", 5)
	f.w.set(tickFull, "g01-s0001-p02", 5)
	f.w.set(tickFull, "stray-1", 7)
	delete(f.w.leaves, tickEmpty)
	f.w.set(tickV2, "g03-p", 4)
	f.w.set(tickLagged, "g01-s0001-p01", 1)
	f.w.noParents[tickLagged] = true
	f.w.write(t, s)
	// A parent document of a node not in the tree (left by an older version) is no orphan.
	stale := rollup.Parent{ID: "g-old", Type: tree.TypeGroup, Project: "proj-r", Timestamp: tickFull, Online: 9, Rev: 1,
		Reported: 1, Expected: 1, TreeVersion: 1, Children: map[string]rollup.ChildState{}}
	if _, err := s.db.Collection(store.CountsCollection).UpdateOne(s.ctx, bson.D{{Key: "id", Value: "g-old"}},
		store.ParentUpdate(stale, tickFull), options.UpdateOne().SetUpsert(true)); err != nil {
		t.Fatal(err)
	}

	f.tokIngest = s.token(t, "proj-r", false)
	f.tokRd = s.token(t, "proj-r", true)
	f.tokOther = s.token(t, "proj-o", false)
	return f
}

// TestRead runs the read API's tests on one fixture (they only read it, or add their own
// projects).
func TestRead(t *testing.T) {
	f := newReadFixture(t)
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *readFixture)
	}{
		{"tree", testReadTree}, {"series", testReadSeries}, {"top", testReadTop},
		{"ticks", testReadTicks}, {"errors", testReadErrors}, {"auth", testReadAuth},
		{"step in progress", testReadStepInProgress}, {"routes", testReadRoutes},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, f) })
	}
}

// hasDoc reports whether node has a document at t in the fixture.
func (f *readFixture) hasDoc(t time.Time, node string) bool {
	v := f.w.at(t)
	if v == nil || !v.tree.Has(node) {
		return false
	}
	if v.tree.IsLeaf(node) {
		_, ok := f.w.leaves[t][node]
		return ok
	}
	_, reported, _ := f.w.total(t, node)
	return reported > 0 && !f.w.noParents[t]
}

func testReadTree(t *testing.T, f *readFixture) {

	var got apiv1.TreeResponse
	f.getOK(t, f.tokRd, readPath+apiv1.TreePath, tickValues(tickFull.Add(2*time.Minute)), &got)
	if got.Project != "proj-r" || !got.Tick.Equal(tickFull) || got.TreeVersion != 1 || got.Root != "proj-r" {
		t.Fatalf("tree header = %+v", got)
	}
	// Breadth-first from the root, children in tree order.
	wantOrder := []string{"proj-r", "g01", "g02", "g01-s0001", "g01-s0002", "g02-s0001", "g02-s0002",
		"g01-s0001-p01", "g01-s0001-p02", "g01-s0002-p01", "g01-s0002-p02", "g02-s0001-p01", "g02-s0001-p02", "g02-s0002-p01", "g02-s0002-p02"}
	var order []string
	for _, n := range got.Nodes {
		order = append(order, n.ID)
	}
	if !slices.Equal(order, wantOrder) {
		t.Fatalf("node order = %v", order)
	}
	if r := got.Nodes[0]; r.Parent != "" || !slices.Equal(r.Children, []string{"g01", "g02"}) || r.Type != tree.TypeProject {
		t.Fatalf("root = %+v", r)
	}
	if l := got.Nodes[len(got.Nodes)-1]; l.ID != missingLf || l.Online != 0 || l.Reported != 0 || l.Expected != 1 ||
		l.Children == nil || len(l.Children) != 0 || l.Parent != "g02-s0002" {
		t.Fatalf("missing leaf = %+v", l)
	}
	checkTree(t, f, got, tickFull)
	if want := []apiv1.Orphan{{ID: "stray-1", Type: tree.TypeProcess, Online: 7}}; !slices.Equal(got.Orphans, want) {
		t.Fatalf("orphans = %+v, want %+v", got.Orphans, want)
	}

	// The tick table: nothing reported, version 2, the default tick, the leaves-only tick.
	latest := time.Time{}
	for tk := range f.w.leaves {
		if f.hasDoc(tk, "proj-r") && tk.After(latest) {
			latest = tk
		}
	}
	for _, tc := range []struct {
		name    string
		q       url.Values
		tick    time.Time
		version int
	}{
		{"nothing reported", tickValues(tickEmpty), tickEmpty, 1},
		{"version 2", tickValues(tickV2), tickV2, 2},
		{"default: latest tick with a root document", nil, latest, 2},
		{"leaves without parents", tickValues(tickLagged), tickLagged, 2},
		{"first tick", tickValues(rt0), rt0, 1},
	} {
		var got apiv1.TreeResponse
		f.getOK(t, f.tokIngest, readPath+apiv1.TreePath, tc.q, &got)
		if !got.Tick.Equal(tc.tick) || got.TreeVersion != tc.version {
			t.Errorf("%s: tick %s version %d, want %s %d", tc.name, got.Tick, got.TreeVersion, tc.tick, tc.version)
			continue
		}
		checkTree(t, f, got, tc.tick)
	}
}

// checkTree compares every node of got with the naive totals of the fixture at tk (parents
// without a document show 0 of their leaves).
func checkTree(t *testing.T, f *readFixture, got apiv1.TreeResponse, tk time.Time) {
	t.Helper()
	v := f.w.at(tk)
	if len(got.Nodes) != v.tree.Len() {
		t.Fatalf("%s: %d nodes, want %d", tk, len(got.Nodes), v.tree.Len())
	}
	for _, n := range got.Nodes {
		online, reported, expected := f.w.total(tk, n.ID)
		if !f.hasDoc(tk, n.ID) {
			online, reported = 0, 0
		}
		nd, _ := v.tree.Node(n.ID)
		var children []string
		for _, c := range v.tree.Children(n.ID) {
			children = append(children, c.ID)
		}
		if n.Online != online || n.Reported != reported || n.Expected != expected || n.Type != nd.Type ||
			n.Parent != nd.Parent || !slices.Equal(n.Children, children) {
			t.Errorf("%s: node %+v, want online %d reported %d expected %d children %v", tk, n, online, reported, expected, children)
		}
	}
	var orphans []apiv1.Orphan
	for id, online := range f.w.leaves[tk] {
		if !v.tree.Has(id) {
			orphans = append(orphans, apiv1.Orphan{ID: id, Type: tree.TypeProcess, Online: online})
		}
	}
	slices.SortFunc(orphans, func(a, b apiv1.Orphan) int { return strings.Compare(a.ID, b.ID) })
	if len(orphans) != len(got.Orphans) || (len(orphans) > 0 && !slices.Equal(orphans, got.Orphans)) {
		t.Errorf("%s: orphans %+v, want %+v", tk, got.Orphans, orphans)
	}
}

// testReadSeries cross-checks every step and aggregation against a naive computation from
// the fixture's leaves, for the root, a group, a leaf and a node only in version 2.
func testReadSeries(t *testing.T, f *readFixture) {
	steps := map[string]time.Duration{apiv1.Step5m: rtick, apiv1.Step1h: time.Hour, apiv1.Step1d: 24 * time.Hour}
	for _, node := range []string{"proj-r", "g01", "g02-s0001-p01", "g03"} {
		for _, step := range []string{apiv1.Step5m, apiv1.Step1h, apiv1.Step1d} {
			for _, agg := range []string{apiv1.AggMax, apiv1.AggMin, apiv1.AggMean, apiv1.AggLast} {
				// The window ends 3 hours after the server's clock (readNow): those ticks
				// have not started and expect nothing.
				end := readEnd.Add(3 * time.Hour)
				q := url.Values{"node": {node}, "step": {step}, "agg": {agg},
					"from": {rt0.Add(-time.Hour).Format(time.RFC3339)}, "to": {end.Format(time.RFC3339)}}
				var got apiv1.SeriesResponse
				f.getOK(t, f.tokRd, readPath+apiv1.SeriesPath, q, &got)
				// The API widens from and to to whole steps.
				want := naiveSeries(f, node, tree.AlignTick(rt0.Add(-time.Hour), steps[step]), alignUp(end, steps[step]), steps[step], agg)
				// A parent's or root's 1h and 1d points come from its summaries; a leaf has
				// none.
				tier := step
				if node == "g02-s0001-p01" {
					tier = apiv1.Step5m
				}
				if got.Node != node || got.Step != step || got.Agg != agg || got.Type != f.w.versions[1].typeOf(node) || got.Tier != tier {
					t.Fatalf("%s %s %s: header %+v", node, step, agg, got)
				}
				if len(got.Points) != len(want) {
					t.Fatalf("%s %s %s: %d points, want %d", node, step, agg, len(got.Points), len(want))
				}
				for i := range want {
					if !pointEqual(got.Points[i], want[i]) {
						t.Fatalf("%s %s %s: point %d = %s, want %s", node, step, agg, i, fmtPoint(got.Points[i]), fmtPoint(want[i]))
					}
				}
			}
		}
	}

	// Shapes the cross-check relies on are present: gaps, incomplete and complete ticks.
	var got apiv1.SeriesResponse
	f.getOK(t, f.tokRd, readPath+apiv1.SeriesPath, url.Values{"node": {"proj-r"}, "from": {tickFull.Format(time.RFC3339)},
		"to": {tickEmpty.Add(rtick).Format(time.RFC3339)}}, &got)
	first, last := got.Points[0], got.Points[len(got.Points)-1]
	if len(got.Points) != 13 || got.Step != apiv1.Step5m || got.Agg != apiv1.AggMax || first.Online == nil || first.Reported != 7 ||
		first.Expected != 8 || first.Complete || last.Online != nil || last.Reported != 0 || last.Expected != 8 || last.Complete {
		t.Fatalf("tickFull..tickEmpty = %+v", got)
	}
	// A node only in version 2 is a gap expecting nothing before it.
	f.getOK(t, f.tokRd, readPath+apiv1.SeriesPath, url.Values{"node": {"g03"}, "from": {tickV2.Add(-25 * time.Hour).Format(time.RFC3339)},
		"to": {tickV2.Add(rtick).Format(time.RFC3339)}}, &got)
	if p := got.Points[0]; p.Online != nil || p.Expected != 0 || p.Complete {
		t.Fatalf("g03 before version 2: %s", fmtPoint(p))
	}
	if p := got.Points[len(got.Points)-1]; p.Online == nil || *p.Online != 4 || p.Expected != 1 || !p.Complete {
		t.Fatalf("g03 at tickV2: %s", fmtPoint(p))
	}
	// Unaligned bounds widen to whole steps; the default window ends with the current step.
	f.getOK(t, f.tokRd, readPath+apiv1.SeriesPath, url.Values{"node": {"proj-r"}, "step": {"1h"},
		"from": {rt0.Add(90 * time.Minute).Format(time.RFC3339)}, "to": {rt0.Add(150 * time.Minute).Format(time.RFC3339)}}, &got)
	if len(got.Points) != 2 || !got.Points[0].T.Equal(rt0.Add(time.Hour)) || !got.Points[1].T.Equal(rt0.Add(2*time.Hour)) {
		t.Fatalf("unaligned window: %+v", got.Points)
	}
	f.getOK(t, f.tokRd, readPath+apiv1.SeriesPath, url.Values{"node": {"proj-r"}}, &got)
	if len(got.Points) != 288 || !got.Points[287].T.Equal(tree.AlignTick(readNow, rtick)) {
		t.Fatalf("default window: %d points, last %s", len(got.Points), got.Points[len(got.Points)-1].T)
	}
}

func alignUp(t time.Time, step time.Duration) time.Time {
	if a := tree.AlignTick(t, step); !a.Equal(t) {
		return a.Add(step)
	}
	return t
}

func (v worldVersion) typeOf(id string) string {
	nd, _ := v.tree.Node(id)
	return nd.Type
}

// naiveSeries computes the series of node from the fixture's leaves, one step at a time.
func naiveSeries(f *readFixture, node string, from, to time.Time, step time.Duration, agg string) []apiv1.SeriesPoint {
	var out []apiv1.SeriesPoint
	for b := from; b.Before(to); b = b.Add(step) {
		p := apiv1.SeriesPoint{T: b, Complete: true, Ticks: int(step / rtick), ClosesAt: b.Add(step), Open: b.Add(step).After(readNow)}
		var vals []int64
		for tk := b; tk.Before(b.Add(step)); tk = tk.Add(rtick) {
			online, reported, expected := f.w.total(tk, node)
			started := !tk.After(tree.AlignTick(readNow, rtick))
			if started { // a tick not started yet expects nothing
				p.Expected += expected
			}
			if !f.hasDoc(tk, node) {
				p.Complete = false
				if started {
					p.TicksDue++
				}
				continue
			}
			p.TicksDue++
			if reported == expected {
				p.TicksComplete++
			}
			p.Reported += reported
			p.Complete = p.Complete && reported == expected
			vals = append(vals, online)
		}
		if len(vals) > 0 {
			var v float64
			switch agg {
			case apiv1.AggMax:
				v = float64(slices.Max(vals))
			case apiv1.AggMin:
				v = float64(slices.Min(vals))
			case apiv1.AggLast:
				v = float64(vals[len(vals)-1])
			case apiv1.AggMean:
				var sum int64
				for _, x := range vals {
					sum += x
				}
				v = float64(sum) / float64(len(vals))
			}
			p.Online = &v
		}
		out = append(out, p)
	}
	return out
}

func pointEqual(a, b apiv1.SeriesPoint) bool {
	if (a.Online == nil) != (b.Online == nil) || (a.Online != nil && *a.Online != *b.Online) {
		return false
	}
	if a.Open != b.Open || !a.ClosesAt.Equal(b.ClosesAt) {
		return false
	}
	return a.T.Equal(b.T) && a.Reported == b.Reported && a.Expected == b.Expected && a.Complete == b.Complete &&
		a.Ticks == b.Ticks && a.TicksDue == b.TicksDue && a.TicksComplete == b.TicksComplete
}

func fmtPoint(p apiv1.SeriesPoint) string {
	online := "null"
	if p.Online != nil {
		online = strconv.FormatFloat(*p.Online, 'g', -1, 64)
	}
	return fmt.Sprintf("{%s online %s reported %d expected %d complete %v ticks %d/%d/%d open %v}", p.T.Format(time.RFC3339), online,
		p.Reported, p.Expected, p.Complete, p.TicksComplete, p.TicksDue, p.Ticks, p.Open)
}

func testReadTop(t *testing.T, f *readFixture) {
	at := tickFull.Format(time.RFC3339)
	for _, tc := range []struct {
		name string
		q    url.Values
		want []apiv1.TopChild
	}{
		{"root", url.Values{"node": {"proj-r"}, "tick": {at}}, []apiv1.TopChild{
			{ID: "g02", Type: tree.TypeGroup, Online: 14 + 15 + 16, Reported: 3, Expected: 4},
			{ID: "g01", Type: tree.TypeGroup, Online: 5 + 5 + 12 + 13, Reported: 4, Expected: 4},
		}},
		{"tie by id, n", url.Values{"node": {"g01-s0001"}, "tick": {at}, "n": {"1"}}, []apiv1.TopChild{
			{ID: "g01-s0001-p01", Type: tree.TypeProcess, Online: 5, Reported: 1, Expected: 1},
		}},
		{"missing child counts 0", url.Values{"node": {"g02-s0002"}, "tick": {at}}, []apiv1.TopChild{
			{ID: "g02-s0002-p01", Type: tree.TypeProcess, Online: 16, Reported: 1, Expected: 1},
			{ID: "g02-s0002-p02", Type: tree.TypeProcess, Online: 0, Reported: 0, Expected: 1},
		}},
		{"no document: all 0", url.Values{"node": {"proj-r"}, "tick": {tickEmpty.Format(time.RFC3339)}}, []apiv1.TopChild{
			{ID: "g01", Type: tree.TypeGroup, Expected: 4}, {ID: "g02", Type: tree.TypeGroup, Expected: 4},
		}},
		{"leaf", url.Values{"node": {"g01-s0001-p01"}, "tick": {at}}, []apiv1.TopChild{}},
		{"version 2", url.Values{"node": {"g03"}, "tick": {tickV2.Format(time.RFC3339)}}, []apiv1.TopChild{
			{ID: "g03-p", Type: tree.TypeProcess, Online: 4, Reported: 1, Expected: 1},
		}},
	} {
		var got apiv1.TopResponse
		f.getOK(t, f.tokRd, readPath+apiv1.TopPath, tc.q, &got)
		if got.Node != tc.q.Get("node") || got.Tick.Format(time.RFC3339) != tc.q.Get("tick") || !slices.Equal(got.Children, tc.want) {
			t.Errorf("%s: %+v, want children %+v", tc.name, got, tc.want)
		}
	}
	// The root's children agree with the tree endpoint at the same tick.
	var tr apiv1.TreeResponse
	f.getOK(t, f.tokRd, readPath+apiv1.TreePath, tickValues(tickFull), &tr)
	if tr.Nodes[1].Online != 35 || tr.Nodes[2].Online != 45 {
		t.Fatalf("tree's groups = %+v %+v", tr.Nodes[1], tr.Nodes[2])
	}
	// Default tick: the latest with a root document.
	var got apiv1.TopResponse
	f.getOK(t, f.tokRd, readPath+apiv1.TopPath, url.Values{"node": {"proj-r"}}, &got)
	if len(got.Children) != 3 || got.Tick.After(tickLagged) || !got.Tick.After(tickV2) {
		t.Fatalf("default tick: %+v", got)
	}
}

func testReadTicks(t *testing.T, f *readFixture) {
	var got []apiv1.TickSummary
	f.getOK(t, f.tokRd, readPath+apiv1.TicksPath, allWindow, &got)
	var want []apiv1.TickSummary
	for tk := rt0; tk.Before(readEnd); tk = tk.Add(rtick) {
		if f.hasDoc(tk, "proj-r") {
			online, reported, expected := f.w.total(tk, "proj-r")
			want = append(want, apiv1.TickSummary{Tick: tk, Online: online, Reported: reported, Expected: expected})
		}
	}
	if len(want) < 400 || !slices.EqualFunc(got, want, func(a, b apiv1.TickSummary) bool {
		return a.Tick.Equal(b.Tick) && a.Online == b.Online && a.Reported == b.Reported && a.Expected == b.Expected
	}) {
		t.Fatalf("ticks: got %d, want %d\n%+v\n%+v", len(got), len(want), got, want)
	}
	// Default window: the last 24 hours up to the current tick.
	f.getOK(t, f.tokRd, readPath+apiv1.TicksPath, nil, &got)
	if len(got) == 0 || got[0].Tick.Before(readEnd.Add(-24*time.Hour)) || got[len(got)-1].Tick.After(tickLagged) {
		t.Fatalf("default window: %+v", got)
	}
	// An empty window answers [] (not null).
	status, body := f.get(t, f.tokRd, readPath+apiv1.TicksPath, url.Values{"from": {"2020-01-01T00:00:00Z"}, "to": {"2020-01-01T01:00:00Z"}})
	if status != http.StatusOK || !bytes.Equal(bytes.TrimSpace(body), []byte("[]")) {
		t.Fatalf("empty window = %d %s", status, body)
	}
}

func testReadErrors(t *testing.T, f *readFixture) {
	series, tr, top, ticks := readPath+apiv1.SeriesPath, readPath+apiv1.TreePath, readPath+apiv1.TopPath, readPath+apiv1.TicksPath
	day := func(d int) string { return rt0.Add(time.Duration(d) * 24 * time.Hour).Format(time.RFC3339) }
	for _, tc := range []struct {
		path   string
		q      url.Values
		status int
		code   string
		field  string
	}{
		{series, url.Values{}, 400, apiv1.ErrInvalidParameter, "node"},
		{series, url.Values{"node": {"bad id!"}}, 400, apiv1.ErrInvalidParameter, "node"},
		{series, url.Values{"node": {"proj-r"}, "step": {"2h"}}, 400, apiv1.ErrInvalidParameter, "step"},
		{series, url.Values{"node": {"proj-r"}, "agg": {"sum"}}, 400, apiv1.ErrInvalidParameter, "agg"},
		{series, url.Values{"node": {"proj-r"}, "from": {"yesterday"}}, 400, apiv1.ErrInvalidParameter, "from"},
		{series, url.Values{"node": {"proj-r"}, "to": {"1900-01-01T00:00:00Z"}}, 400, apiv1.ErrInvalidParameter, "to"},
		{series, url.Values{"node": {"proj-r"}, "from": {day(2)}, "to": {day(1)}}, 400, apiv1.ErrInvalidParameter, "from"},
		{series, url.Values{"node": {"proj-r"}, "from": {day(0)}, "to": {day(35)}}, 400, apiv1.ErrInvalidParameter, "from"},
		{series, url.Values{"node": {"proj-r"}, "from": {day(0)}, "to": {day(34)}, "step": {"5m"}}, 200, "", ""},
		{series, url.Values{"node": {"proj-r"}, "from": {day(0)}, "to": {day(732)}, "step": {"1d"}}, 400, apiv1.ErrInvalidParameter, "from"},
		{series, url.Values{"node": {"proj-r"}, "from": {day(0)}, "to": {day(731)}, "step": {"1d"}}, 200, "", ""},
		{series, url.Values{"node": {"proj-r"}, "agg": {"median"}}, 400, apiv1.ErrInvalidParameter, "agg"},
		{series, url.Values{"node": {"proj-r"}, "steps": {"1h"}}, 400, apiv1.ErrInvalidParameter, "steps"},
		{series, url.Values{"node": {"proj-r", "g01"}}, 400, apiv1.ErrInvalidParameter, "node"},
		{series, url.Values{"node": {"nope"}, "from": {day(0)}, "to": {day(2)}}, 404, apiv1.ErrUnknownNode, "node"},
		{series, url.Values{"node": {"o-root"}, "from": {day(0)}, "to": {day(2)}}, 404, apiv1.ErrUnknownNode, "node"},
		{series, url.Values{"node": {"g03"}, "from": {day(0)}, "to": {day(1)}}, 404, apiv1.ErrUnknownNode, "node"},
		{tr, url.Values{"tick": {rt0.Add(-rtick).Format(time.RFC3339)}}, 404, apiv1.ErrNoData, "tick"},
		{tr, url.Values{"tick": {"2024-05-01"}}, 400, apiv1.ErrInvalidParameter, "tick"},
		{tr, url.Values{"node": {"proj-r"}}, 400, apiv1.ErrInvalidParameter, "node"},
		{top, url.Values{"node": {"nope"}}, 404, apiv1.ErrUnknownNode, "node"},
		{top, url.Values{"node": {"g03"}, "tick": {tickFull.Format(time.RFC3339)}}, 404, apiv1.ErrUnknownNode, "node"},
		{top, url.Values{"node": {"proj-r"}, "n": {"0"}}, 400, apiv1.ErrInvalidParameter, "n"},
		{top, url.Values{"node": {"proj-r"}, "n": {"1001"}}, 400, apiv1.ErrInvalidParameter, "n"},
		{top, url.Values{"node": {"proj-r"}, "n": {"x"}}, 400, apiv1.ErrInvalidParameter, "n"},
		{top, url.Values{"node": {"proj-r"}, "n": {"+3"}}, 400, apiv1.ErrInvalidParameter, "n"},
		{top, url.Values{"node": {"proj-r"}, "n": {"03"}}, 400, apiv1.ErrInvalidParameter, "n"},
		{top, url.Values{"node": {"proj-r"}, "tick": {readNow.Add(24 * time.Hour).Format(time.RFC3339)}}, 400, apiv1.ErrInvalidParameter, "tick"},
		{tr, url.Values{"tick": {readNow.Add(24 * time.Hour).Format(time.RFC3339)}}, 400, apiv1.ErrInvalidParameter, "tick"},
		{tr, url.Values{"tick": {readEnd.Add(2 * rtick).Format(time.RFC3339)}}, 400, apiv1.ErrInvalidParameter, "tick"},
		{tr, url.Values{"tick": {"2024-05-01T10:00:00,5Z"}}, 400, apiv1.ErrInvalidParameter, "tick"},
		{series, url.Values{"node": {"proj-r"}, "from": {"2024-05-01 10:00:00Z"}}, 400, apiv1.ErrInvalidParameter, "from"},
		{ticks, url.Values{"from": {day(0)}, "to": {day(35)}}, 400, apiv1.ErrInvalidParameter, "from"},
		{apiv1.ProjectsPath, url.Values{"x": {"1"}}, 400, apiv1.ErrInvalidParameter, "x"},
	} {
		if tc.status == 200 {
			var got apiv1.SeriesResponse
			f.getOK(t, f.tokRd, tc.path, tc.q, &got)
			continue
		}
		f.getErr(t, f.tokRd, tc.path, tc.q, tc.status, tc.code, tc.field)
	}

	// The spellings RFC 3339 allows besides the canonical one mean the same tick; the
	// current tick and the next (within the ingest's clock skew) are not refused.
	var upper, lower apiv1.TreeResponse
	f.getOK(t, f.tokRd, tr, url.Values{"tick": {"2024-05-01T10:00:00Z"}}, &upper)
	f.getOK(t, f.tokRd, tr, url.Values{"tick": {"2024-05-01t12:00:00.000+02:00"}}, &lower)
	if !upper.Tick.Equal(lower.Tick) || !slices.EqualFunc(upper.Nodes, lower.Nodes, func(a, b apiv1.TreeNode) bool { return a.Online == b.Online }) {
		t.Fatalf("lowercase t: %+v, uppercase: %+v", lower.Tick, upper.Tick)
	}
	f.getOK(t, f.tokRd, tr, url.Values{"tick": {"2024-05-01t10:00:00z"}}, &lower)
	if !upper.Tick.Equal(lower.Tick) {
		t.Fatalf("lowercase z: %s", lower.Tick)
	}
	var s apiv1.SeriesResponse
	f.getOK(t, f.tokRd, series, url.Values{"node": {"g01"}, "from": {"2024-05-01t10:00:00z"}, "to": {"2024-05-01t11:00:00z"}}, &s)
	if len(s.Points) != 12 {
		t.Fatalf("lowercase window: %d points", len(s.Points))
	}
	for _, tk := range []time.Time{readEnd, readEnd.Add(rtick)} {
		f.getOK(t, f.tokRd, tr, tickValues(tk), &upper)
		if !upper.Tick.Equal(tk) {
			t.Fatalf("tick %s answered %s", tk, upper.Tick)
		}
	}
	var top3 apiv1.TopResponse
	f.getOK(t, f.tokRd, top, url.Values{"node": {"g01-s0001"}, "n": {"2"}, "tick": {tickFull.Format(time.RFC3339)}}, &top3)
	if len(top3.Children) != 2 {
		t.Fatalf("n=2: %+v", top3)
	}

	// A project without any tree: no tick to default to.
	tokEmpty := f.token(t, "empty", true)
	f.getErr(t, tokEmpty, apiv1.ProjectsPath+"/empty"+apiv1.TreePath, nil, 404, apiv1.ErrNoData, "tick")
	f.getErr(t, tokEmpty, apiv1.ProjectsPath+"/empty"+apiv1.SeriesPath, url.Values{"node": {"x"}}, 404, apiv1.ErrUnknownNode, "node")
	var ticksGot []apiv1.TickSummary
	f.getOK(t, tokEmpty, apiv1.ProjectsPath+"/empty"+apiv1.TicksPath, nil, &ticksGot)
	if len(ticksGot) != 0 {
		t.Fatalf("ticks of a project without a tree: %+v", ticksGot)
	}
}

// testReadAuth: project tokens of either scope read their own project only; a read token
// cannot ingest; a deleted project is 404.
func testReadAuth(t *testing.T, f *readFixture) {
	tokGone := f.token(t, "gone", false)
	if _, err := f.db.Collection(store.ProjectsCollection).DeleteOne(f.ctx, bson.D{{Key: "_id", Value: "gone"}}); err != nil {
		t.Fatal(err)
	}
	treePath := readPath + apiv1.TreePath
	for _, tc := range []struct {
		name   string
		token  string
		path   string
		status int
		code   string
	}{
		{"no token", "", treePath, 401, apiv1.ErrUnauthorized},
		{"unknown token", "bm90LWEtdG9rZW4", treePath, 401, apiv1.ErrUnauthorized},
		{"ingest token", f.tokIngest, treePath, 200, ""},
		{"read token", f.tokRd, treePath, 200, ""},
		{"other project's token", f.tokOther, treePath, 403, apiv1.ErrForbidden},
		{"read token, other project", f.tokRd, apiv1.ProjectsPath + "/proj-o" + apiv1.TreePath, 403, apiv1.ErrForbidden},
		{"token, unknown project", f.tokRd, apiv1.ProjectsPath + "/nope" + apiv1.SeriesPath, 403, apiv1.ErrForbidden},
		{"deleted project", tokGone, apiv1.ProjectsPath + "/gone" + apiv1.TicksPath, 404, apiv1.ErrUnknownProject},
	} {
		if tc.status == 200 {
			var got apiv1.TreeResponse
			f.getOK(t, tc.token, tc.path, nil, &got)
			continue
		}
		e := f.getErr(t, tc.token, tc.path, nil, tc.status, tc.code, "")
		t.Logf("%s: %s", tc.name, e.Message)
	}
	req, _ := http.NewRequest(http.MethodGet, f.url+treePath, nil)
	req.Header.Set("Authorization", "Basic abc")
	if resp, err := f.http.Do(req); err != nil || resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("Basic auth: %v %v", resp, err)
	} else {
		_ = resp.Body.Close()
	}

	for _, tc := range []struct {
		token string
		want  []apiv1.ProjectInfo
	}{
		{f.tokRd, []apiv1.ProjectInfo{{Name: "proj-r"}}},
		{f.tokOther, []apiv1.ProjectInfo{{Name: "proj-o"}}},
		{tokGone, []apiv1.ProjectInfo{}},
	} {
		var got apiv1.ProjectsResponse
		f.getOK(t, tc.token, apiv1.ProjectsPath, nil, &got)
		if !slices.Equal(got.Projects, tc.want) {
			t.Errorf("projects = %+v, want %+v", got.Projects, tc.want)
		}
	}

	// A read token is refused on the ingest endpoint before its body is read; an ingest
	// token's request gets past authorization (here to the validation of its tick).
	body := `{"project":"proj-r","timestamp":"2024-05-02T23:55:00Z","submission_id":"s","counts":[]}`
	for _, tc := range []struct {
		token  string
		status int
	}{{f.tokRd, 403}, {f.tokIngest, 200}} {
		req, _ := http.NewRequest(http.MethodPost, f.url+apiv1.CountsPath, bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+tc.token)
		resp, err := f.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e apiv1.ErrorResponse
		raw := new(bytes.Buffer)
		_, _ = raw.ReadFrom(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("POST %s = %d %s, want %d", apiv1.CountsPath, resp.StatusCode, raw, tc.status)
		}
		if tc.status == 403 {
			decodeStrict(t, raw.Bytes(), &e)
			if e.Error != apiv1.ErrForbidden {
				t.Fatalf("read token on ingest: %+v", e)
			}
		}
	}
	list, err := api.ListTokens(f.ctx, f.db, "proj-r")
	scopes := map[string]int{}
	for _, ti := range list {
		scopes[ti.Scope]++
	}
	if err != nil || len(list) != 2 || scopes[api.ScopeIngest] != 1 || scopes[api.ScopeRead] != 1 {
		t.Fatalf("ListTokens = %+v, %v", list, err)
	}
}

// testReadStepInProgress: the 1h and 1d steps that contain the server's current tick count
// only the ticks that have started (at or before it), so a node whose every leaf reported
// every tick shows a complete step in progress, while a missing report still shows.
func testReadStepInProgress(t *testing.T, f *readFixture) {
	w := newWorld("proj-now")
	w.importTree(t, f.readStack, []tree.Node{{ID: "now-root", Type: tree.TypeProject},
		{ID: "now-g", Type: tree.TypeGroup, Parent: "now-root"},
		{ID: "now-a", Type: tree.TypeProcess, Parent: "now-g"}, {ID: "now-b", Type: tree.TypeProcess, Parent: "now-g"},
		{ID: "now-c", Type: tree.TypeProcess, Parent: "now-root"}}, rt0)
	current := tree.AlignTick(readNow, rtick) // readEnd: the first tick of an hour and of a day
	for tk := current.Add(-3 * time.Hour); !tk.After(current); tk = tk.Add(rtick) {
		w.set(tk, "now-a", 5)
		w.set(tk, "now-b", 7)
		if tk.Before(current) {
			w.set(tk, "now-c", 1) // now-c misses the current tick
		}
	}
	w.write(t, f.readStack)
	tok := f.token(t, "proj-now", true)
	path := apiv1.ProjectsPath + "/proj-now" + apiv1.SeriesPath
	type pt struct {
		reported, expected int64
		complete           bool
		// ticks complete, due and in the step: completeness at 1h and 1d counts ticks
		ticksComplete, ticksDue, ticks int
		open                           bool
	}
	for _, tc := range []struct {
		node, step string
		last, prev pt // the step in progress and the one before
	}{
		{"now-g", apiv1.Step1h, pt{2, 2, true, 1, 1, 12, true}, pt{24, 24, true, 12, 12, 12, false}},
		// the day before has reports for its last 3 hours: 36 of its 288 ticks complete
		{"now-g", apiv1.Step1d, pt{2, 2, true, 1, 1, 288, true}, pt{72, 576, false, 36, 288, 288, false}},
		{"now-root", apiv1.Step1h, pt{2, 3, false, 0, 1, 12, true}, pt{36, 36, true, 12, 12, 12, false}},
		{"now-c", apiv1.Step1h, pt{0, 1, false, 0, 1, 12, true}, pt{12, 12, true, 12, 12, 12, false}},
		{"now-g", apiv1.Step5m, pt{2, 2, true, 1, 1, 1, true}, pt{2, 2, true, 1, 1, 1, false}},
	} {
		var got apiv1.SeriesResponse
		f.getOK(t, tok, path, url.Values{"node": {tc.node}, "step": {tc.step}}, &got) // default window: up to the current step's end
		last, prev := got.Points[len(got.Points)-1], got.Points[len(got.Points)-2]
		if !last.T.Equal(current) || (pt{last.Reported, last.Expected, last.Complete, last.TicksComplete, last.TicksDue, last.Ticks, last.Open}) != tc.last {
			t.Errorf("%s %s: step in progress %s, want %+v", tc.node, tc.step, fmtPoint(last), tc.last)
		}
		if (pt{prev.Reported, prev.Expected, prev.Complete, prev.TicksComplete, prev.TicksDue, prev.Ticks, prev.Open}) != tc.prev {
			t.Errorf("%s %s: the step before %s, want %+v", tc.node, tc.step, fmtPoint(prev), tc.prev)
		}
		step := map[string]time.Duration{apiv1.Step5m: rtick, apiv1.Step1h: time.Hour, apiv1.Step1d: 24 * time.Hour}[tc.step]
		if !last.ClosesAt.Equal(current.Add(step)) || !prev.ClosesAt.Equal(current) {
			t.Errorf("%s %s: closes_at %v and %v, want %s and %s", tc.node, tc.step, last.ClosesAt, prev.ClosesAt, current.Add(step), current)
		}
	}
	var tr apiv1.TreeResponse
	f.getOK(t, tok, apiv1.ProjectsPath+"/proj-now"+apiv1.TreePath, nil, &tr)
	if !tr.Tick.Equal(current) || !tr.Open || !tr.ClosesAt.Equal(current.Add(rtick)) {
		t.Errorf("tree at the open tick: tick %s open %v closes %v, want %s open until %s", tr.Tick, tr.Open, tr.ClosesAt, current, current.Add(rtick))
	}
	// A report for the next tick (ingest's clock skew allows it) counts although the tick
	// has not started by the server's clock.
	ahead := newWorld("proj-now")
	ahead.versions = w.versions
	ahead.set(current.Add(rtick), "now-a", 6)
	ahead.write(t, f.readStack)
	var got apiv1.SeriesResponse
	f.getOK(t, tok, path, url.Values{"node": {"now-a"}, "step": {apiv1.Step1h}}, &got)
	if last := got.Points[len(got.Points)-1]; last.Reported != 2 || last.Expected != 2 || !last.Complete || last.Online == nil || *last.Online != 6 {
		t.Errorf("a report for a tick ahead of the clock: %s, want it counted", fmtPoint(last))
	}
}

// testReadRoutes: a path no endpoint has is a JSON 404 not_found, a method the path's
// endpoint does not take a JSON 405 method_not_allowed with Allow, before any
// authentication; HEAD answers like GET without a body.
func testReadRoutes(t *testing.T, f *readFixture) {
	for _, tc := range []struct {
		method, path string
		token        string
		status       int
		code, allow  string
	}{
		{"GET", "/v1/nope", "", 404, apiv1.ErrNotFound, ""},
		{"GET", "/nope", f.tokRd, 404, apiv1.ErrNotFound, ""},
		{"GET", "/", "", 404, apiv1.ErrNotFound, ""},
		{"GET", readPath, f.tokRd, 404, apiv1.ErrNotFound, ""},
		{"GET", readPath + "/", f.tokRd, 404, apiv1.ErrNotFound, ""},
		{"GET", readPath + apiv1.TreePath + "/x", f.tokRd, 404, apiv1.ErrNotFound, ""},
		{"GET", apiv1.ProjectsPath + "/", f.tokRd, 404, apiv1.ErrNotFound, ""},
		{"HEAD", "/v1/nope", "", 404, "", ""},
		{"POST", apiv1.ProjectsPath, f.tokRd, 405, apiv1.ErrMethodNotAllowed, "GET, HEAD"},
		{"DELETE", readPath + apiv1.TreePath, f.tokRd, 405, apiv1.ErrMethodNotAllowed, "GET, HEAD"},
		{"PUT", readPath + apiv1.SeriesPath, "", 405, apiv1.ErrMethodNotAllowed, "GET, HEAD"},
		{"OPTIONS", readPath + apiv1.TicksPath, "", 405, apiv1.ErrMethodNotAllowed, "GET, HEAD"},
		{"GET", apiv1.CountsPath, f.tokIngest, 405, apiv1.ErrMethodNotAllowed, "POST"},
		{"HEAD", readPath + apiv1.TreePath, f.tokRd, 200, "", ""},
		{"HEAD", readPath + apiv1.TreePath, "", 401, "", ""},
	} {
		req, err := http.NewRequestWithContext(f.ctx, tc.method, f.url+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := f.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw := new(bytes.Buffer)
		_, _ = raw.ReadFrom(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s = %d %q Allow %q, want %d application/json Allow %q", tc.method, tc.path, resp.StatusCode,
				resp.Header.Get("Content-Type"), resp.Header.Get("Allow"), tc.status, tc.allow)
			continue
		}
		if tc.method == "HEAD" {
			if raw.Len() != 0 {
				t.Errorf("HEAD %s answered a body: %s", tc.path, raw)
			}
			continue
		}
		var e apiv1.ErrorResponse
		decodeStrict(t, raw.Bytes(), &e)
		if e.Error != tc.code || e.Message == "" {
			t.Errorf("%s %s: %+v, want error %s", tc.method, tc.path, e, tc.code)
		}
		t.Logf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, e.Message)
	}
}
