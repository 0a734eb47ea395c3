//go:build linux

package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
	"github.com/gameops/rollup/watcher"
	"github.com/gameops/rollup/web"
)

// chromiumPath is where Debian's chromium package installs the browser.
const chromiumPath = "/usr/bin/chromium"

// Shape of the test data: a 3×3×4 tree (36 leaves) reporting for 48 ticks (4 hours) up to
// the last finished tick, with a 3-tick hole, an incomplete tick, and at the latest tick one
// missing leaf and one orphan.
const (
	project     = "demo"
	ticks       = 48
	gapFrom     = 20 // ticks gapFrom..gapFrom+2 have no document at all
	halfTick    = 30 // half of g01's leaves are missing
	missingLeaf = "g02-s0001-p03"
	orphanLeaf  = "zz-ghost"
	selected    = "g02"
)

// TestDashboardInChromium serves the API and the dashboard over the embedded server holding
// a generated tree, leaves and their parents (recomputed by watcher.Replay), loads the page in
// headless Chromium with links that preselect a node, and checks the rendered DOM against the
// API's answers: the node's and its children's totals and completeness, the orphans, the
// chart's point counts. It also saves a screenshot to artifacts/dashboard.png.
func TestDashboardInChromium(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s is missing (install it with: apt-get install -y chromium); CI is unset, so skipping the browser test", chromiumPath)
		}
		t.Fatalf("CI is set but %s is missing: install Debian's chromium (apt-get install -y chromium): %v", chromiumPath, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	store := embeddedtest.Start(t)
	db := store.Database(t, store.Client(t))
	token, latest := seed(ctx, t, db)

	rec := &requestLog{}
	mux := http.NewServeMux()
	mux.Handle("/v1/", api.NewServer(api.Config{DB: db, Logger: zaptest.NewLogger(t)}).Handler())
	mux.Handle("/", web.Handler())
	srv := httptest.NewServer(rec.wrap(mux))
	t.Cleanup(srv.Close)
	d := &dash{ctx: ctx, url: srv.URL, token: token}
	link := srv.URL + "/#token=" + url.QueryEscape(token) + "&project=" + project

	t.Run("latest tick", func(t *testing.T) {
		rec.reset()
		dom := chromium(ctx, t, "--user-data-dir="+t.TempDir(), "--virtual-time-budget=10000", "--dump-dom", link+"&node="+selected)
		// The token never leaves the Authorization header: not rendered, not in any URL.
		if strings.Contains(dom, token) {
			t.Error("the page shows the token")
		}
		rec.check(t, token)

		tr := d.checkTree(t, dom, "", selected)
		if !tr.Tick.Equal(latest) {
			t.Errorf("API's latest tick %s, want %s", tr.Tick, latest)
		}
		row := findOne(t, dom, "li", "data-node-id", "g02-s0001")
		if row["data-complete"] != "false" || !strings.Contains(findRowClass(dom, "g02-s0001"), "incomplete") {
			t.Errorf("g02-s0001 misses a leaf but is not marked incomplete: %v", row)
		}
		if o := findOne(t, dom, "li", "data-orphan-id", orphanLeaf); o["data-online"] != "7" {
			t.Errorf("orphan %s shows online %q, want 7", orphanLeaf, o["data-online"])
		}
		// The tick picker: "latest" and every tick of the last day that has a root document.
		picker := regexp.MustCompile(`(?s)<select id="tick"[^>]*>(.*?)</select>`).FindStringSubmatch(dom)
		if picker == nil || strings.Count(picker[1], "<option") != 1+ticks-3 {
			t.Errorf("tick picker %q, want latest and %d ticks", picker, ticks-3)
		}
		// 24 hours at 5m: the ticks before the data and the seeded hole are gaps, the latest
		// tick (a leaf missing) is incomplete.
		d.checkChart(t, dom, selected, "5m", "", 288, 288-ticks+3, 1)
	})

	t.Run("past tick and week", func(t *testing.T) {
		tick := latest.Add(-(ticks - 1 - halfTick) * tree.DefaultTick).Format(time.RFC3339)
		dom := chromium(ctx, t, "--user-data-dir="+t.TempDir(), "--virtual-time-budget=10000", "--dump-dom",
			link+"&node=g01&window=7d&tick="+url.QueryEscape(tick))
		tr := d.checkTree(t, dom, tick, "g01")
		if got := tr.Tick.Format(time.RFC3339); got != tick {
			t.Errorf("API tree at %s answered tick %s", tick, got)
		}
		if g := findOne(t, dom, "li", "data-node-id", "g01"); g["data-complete"] != "false" {
			t.Errorf("g01 misses half its leaves at %s but shows complete", tick)
		}
		// A week at 1h, mean by default: the hours with data (5, one of them partly in the
		// hole, one with the incomplete tick) are not gaps.
		d.checkChart(t, dom, "g01", "1h", "mean", 168, -1, -1)
	})

	t.Run("refused token", func(t *testing.T) {
		dom := chromium(ctx, t, "--user-data-dir="+t.TempDir(), "--virtual-time-budget=10000", "--dump-dom",
			srv.URL+"/#token=not-a-token&project="+project)
		if _, hidden := findOne(t, dom, "form", "id", "login")["hidden"]; hidden {
			t.Error("the login form is hidden after the API refused the token")
		}
		if _, hidden := findOne(t, dom, "main", "id", "app")["hidden"]; !hidden {
			t.Error("the dashboard is shown after the API refused the token")
		}
		if !strings.Contains(dom, "The API refused the token") {
			t.Error("no message says the token was refused")
		}
	})

	t.Run("project without data", func(t *testing.T) {
		empty, err := api.CreateReadToken(ctx, db, "empty", "dashboard-test")
		if err != nil {
			t.Fatalf("token: %v", err)
		}
		dom := chromium(ctx, t, "--user-data-dir="+t.TempDir(), "--virtual-time-budget=10000", "--dump-dom",
			srv.URL+"/#token="+url.QueryEscape(empty))
		if !strings.Contains(dom, `class="nodata"`) || !strings.Contains(dom, "no rolled-up tick yet") {
			t.Error("the page does not say that the project has no data yet")
		}
		if _, hidden := findOne(t, dom, "section", "id", "detail")["hidden"]; !hidden {
			t.Error("the node pane is shown without data")
		}
	})

	t.Run("screenshot", func(t *testing.T) {
		// For people to look at; artifacts/ is gitignored.
		shot := filepath.Join(artifactsDir(t), "dashboard.png")
		_ = os.Remove(shot)
		chromium(ctx, t, "--user-data-dir="+t.TempDir(), "--virtual-time-budget=10000", "--window-size=1280,900",
			"--screenshot="+shot, link+"&node="+selected)
		if st, err := os.Stat(shot); err != nil || st.Size() < 10_000 {
			t.Fatalf("screenshot %s: %v (size %d)", shot, err, sizeOf(st))
		}
		t.Logf("screenshot: %s", shot)
	})
}

// dash reads the API the page reads, with the same token.
type dash struct {
	ctx   context.Context
	url   string
	token string
}

// checkTree asserts that the page shows node (selected) and its children at tick ("" = the
// latest) exactly as the API's tree answer does, and returns that answer.
func (d *dash) checkTree(t *testing.T, dom, tick, node string) apiv1.TreeResponse {
	t.Helper()
	var tr apiv1.TreeResponse
	q := ""
	if tick != "" {
		q = "?tick=" + url.QueryEscape(tick)
	}
	getJSON(d.ctx, t, d.url+"/v1/projects/"+project+"/tree"+q, d.token, &tr)
	nodes := map[string]apiv1.TreeNode{}
	for _, n := range tr.Nodes {
		nodes[n.ID] = n
	}
	n, ok := nodes[node]
	if !ok || len(n.Children) == 0 {
		t.Fatalf("API tree has no node %q with children: %+v", node, n)
	}
	wantNode(t, "summary", findOne(t, dom, "div", "id", "summary"), "data-node-id", n)
	if m := regexp.MustCompile(`id="node-online">([^<]*)<`).FindStringSubmatch(dom); m == nil || digits(m[1]) != strconv.FormatInt(n.Online, 10) {
		t.Errorf("summary shows online %q, API says %d", m, n.Online)
	}
	row := findOne(t, dom, "li", "data-node-id", node)
	wantNode(t, "tree row", row, "data-node-id", n)
	if row["aria-selected"] != "true" {
		t.Errorf("tree row of %s: aria-selected=%q", node, row["aria-selected"])
	}
	// Its children: expanded in the tree and listed in the children table.
	for _, id := range n.Children {
		c := nodes[id]
		wantNode(t, "tree row", findOne(t, dom, "li", "data-node-id", id), "data-node-id", c)
		wantNode(t, "children table", findOne(t, dom, "tr", "data-child-id", id), "data-child-id", c)
	}
	return tr
}

// checkChart asserts that the page drew uPlot's canvas for node and that its data attributes
// count the points, gaps and incomplete points of the series the API answers for the page's
// window (wantGaps, wantInc < 0: not checked against a constant).
func (d *dash) checkChart(t *testing.T, dom, node, step, agg string, wantPoints, wantGaps, wantInc int) {
	t.Helper()
	chart := findOne(t, dom, "div", "id", "chart")
	if chart["data-series-node"] != node || chart["data-step"] != step || chart["data-agg"] != agg && agg != "" {
		t.Fatalf("chart attributes %v, want node %s at step %s (agg %q)", chart, node, step, agg)
	}
	if !regexp.MustCompile(`(?s)id="chart".*?class="uplot[^"]*".*?<canvas`).MatchString(dom) {
		t.Error("no uPlot canvas in the chart")
	}
	q := url.Values{"node": {node}, "from": {chart["data-from"]}, "to": {chart["data-to"]}, "step": {step}}
	if agg != "" {
		q.Set("agg", agg)
	}
	var sr apiv1.SeriesResponse
	getJSON(d.ctx, t, d.url+"/v1/projects/"+project+"/series?"+q.Encode(), d.token, &sr)
	var gaps, inc int
	for _, p := range sr.Points {
		switch {
		case p.Online == nil:
			gaps++
		case !p.Complete:
			inc++
		}
	}
	if len(sr.Points) != wantPoints || wantGaps >= 0 && gaps != wantGaps || wantInc >= 0 && inc != wantInc {
		t.Errorf("API series for the page's window: %d points, %d gaps, %d incomplete; want %d, %d, %d (negative: any)",
			len(sr.Points), gaps, inc, wantPoints, wantGaps, wantInc)
	}
	if gaps == len(sr.Points) || inc == 0 {
		t.Errorf("the series shows %d gaps and %d incomplete points of %d: the seeded data is not in it", gaps, inc, len(sr.Points))
	}
	for attr, want := range map[string]int{"data-points": len(sr.Points), "data-gaps": gaps, "data-incomplete": inc} {
		if chart[attr] != strconv.Itoa(want) {
			t.Errorf("chart %s=%q, API says %d", attr, chart[attr], want)
		}
	}
}

// seed creates the project's read-only token, its tree, the leaves and (by watcher.Replay) the
// parents; it returns the token and the latest tick.
func seed(ctx context.Context, t *testing.T, db *mongo.Database) (string, time.Time) {
	t.Helper()
	if _, err := migrations.New(db, zaptest.NewLogger(t)).Up(ctx, migrations.UpOptions{}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	token, err := api.CreateReadToken(ctx, db, project, "dashboard-test")
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	latest := tree.AlignTick(time.Now().UTC(), tree.DefaultTick).Add(-tree.DefaultTick)
	first := latest.Add(-(ticks - 1) * tree.DefaultTick)
	nodes := tree.Generate(project, 3, 3, 4)
	trees := treedb.New(db)
	if _, err := trees.Import(ctx, project, nodes, first); err != nil {
		t.Fatalf("import tree: %v", err)
	}
	built, err := tree.Build(project, nodes)
	if err != nil {
		t.Fatalf("build tree: %v", err)
	}
	var docs []any
	for i := range ticks {
		if i >= gapFrom && i < gapFrom+3 {
			continue
		}
		ts := first.Add(time.Duration(i) * tree.DefaultTick)
		for j, leaf := range built.Leaves() {
			if (i == halfTick && strings.HasPrefix(leaf.ID, "g01-") && j%2 == 0) || (i == ticks-1 && leaf.ID == missingLeaf) {
				continue
			}
			online := int64(8 + (j*7+i*3)%11 + (i/6)%3)
			docs = append(docs, leafDoc(leaf.ID, leaf.Type, ts, online))
		}
	}
	docs = append(docs, leafDoc(orphanLeaf, tree.TypeProcess, latest, 7))
	if _, err := db.Collection(migrations.CountsCollection).InsertMany(ctx, docs); err != nil {
		t.Fatalf("insert leaves: %v", err)
	}
	st, err := watcher.Replay(ctx, db, watcher.NewTreeCache(trees), project, first, latest.Add(tree.DefaultTick), watcher.ReplayOptions{})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if st.Ticks != ticks-3 || st.Orphans != 1 {
		t.Fatalf("replay recomputed %d ticks with %d orphans, want %d and 1", st.Ticks, st.Orphans, ticks-3)
	}
	return token, latest
}

func leafDoc(id, typ string, ts time.Time, online int64) bson.D {
	return bson.D{
		{Key: migrations.FieldID, Value: id},
		{Key: migrations.FieldType, Value: typ},
		{Key: migrations.FieldTimestamp, Value: ts},
		{Key: migrations.FieldProject, Value: project},
		{Key: migrations.FieldOnline, Value: online},
		{Key: migrations.FieldVersion, Value: ts.UnixNano() + 1},
		{Key: migrations.FieldSubmissionID, Value: "seed"},
		{Key: migrations.FieldWrittenAt, Value: time.Now().UTC()},
	}
}

// chromium runs headless Chromium with args (after the fixed flags) and returns its stdout.
// The browser's whole process group is killed when it returns or ctx ends.
func chromium(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync"}
	cmd := exec.CommandContext(ctx, chromiumPath, append(flags, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers that outlived the browser
	}
	if err != nil {
		t.Fatalf("chromium %s: %v\nstderr:\n%s", strings.Join(args, " "), err, tail(stderr.String(), 3000))
	}
	t.Logf("chromium %s: %s", args[len(args)-2], time.Since(start).Round(time.Millisecond))
	return stdout.String()
}

func getJSON(ctx context.Context, t *testing.T, u, token string, v any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		var e apiv1.ErrorResponse
		_ = json.NewDecoder(res.Body).Decode(&e)
		t.Fatalf("GET %s: %s %+v", u, res.Status, e)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: decode: %v", u, err)
	}
}

// requestLog records the requests the browser made.
type requestLog struct {
	mu   sync.Mutex
	reqs []string // "METHOD URI auth=<Authorization header>"
}

func (l *requestLog) reset() {
	l.mu.Lock()
	l.reqs = nil
	l.mu.Unlock()
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("User-Agent") != "Go-http-client/1.1" {
			l.mu.Lock()
			l.reqs = append(l.reqs, r.Method+" "+r.RequestURI+" auth="+r.Header.Get("Authorization"))
			l.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// check asserts the browser loaded the page and called the read API, sending the token
// in the Authorization header of API calls only and never in a URL.
func (l *requestLog) check(t *testing.T, token string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var page, api int
	for _, r := range l.reqs {
		uri, auth, _ := strings.Cut(strings.SplitN(r, " ", 2)[1], " auth=")
		switch {
		case strings.Contains(uri, token):
			t.Errorf("token in a URL: %s", uri)
		case strings.HasPrefix(uri, "/v1/"):
			api++
			if auth != "Bearer "+token {
				t.Errorf("API call %s sent Authorization %q", uri, auth)
			}
		case auth != "":
			t.Errorf("non-API request %s sent Authorization", uri)
		case uri == "/":
			page++
		}
	}
	if page == 0 || api < 4 {
		t.Errorf("browser requests: %d page loads, %d API calls; want the page and projects, tree, ticks, series:\n%s", page, api, strings.Join(l.reqs, "\n"))
	}
}

// startTag matches an HTML start tag with its attributes ('>' may occur in quoted values).
var (
	startTag = regexp.MustCompile(`<[a-zA-Z][a-zA-Z0-9]*(?:\s+[^\s=>"]+(?:="[^"]*")?)*\s*/?>`)
	attrRe   = regexp.MustCompile(`([^\s=>"<]+)(?:="([^"]*)")?`)
)

// findOne returns the attributes of the only start tag of element name in dom with
// attr="value".
func findOne(t *testing.T, dom, name, attr, value string) map[string]string {
	t.Helper()
	needle := " " + attr + `="` + value + `"`
	var found []map[string]string
	for _, tag := range startTag.FindAllString(dom, -1) {
		if strings.HasPrefix(tag, "<"+name+" ") && strings.Contains(tag, needle) {
			m := map[string]string{}
			for _, a := range attrRe.FindAllStringSubmatch(tag[1:len(tag)-1], -1)[1:] {
				m[a[1]] = strings.ReplaceAll(a[2], "&amp;", "&")
			}
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d <%s> elements with%s, want 1", len(found), name, needle)
	}
	return found[0]
}

// findRowClass returns the class of the row div right after the tree item of id.
func findRowClass(dom, id string) string {
	m := regexp.MustCompile(`data-node-id="` + regexp.QuoteMeta(id) + `"[^>]*><div class="([^"]*)"`).FindStringSubmatch(dom)
	if m == nil {
		return ""
	}
	return m[1]
}

// wantNode checks an element's data attributes against the API's node.
func wantNode(t *testing.T, where string, got map[string]string, idAttr string, n apiv1.TreeNode) {
	t.Helper()
	want := map[string]string{
		idAttr:          n.ID,
		"data-online":   strconv.FormatInt(n.Online, 10),
		"data-reported": strconv.FormatInt(n.Reported, 10),
		"data-expected": strconv.FormatInt(n.Expected, 10),
		"data-complete": strconv.FormatBool(n.Reported >= n.Expected),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s of %s: %s=%q, API says %q", where, n.ID, k, got[k], v)
		}
	}
}

func digits(s string) string { return strings.ReplaceAll(s, ",", "") }

// artifactsDir returns the module root's artifacts directory (gitignored), creating it.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	out := filepath.Join(dir, "artifacts")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return 0
	}
	return st.Size()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
