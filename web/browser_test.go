//go:build linux

package web_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/migrations"
	"github.com/gameops/rollup/recompute"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/tree"
	"github.com/gameops/rollup/tree/treedb"
	"github.com/gameops/rollup/web"
)

// chromiumPath is where Debian's chromium-headless-shell package installs the browser: the
// same Blink and V8 as chromium, without the desktop browser's own user interface, which
// gave every page two WebUI renderers (the omnibox popups) of its own. The test kept the
// machine busy for 54-60 CPU s with chromium, 32-35 s with the headless shell
// (docs/testing.md, "The headless shell"); Playwright runs headless on the same build.
const chromiumPath = "/usr/bin/chromium-headless-shell"

// Shape of the test data: a 3×3×4 tree (36 leaves) reporting for 48 ticks (4 hours) up to
// the last finished tick, with a 3-tick hole, an incomplete tick, and at the latest tick one
// missing leaf and one orphan.
const (
	project     = "demo"
	ticks       = 48
	gapFrom     = 20 // ticks gapFrom..gapFrom+2 have no document at all
	halfTick    = 30 // half of g01's leaves are missing
	damagedTick = 10 // g01's document is damaged by the "damaged tick" test
	missingLeaf = "g02-s0001-p03"
	orphanLeaf  = "zz-ghost"
	selected    = "g02"
)

// TestDashboardInChromium serves the API and the dashboard over the embedded server holding
// a generated tree, leaves and their parents (recomputed by recompute.Replay), and drives the
// page in one headless Chromium over the DevTools protocol: what it shows is checked against
// the API's answers (the DOM's data attributes, the downloaded CSV), a proxy answers 503 on
// demand for a refresh that fails and recovers, synthetic mouse events drag to zoom, and a
// 390 px viewport must not overflow. Screenshots go to web/artifacts (gitignored).
func TestDashboardInChromium(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s is missing (install it with: apt-get install -y chromium-headless-shell); CI is unset, so skipping the browser test", chromiumPath)
		}
		t.Fatalf("CI is set but %s is missing: install Debian's headless Chromium (apt-get install -y chromium-headless-shell): %v", chromiumPath, err)
	}
	deadline := time.Now().Add(6 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-10*time.Second).Before(deadline) {
		deadline = d.Add(-10 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	mongod := embeddedtest.Start(t)
	db := mongod.Database(t, mongod.Client(t))
	f := seed(ctx, t, db)

	rec := &requestLog{}
	mux := http.NewServeMux()
	mux.Handle("/v1/", rec.faulty(api.NewServer(api.Config{DB: db, Logger: zaptest.NewLogger(t)}).Handler()))
	mux.Handle("/", web.Handler())
	srv := httptest.NewServer(rec.wrap(mux))
	t.Cleanup(srv.Close)
	d := &dash{ctx: ctx, url: srv.URL, token: f.token}
	link := srv.URL + "/#token=" + url.QueryEscape(f.token) + "&project=" + project
	b := startBrowser(ctx, t)
	artifacts := artifactsDir(t)
	open := func(t *testing.T, u string, w, h int) *page {
		t.Helper()
		p := b.newPage(ctx, t, w, h)
		p.open(u)
		p.waitLoads("the first view", 0)
		t.Cleanup(func() {
			if errs := p.consoleErrors(); len(errs) > 0 {
				t.Errorf("the page logged errors:\n%s", strings.Join(errs, "\n"))
			}
		})
		return p
	}

	t.Run("latest tick", func(t *testing.T) {
		rec.reset()
		p := open(t, link+"&node="+selected, 1280, 900)
		dom := p.dom()
		// The token never leaves the Authorization header: not rendered, not in any URL.
		if strings.Contains(dom, f.token) || strings.Contains(p.str("location.href"), f.token) {
			t.Error("the page shows the token")
		}
		rec.check(t, f.token)

		tr := d.checkTree(t, dom, "", selected)
		if !tr.Tick.Equal(f.latest) {
			t.Errorf("API's latest tick %s, want %s", tr.Tick, f.latest)
		}
		row := findOne(t, dom, "li", "data-node-id", "g02-s0001")
		if row["data-complete"] != "false" || !strings.Contains(findRowClass(dom, "g02-s0001"), "incomplete") {
			t.Errorf("g02-s0001 misses a leaf but is not marked incomplete: %v", row)
		}
		if o := findOne(t, dom, "li", "data-orphan-id", orphanLeaf); o["data-online"] != "7" {
			t.Errorf("orphan %s shows online %q, want 7", orphanLeaf, o["data-online"])
		}
		if strings.Contains(dom, `data-mismatch="true"`) {
			t.Error("a consistent tick shows a total that is not the sum of its children")
		}
		// The tick picker: "latest" and every tick of the last day that has a root document.
		picker := regexp.MustCompile(`(?s)<select id="tick"[^>]*>(.*?)</select>`).FindStringSubmatch(dom)
		if picker == nil || strings.Count(picker[1], "<option") != 1+ticks-3 {
			t.Errorf("tick picker %q, want latest and %d ticks", picker, ticks-3)
		}
		// The link names no range and the project has 4 hours of data: the page opens on the
		// shortest range that shows it all, 6 hours (not 24 hours of mostly gaps), and says so
		// in the fragment.
		chart := findOne(t, dom, "div", "id", "chart")
		if chart["data-range"] != "6h" || chart["data-from"] > f.first.Format(time.RFC3339) || !strings.Contains(p.str("location.hash"), "range=6h") ||
			p.str(`document.querySelector('#ranges [aria-pressed="true"]').dataset.range`) != "6h" {
			t.Errorf("default range %s from %s (data from %s), fragment %s", chart["data-range"], chart["data-from"], f.first.Format(time.RFC3339), p.str("location.hash"))
		}
		// 6 hours at 5m: the ticks before the data and the seeded hole are gaps, the latest
		// tick (a leaf missing) is incomplete.
		d.checkChart(t, dom, selected, "5m", "", 72, 72-ticks+3, 1)
		if got := p.str(`document.querySelector('#readout').dataset.t`); got != f.latest.Format(time.RFC3339) {
			t.Errorf("the readout shows %s, want the selected (latest) tick %s", got, f.latest.Format(time.RFC3339))
		}

		// The leaf that did not report shows "no data", not 0.
		n := p.loads()
		p.click(`#children-body tr[data-child-id="g02-s0001"]`)
		p.waitLoads("g02-s0001 selected", n)
		leaf := p.str(`document.querySelector('#children-body tr[data-child-id="` + missingLeaf + `"] td.online').textContent`)
		other := p.str(`document.querySelector('#children-body tr[data-child-id="g02-s0001-p01"] td.online').textContent`)
		if leaf != "no data" || other == "no data" || digits(other) == "" {
			t.Errorf("children of g02-s0001: the missing leaf shows %q, a reported one %q", leaf, other)
		}
		if !strings.Contains(p.str("location.hash"), "node=g02-s0001") {
			t.Errorf("the fragment %q does not follow the selection", p.str("location.hash"))
		}
		p.click(`#tree li[data-node-id="` + missingLeaf + `"] > .row`)
		p.waitLoads("the missing leaf selected", n+1)
		if got := p.str(`document.getElementById('node-online').textContent`); got != "no data" {
			t.Errorf("the missing leaf's summary shows %q, want no data", got)
		}
	})

	t.Run("past tick and week", func(t *testing.T) {
		tick := f.latest.Add(-(ticks - 1 - halfTick) * tree.DefaultTick).Format(time.RFC3339)
		p := open(t, link+"&node=g01&window=7d&tick="+url.QueryEscape(tick), 1280, 900)
		dom := p.dom()
		tr := d.checkTree(t, dom, tick, "g01")
		if got := tr.Tick.Format(time.RFC3339); got != tick {
			t.Errorf("API tree at %s answered tick %s", tick, got)
		}
		if g := findOne(t, dom, "li", "data-node-id", "g01"); g["data-complete"] != "false" {
			t.Errorf("g01 misses half its leaves at %s but shows complete", tick)
		}
		// A week at 1h, max by default (peak players, as the API): the hours with data (5, one
		// of them partly in the hole, one with the incomplete tick) are not gaps.
		d.checkChart(t, dom, "g01", "1h", "max", 168, -1, -1)
		if p.str(`document.getElementById('agg').value`) != "max" || p.str(`document.getElementById('tick').value`) != tick {
			t.Errorf("controls: agg %s, tick %s", p.str(`document.getElementById('agg').value`), p.str(`document.getElementById('tick').value`))
		}
	})

	t.Run("refused token", func(t *testing.T) {
		p := b.newPage(ctx, t, 1280, 900)
		p.open(srv.URL + "/#token=not-a-token&project=" + project)
		p.waitFor("the login form", `document.body.dataset.state === 'login'`)
		dom := p.dom()
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
		p := open(t, srv.URL+"/#token="+url.QueryEscape(empty), 1280, 900)
		dom := p.dom()
		if !strings.Contains(dom, `class="nodata"`) || !strings.Contains(dom, "no rolled-up tick yet") {
			t.Error("the page does not say that the project has no data yet")
		}
		if _, hidden := findOne(t, dom, "section", "id", "detail")["hidden"]; !hidden {
			t.Error("the node pane is shown without data")
		}
	})

	t.Run("default range reaches old data: never an empty chart", func(t *testing.T) {
		// A project whose one tick is 3 days old opens on 7 days, not on 24 hours of nothing.
		const stale = "stale"
		tok, err := api.CreateReadToken(ctx, db, stale, "dashboard-test")
		if err != nil {
			t.Fatalf("token: %v", err)
		}
		old := f.latest.Add(-72 * time.Hour)
		nodes := []tree.Node{{ID: "stale-root", Type: tree.TypeProject}, {ID: "stale-p1", Type: tree.TypeProcess, Parent: "stale-root"}}
		if _, err := f.trees.Import(ctx, stale, nodes, old.Add(-time.Hour)); err != nil {
			t.Fatalf("import tree: %v", err)
		}
		leaf := leafDoc("stale-p1", tree.TypeProcess, old, 42)
		leaf[3] = bson.E{Key: store.FieldProject, Value: stale}
		if _, err := db.Collection(store.CountsCollection).InsertOne(ctx, leaf); err != nil {
			t.Fatal(err)
		}
		if _, err := recompute.Replay(ctx, db, treedb.NewCache(f.trees), stale, old, old.Add(tree.DefaultTick), recompute.ReplayOptions{}); err != nil {
			t.Fatalf("replay: %v", err)
		}
		p := open(t, srv.URL+"/#token="+url.QueryEscape(tok), 1280, 900)
		chart := findOne(t, p.dom(), "div", "id", "chart")
		if chart["data-range"] != "7d" || chart["data-points"] == chart["data-gaps"] || chart["data-from"] > old.Format(time.RFC3339) {
			t.Errorf("a project with one tick 3 days old opens on %s from %s (%s points, %s gaps)", chart["data-range"], chart["data-from"], chart["data-points"], chart["data-gaps"])
		}
	})

	t.Run("refresh fails and recovers", func(t *testing.T) {
		// A link that names a range keeps it, whatever the data.
		p := open(t, link+"&node="+selected+"&refresh=1s&range=24h", 1280, 900)
		if !strings.Contains(p.str(`document.getElementById('status').textContent`), "refreshes every 1s") {
			t.Errorf("status %q", p.str(`document.getElementById('status').textContent`))
		}
		p.waitLoads("a refresh", p.loads()) // refreshing works

		// The store fails over: every API call answers 503.
		rec.failing.Store(true)
		failedBefore := int(rec.failed.Load())
		p.waitFor("the page to say its data is stale", `document.body.dataset.stale === 'true'`)
		// What the last successful load showed; a relative range's start follows the clock,
		// so it is read now, not when the page opened.
		shownTick := p.str(`document.querySelector('#tree-meta').textContent`)
		shownFrom := p.str(`document.getElementById('chart').dataset.from`)
		stale := p.str(`document.getElementById('stale-text').textContent`)
		if !regexp.MustCompile(`loaded at \d\d:\d\d:\d\d UTC and has not been updated since; loading fails since \d\d:\d\d:\d\d: the store is unavailable`).MatchString(stale) ||
			!strings.Contains(stale, "Next try at") {
			t.Errorf("stale banner %q", stale)
		}
		if s := p.str(`document.getElementById('status').textContent`); !strings.HasPrefix(s, "stale since ") {
			t.Errorf("status %q while stale", s)
		}
		if p.str(`document.getElementById('stale-badge').hidden`) != "false" {
			t.Error("no stale badge next to the numbers")
		}
		// A change asked for while failing is not shown, and the controls say so.
		p.click(`#ranges button[data-range="7d"]`)
		p.waitFor("the error of the failed change", `document.getElementById('error-text').textContent.includes('Could not show the last 7d')`)
		if got := p.str(`document.querySelector('#ranges [aria-pressed="true"]').dataset.range`); got != "24h" {
			t.Errorf("after a failed switch to 7d the pressed range is %s, want 24h (shown)", got)
		}
		if got := p.str(`document.getElementById('chart').dataset.range`); got != "24h" {
			t.Errorf("the chart's range is %s although no load succeeded, want 24h", got)
		}
		if got := p.str(`document.getElementById('chart').dataset.from`); got != shownFrom {
			t.Errorf("the chart starts at %s although no load succeeded, want %s", got, shownFrom)
		}
		if got := p.str(`document.querySelector('#tree-meta').textContent`); got != shownTick {
			t.Errorf("the tree shows %q although no load succeeded, want %q", got, shownTick)
		}
		p.screenshot(filepath.Join(artifacts, "dashboard-stale.png"))
		// Retries go on, with backoff: after the failed refresh and the failed change, a retry
		// 1 s later (the refresh interval), then 2 s later; a fixed 1 s cadence would take 2 s.
		poll(ctx, t, "two retries", func() bool { return int(rec.failed.Load()) >= failedBefore+4 })
		if at := rec.failedTimes(); at[failedBefore+3].Sub(at[failedBefore]) < 2900*time.Millisecond {
			t.Errorf("retries at %v after the first failure: no backoff", at[failedBefore+3].Sub(at[failedBefore]))
		}

		// A new tick arrives meanwhile, and the store comes back.
		next := f.latest.Add(tree.DefaultTick)
		f.addTick(ctx, t, next)
		loads := p.loads()
		rec.failing.Store(false)
		p.waitFor("the page to recover", `document.body.dataset.stale === 'false' && document.getElementById('stale').hidden`)
		p.waitLoads("the recovered view", loads)
		if got := p.str(`document.querySelector('#summary').getAttribute('data-node-id')`); got != selected {
			t.Errorf("after recovery the summary shows %s", got)
		}
		p.waitFor("the new tick", `document.querySelector('#tree-meta').textContent.startsWith('`+next.Format("2006-01-02 15:04")+`')`)
		if s := p.str(`document.getElementById('status').textContent`); !strings.HasPrefix(s, "updated ") {
			t.Errorf("status after recovery %q", s)
		}
		p.waitLoads("refreshing again", p.loads())
	})

	t.Run("open tick, hour and day are provisional", func(t *testing.T) {
		// The tick in progress holds reports (agents overwrite them until it ends): it, its
		// hour and its day are provisional, and at 1h and 1d completeness counts ticks.
		// Each case reads the tick open when it starts; a tick boundary that falls inside its
		// checks makes what it read disagree, so the case runs again in the new tick (5 min
		// away from the next boundary) and only that run's findings count.
		openTick := func() time.Time {
			cur := tree.AlignTick(time.Now(), tree.DefaultTick)
			if f.newest.Before(cur) {
				f.addTick(ctx, t, cur)
			}
			return cur
		}
		for _, tc := range []struct {
			window, step, what string
			closes             func(cur time.Time) string
		}{
			{"1h", "5m", "tick", func(cur time.Time) string { return cur.Add(tree.DefaultTick).Format("15:04") }},
			{"7d", "1h", "hour", func(cur time.Time) string { return cur.Truncate(time.Hour).Add(time.Hour).Format("15:04") }},
			{"90d", "1d", "day", func(cur time.Time) string {
				return cur.Truncate(24 * time.Hour).Add(24 * time.Hour).Format("2006-01-02 15:04")
			}},
		} {
			check := func(cur time.Time) (problems []string) {
				bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
				closes, tcCloses := cur.Add(tree.DefaultTick).Format("15:04"), tc.closes(cur)
				p := open(t, link+"&node="+selected+"&window="+tc.window, 1280, 900)
				if got := p.str(`document.getElementById('summary').dataset.open`); got != "true" {
					bad("%s: the open tick's summary data-open=%q", tc.window, got)
				}
				if got := p.str(`document.getElementById('node-provisional').hidden ? '' : document.getElementById('node-provisional').textContent`); !strings.Contains(got, "provisional: the tick is open until "+closes+" UTC") {
					bad("%s: summary note %q, want provisional until %s", tc.window, got, closes)
				}
				chart := findOne(t, p.dom(), "div", "id", "chart")
				if chart["data-step"] != tc.step || chart["data-open"] != "1" || chart["data-open-from"] == "" {
					bad("%s: chart step %s, %s open points from %q; want %s, 1", tc.window, chart["data-step"], chart["data-open"], chart["data-open-from"], tc.step)
				}
				if !strings.Contains(p.str(`document.getElementById('legend').textContent`), "provisional (the open "+tc.what) {
					bad("%s: the legend does not explain the open %s", tc.window, tc.what)
				}
				// The readout (the selected tick: the open one) against the API's point.
				var sr apiv1.SeriesResponse
				getJSON(ctx, t, srv.URL+"/v1/projects/"+project+"/series?"+url.Values{"node": {selected}, "from": {chart["data-from"]},
					"to": {chart["data-to"]}, "step": {tc.step}}.Encode(), f.token, &sr)
				last := sr.Points[len(sr.Points)-1]
				readout := p.str(`document.getElementById('readout').textContent`)
				if !last.Open || !strings.Contains(readout, "provisional: the "+tc.what+" is open until "+tcCloses+" UTC") {
					bad("%s: readout %q (API open %v), want the %s provisional until %s", tc.window, readout, last.Open, tc.what, tcCloses)
				}
				want := fmt.Sprintf("leaves %d/%d", last.Reported, last.Expected)
				if tc.step != "5m" {
					// In the hour's (day's) last tick every tick is due: no "so far (of N)".
					want = fmt.Sprintf("ticks complete %d/%d · ", last.TicksComplete, last.TicksDue)
					if last.TicksDue < last.Ticks {
						want = fmt.Sprintf("ticks complete %d/%d so far (of %d)", last.TicksComplete, last.TicksDue, last.Ticks)
					}
					if last.Ticks != map[string]int{"1h": 12, "1d": 288}[tc.step] || last.TicksDue > last.Ticks {
						bad("%s: API point %+v", tc.window, last)
					}
				}
				if !strings.Contains(readout, want) {
					bad("%s: readout %q, want %q", tc.window, readout, want)
				}
				// No label contradicts itself: "incomplete" only with fewer complete than due.
				if m := regexp.MustCompile(`(?:leaves|ticks complete) ([\d,]+)/([\d,]+).*· incomplete`).FindStringSubmatch(readout); m != nil && m[1] == m[2] {
					bad("%s: readout %q says incomplete with %s of %s", tc.window, readout, m[1], m[2])
				}
				if last.Complete && !strings.Contains(readout, "complete so far") {
					bad("%s: readout %q, want 'complete so far' for an open complete point", tc.window, readout)
				}
				return problems
			}
			for again := false; ; again = true {
				cur := openTick()
				problems := check(cur)
				if again || tree.AlignTick(time.Now(), tree.DefaultTick).Equal(cur) {
					for _, p := range problems {
						t.Error(p)
					}
					break
				}
				t.Logf("%s: the tick open at %s closed during the checks; checking again in the next", tc.window, cur.Format("15:04"))
			}
		}
	})

	t.Run("slow network: loading state at once, refresh now, retries capped", func(t *testing.T) {
		p := open(t, link+"&node="+selected+"&refresh=off", 1280, 900)
		rec.delay.Store(int64(1500 * time.Millisecond))
		defer rec.delay.Store(0)
		// When the loading state shows, against the click's time (both on the page's clock).
		p.eval(`(() => { window.__clickAt = 0; window.__loadingAt = 0; const box = document.getElementById('loading');
			document.addEventListener('click', () => { window.__clickAt = performance.now(); window.__loadingAt = 0; }, true);
			new MutationObserver(() => { if (!window.__loadingAt && !box.hidden) window.__loadingAt = performance.now(); })
				.observe(box, { attributes: true }); })()`, nil)
		feedback := func(what string) {
			t.Helper()
			var ms float64
			p.eval(`window.__loadingAt && window.__clickAt ? window.__loadingAt - window.__clickAt : -1`, &ms)
			if ms < 0 || ms > 100 {
				t.Errorf("%s: the loading state showed %.0f ms after the click (-1: not at all), want within 100 ms", what, ms)
			}
		}
		for _, c := range []struct{ what, sel, check string }{
			{"range 7d", `#ranges button[data-range="7d"]`, `document.querySelector('#ranges button[data-range="7d"]').classList.contains('pending') && document.getElementById('app').classList.contains('pending') && document.getElementById('loading').textContent.includes('the last 7d')`},
			{"node g01", `#tree li[data-node-id="g01"] > .row`, `document.getElementById('loading').textContent.includes('node g01')`},
			{"refresh now", `#refresh-now`, `!document.getElementById('loading').hidden`},
		} {
			n := p.loads()
			rec.reset()
			p.click(c.sel)
			feedback(c.what)
			var ok bool
			p.eval(c.check, &ok)
			if !ok {
				t.Errorf("%s: no pending state while it loads: %q", c.what, p.str(`document.getElementById('loading').textContent`))
			}
			p.waitLoads(c.what+" over a slow network", n)
			if p.str(`document.getElementById('loading').hidden`) != "true" || p.str(`document.getElementById('app').className`) != "layout" {
				t.Errorf("%s: still loading after the view was shown", c.what)
			}
			rec.mu.Lock()
			calls := len(rec.reqs)
			rec.mu.Unlock()
			if calls == 0 {
				t.Errorf("%s: no API call", c.what)
			}
		}
		// Retries back off to at most 60 s, and never past the refresh interval (a 10 s
		// view follows the API's return within 10 s); a long Retry-After is capped too.
		for _, every := range []int{0, 1, 10, 60, 300} {
			var worst float64
			p.eval(fmt.Sprintf(`Math.max(...Array.from({length: 40}, (_, i) => window.rollupDashboard.retryDelayS(i + 1, %d, i === 39 ? 3600 : 0)))`, every), &worst)
			limit := 60.0
			if every > 0 {
				limit = min(60, max(float64(every), 2))
			}
			if worst > limit+1e-9 || worst <= 0 {
				t.Errorf("refresh every %d s: a retry waits up to %.1f s, want at most %.0f s", every, worst, limit)
			}
		}
	})

	t.Run("why did it change: compare with an hour before", func(t *testing.T) {
		tick := f.latest.Format(time.RFC3339) // missingLeaf did not report at it
		p := open(t, link+"&node="+selected+"&tick="+url.QueryEscape(tick)+"&diff=1h", 1280, 900)
		var want apiv1.DiffResponse
		getJSON(ctx, t, srv.URL+"/v1/projects/"+project+"/diff?"+url.Values{"from": {f.latest.Add(-time.Hour).Format(time.RFC3339)},
			"to": {tick}, "node": {selected}, "n": {"20"}}.Encode(), f.token, &want)
		dom := p.dom()
		box := findOne(t, dom, "section", "id", "diff")
		if _, hidden := box["hidden"]; hidden || box["data-root-change"] != strconv.FormatInt(want.Root.Change, 10) ||
			box["data-silent-online"] != strconv.FormatInt(want.SilentOnline, 10) {
			t.Fatalf("diff section %v, API root change %d silent %d", box, want.Root.Change, want.SilentOnline)
		}
		if want.SilentTotal != 1 || want.Silent[0].ID != missingLeaf {
			t.Fatalf("API: silent %+v, want %s", want.Silent, missingLeaf)
		}
		findOne(t, dom, "li", "data-silent-id", missingLeaf)
		var rows []string
		p.eval(`[...document.querySelectorAll('#diff tr[data-diff-id]')].map((r) => r.dataset.diffId + '=' + r.dataset.change)`, &rows)
		var wantRows []string
		for _, n := range want.Nodes {
			wantRows = append(wantRows, n.ID+"="+strconv.FormatInt(n.Change, 10))
		}
		if !slices.Equal(rows, wantRows) {
			t.Errorf("diff rows %v, want the API's order %v", rows, wantRows)
		}
		if text := p.str(`document.querySelector('#diff .diff-head').textContent`); !strings.Contains(text, "leaves gone silent (missing reports, not players gone)") {
			t.Errorf("the diff does not tell silence from drops: %q", text)
		}
		if !strings.Contains(p.str("location.hash"), "diff=1h") {
			t.Errorf("the fragment %q does not carry the comparison", p.str("location.hash"))
		}
		// A week before there is no tree: the page says why, and nothing breaks.
		n := p.loads()
		p.eval(`(() => { const s = document.getElementById('diff-with'); s.value = '1w'; s.dispatchEvent(new Event('change')); })()`, nil)
		p.waitLoads("compare with a week before", n)
		if got := p.str(`document.getElementById('diff').textContent`); !strings.Contains(got, "Cannot compare") {
			t.Errorf("a week before (no tree): %q", got)
		}
	})

	t.Run("annotations: tree version, replay, outage and history lost on the chart", func(t *testing.T) {
		for _, e := range []store.Event{
			{Kind: store.EventReplay, Project: project, At: f.first.Add(time.Hour), End: f.first.Add(2 * time.Hour), Title: "rollup replay", Text: "12 ticks"},
			// Recorded for every project, as the bulk writer and the watcher record them.
			{Kind: store.EventOutage, At: f.first.Add(90 * time.Minute), End: f.first.Add(100 * time.Minute), Title: "store outage", Text: "instance a refused writes for 10m0s"},
			{Kind: store.EventHistoryLost, At: f.first.Add(110 * time.Minute), End: f.first.Add(115 * time.Minute), Title: "change stream history lost", Text: "replayed"},
		} {
			if err := store.NewEvents(db).Record(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		p := open(t, link+"&node="+selected, 1280, 900)
		chart := findOne(t, p.dom(), "div", "id", "chart")
		var want apiv1.AnnotationsResponse
		getJSON(ctx, t, srv.URL+"/v1/projects/"+project+"/annotations?"+url.Values{"from": {chart["data-from"]}, "to": {chart["data-to"]}}.Encode(), f.token, &want)
		if len(want.Annotations) != 4 || chart["data-annotations"] != "4" {
			t.Fatalf("API annotations %+v, chart shows %s", want.Annotations, chart["data-annotations"])
		}
		var kinds []string
		p.eval(`[...document.querySelectorAll('#annotations-list li')].map((li) => li.dataset.kind + ' ' + li.dataset.time + ' ' + li.querySelector('.sw').style.background)`, &kinds)
		if !slices.Equal(kinds, []string{"tree " + f.first.Format(time.RFC3339) + " rgb(112, 72, 232)", "replay " + f.first.Add(time.Hour).Format(time.RFC3339) + " rgb(12, 133, 153)",
			"outage " + f.first.Add(90*time.Minute).Format(time.RFC3339) + " rgb(224, 49, 49)",
			"history_lost " + f.first.Add(110*time.Minute).Format(time.RFC3339) + " rgb(217, 72, 15)"}) ||
			p.str(`document.getElementById('annotations').hidden`) != "false" {
			t.Errorf("annotations listed %v", kinds)
		}
	})

	t.Run("accessibility: axe-core in both themes, keyboard on the chart and rows", func(t *testing.T) {
		axe, err := os.ReadFile(filepath.Join("testdata", "axe", "node_modules", "axe-core", "axe.min.js"))
		if err != nil && os.Getenv("CI") != "" {
			t.Fatalf("CI is set but axe-core is missing (cd web/testdata/axe && npm ci): %v", err)
		}
		p := open(t, link+"&node="+selected, 1280, 900)
		if err == nil {
			p.eval(string(axe), nil)
			for _, scheme := range []string{"light", "dark"} {
				p.call("Emulation.setEmulatedMedia", map[string]any{"features": []map[string]string{{"name": "prefers-color-scheme", "value": scheme}}}, nil)
				var bad []string
				p.eval(`axe.run(document, {resultTypes: ['violations']}).then((r) => r.violations
					.filter((v) => v.impact === 'serious' || v.impact === 'critical')
					.map((v) => v.impact + ' ' + v.id + ': ' + v.nodes.slice(0, 3).map((n) => n.target.join(' ') + ' ' + (n.failureSummary || '').split('\n').slice(1, 2).join('')).join(' | ')))`, &bad)
				if len(bad) > 0 {
					t.Errorf("axe-core, %s theme: %d serious or critical violations:\n%s", scheme, len(bad), strings.Join(bad, "\n"))
				}
			}
			p.call("Emulation.setEmulatedMedia", map[string]any{"features": []map[string]string{}}, nil)
		} else {
			t.Logf("axe-core is missing (cd web/testdata/axe && npm ci); CI is unset, so the axe check is skipped: %v", err)
		}
		// The chart takes the focus; the arrows move the point and a live region reads it.
		p.eval(`document.getElementById('chart').focus()`, nil)
		if p.str(`document.activeElement.id`) != "chart" {
			t.Fatal("the chart cannot be focused")
		}
		before := p.str(`document.getElementById('readout').dataset.t`)
		p.key("ArrowLeft")
		after := p.str(`document.getElementById('readout').dataset.t`)
		bt, _ := time.Parse(time.RFC3339, before)
		at, _ := time.Parse(time.RFC3339, after)
		if bt.Sub(at) != tree.DefaultTick {
			t.Errorf("ArrowLeft moved the readout from %s to %s, want one tick back", before, after)
		}
		if live := p.str(`document.getElementById('chart-live').textContent`); !strings.Contains(live, "online") {
			t.Errorf("the live region reads %q", live)
		}
		n := p.loads()
		p.key("Enter")
		p.waitLoads("Enter on the chart picks the tick", n)
		if got := p.str(`document.getElementById('tick').value`); got != after {
			t.Errorf("Enter on the chart: tick %s, want %s", got, after)
		}
		// Every child row is reachable with Tab and Enter selects it.
		var rows, tabbable int
		p.eval(`document.querySelectorAll('#children-body tr[data-child-id]').length`, &rows)
		p.eval(`document.querySelectorAll('#children-body tr[data-child-id][tabindex="0"]').length`, &tabbable)
		if rows == 0 || tabbable != rows {
			t.Errorf("%d of %d child rows take the focus", tabbable, rows)
		}
		p.eval(`document.querySelector('#children-body tr[data-child-id]').focus()`, nil)
		id := p.str(`document.activeElement.dataset.childId`)
		n = p.loads()
		p.key("Enter")
		p.waitLoads("Enter on a row", n)
		if got := p.str(`document.getElementById('summary').dataset.nodeId`); got != id {
			t.Errorf("Enter on row %s selected %s", id, got)
		}
	})

	t.Run("drag to zoom, zoom out, click a tick", func(t *testing.T) {
		p := open(t, link+"&node="+selected, 1280, 900)
		fromBefore, toBefore := secsAttr(t, p, "from"), secsAttr(t, p, "to")
		var box struct{ Left, Top, Width, Height float64 }
		p.eval(`(() => { const o = document.querySelector('#chart .u-over'); o.scrollIntoView({block: 'center'});
			const r = o.getBoundingClientRect(); return {Left: r.left, Top: r.top, Width: r.width, Height: r.height}; })()`, &box)
		y := box.Top + box.Height/2
		x0, x1 := box.Left+box.Width*0.80, box.Left+box.Width*0.95
		n := p.loads()
		p.mouse("mouseMoved", x0, y, 0)
		p.mouse("mousePressed", x0, y, 1)
		for i := 1; i <= 5; i++ {
			p.mouse("mouseMoved", x0+(x1-x0)*float64(i)/5, y, 1)
		}
		p.mouse("mouseReleased", x1, y, 1)
		p.waitLoads("the zoomed view", n)
		from, to := secsAttr(t, p, "from"), secsAttr(t, p, "to")
		wantFrom := fromBefore + int64(0.80*float64(toBefore-fromBefore))
		if from < fromBefore || to > toBefore || math.Abs(float64(from-wantFrom)) > 2*300 || to-from < 3600 || to-from > 5*3600 {
			t.Errorf("zoomed to [%s, %s) from [%s, %s)", iso(from), iso(to), iso(fromBefore), iso(toBefore))
		}
		h := p.str("location.hash")
		if p.str(`document.getElementById('chart').dataset.range`) != "custom" || !strings.Contains(h, "from=") || strings.Contains(h, "tick=") ||
			p.str(`document.querySelectorAll('#ranges [aria-pressed="true"]').length`) != "0" {
			t.Errorf("after the drag: range %s, fragment %s (a drag must not pick a tick)", p.str(`document.getElementById('chart').dataset.range`), h)
		}
		d.checkChart(t, p.dom(), selected, "5m", "", int(to-from)/300, -1, -1)

		n = p.loads()
		p.click("#zoom-out")
		p.waitLoads("the zoomed-out view", n)
		if f2, t2 := secsAttr(t, p, "from"), secsAttr(t, p, "to"); t2-f2 != 2*(to-from) || f2 > from || t2 < to && t2 < toBefore {
			t.Errorf("zoom out of [%s, %s) gave [%s, %s)", iso(from), iso(to), iso(f2), iso(t2))
		}

		// A click (no drag) on a point at 5m picks its tick for the tree.
		n = p.loads()
		p.eval(`(() => { const o = document.querySelector('#chart .u-over'); o.scrollIntoView({block: 'center'});
			const r = o.getBoundingClientRect(); return {Left: r.left, Top: r.top, Width: r.width, Height: r.height}; })()`, &box)
		cx, cy := box.Left+box.Width*0.5, box.Top+box.Height/2
		p.mouse("mouseMoved", cx, cy, 0)
		p.waitFor("the cursor on a point", `document.getElementById('readout').textContent && !document.getElementById('readout').textContent.startsWith('selected')`)
		hovered := p.str(`document.getElementById('readout').dataset.t`)
		p.mouse("mousePressed", cx, cy, 1)
		p.mouse("mouseReleased", cx, cy, 1)
		p.waitLoads("the clicked tick", n)
		if got := p.str(`document.getElementById('tick').value`); got != hovered || !strings.Contains(p.str("location.hash"), "tick="+url.QueryEscape(hovered)) {
			t.Errorf("clicked the point %s: tick picker %s, fragment %s", hovered, got, p.str("location.hash"))
		}
		d.checkTree(t, p.dom(), hovered, selected)
	})

	t.Run("local time and a custom range", func(t *testing.T) {
		p := b.newPage(ctx, t, 1280, 900)
		p.call("Emulation.setTimezoneOverride", map[string]any{"timezoneId": "Asia/Kolkata"}, nil) // UTC+05:30
		p.open(link + "&node=g01&tz=local")
		p.waitLoads("the first view", 0)
		ist := time.FixedZone("IST", 5*3600+1800)
		want := f.newest.In(ist).Format("2006-01-02 15:04") + " UTC+05:30"
		if got := p.str(`document.getElementById('tree-meta').textContent`); !strings.HasPrefix(got, want) {
			t.Errorf("tree meta %q, want the tick in local time %q", got, want)
		}
		if got := p.str(`document.getElementById('readout').textContent`); !strings.Contains(got, want) {
			t.Errorf("readout %q, want %q", got, want)
		}
		// A custom range typed in local time.
		from, to := f.newest.Add(-2*time.Hour), f.newest.Add(-30*time.Minute)
		p.click("#custom-open")
		n := p.loads()
		p.eval(fmt.Sprintf(`(() => { document.getElementById('custom-from').value = %q; document.getElementById('custom-to').value = %q;
			document.querySelector('#custom button[type=submit]').click(); })()`,
			from.In(ist).Format("2006-01-02T15:04"), to.In(ist).Format("2006-01-02T15:04")), nil)
		p.waitLoads("the custom range", n)
		if gf, gt := p.str(`document.getElementById('chart').dataset.from`), p.str(`document.getElementById('chart').dataset.to`); gf != from.Format(time.RFC3339) || gt != to.Format(time.RFC3339) {
			t.Errorf("custom range in local time gave [%s, %s), want [%s, %s)", gf, gt, from.Format(time.RFC3339), to.Format(time.RFC3339))
		}
		if got := p.str(`document.getElementById('range-label').textContent`); got != from.In(ist).Format("2006-01-02 15:04")+" → "+to.In(ist).Format("2006-01-02 15:04")+" UTC+05:30" {
			t.Errorf("range label %q", got)
		}
		d.checkChart(t, p.dom(), "g01", "5m", "", 18, -1, -1)
		// Back to UTC: the same instants, labelled in UTC.
		n = p.loads()
		p.eval(`(() => { const s = document.getElementById('tz'); s.value = 'utc'; s.dispatchEvent(new Event('change')); })()`, nil)
		p.waitLoads("UTC", n)
		if got := p.str(`document.getElementById('range-label').textContent`); got != from.UTC().Format("2006-01-02 15:04")+" → "+to.UTC().Format("2006-01-02 15:04")+" UTC" {
			t.Errorf("range label in UTC %q", got)
		}
	})

	t.Run("range before the tree existed", func(t *testing.T) {
		// The API answers 404 unknown_node for a window no tree version covers; the page shows
		// that range's gaps instead of failing the view.
		from, to := f.first.Add(-3*time.Hour), f.first.Add(-time.Hour)
		p := open(t, link+"&node=g01&cmp=lines&n=2&from="+url.QueryEscape(from.Format(time.RFC3339))+"&to="+url.QueryEscape(to.Format(time.RFC3339)), 1280, 900)
		chart := func(attr string) string { return p.str(`document.getElementById('chart').dataset.` + attr) }
		if chart("points") != "24" || chart("gaps") != "24" || chart("compareIds") == "" || chart("from") != from.Format(time.RFC3339) {
			t.Errorf("chart: %s points, %s gaps, compare %q, from %s", chart("points"), chart("gaps"), chart("compareIds"), chart("from"))
		}
		if !strings.Contains(p.str(`document.getElementById('chart').textContent`), "No data for g01 in this time range") ||
			p.str(`document.getElementById('error').hidden`) != "true" {
			t.Errorf("no-data range: chart %q, error %q", p.str(`document.getElementById('chart').textContent`), p.str(`document.getElementById('error-text').textContent`))
		}
	})

	t.Run("90 days and a year, with the resolution shown", func(t *testing.T) {
		p := open(t, link+"&node="+project+"&range=1y", 1280, 900)
		chart := func(attr string) string { return p.str(`document.getElementById('chart').dataset.` + attr) }
		check := func(rng string, agg string) {
			t.Helper()
			q := url.Values{"node": {project}, "from": {chart("from")}, "to": {chart("to")}, "step": {"1d"}, "agg": {agg}}
			var s apiv1.SeriesResponse
			getJSON(ctx, t, srv.URL+"/v1/projects/"+project+"/series?"+q.Encode(), f.token, &s)
			gaps := 0
			for _, pt := range s.Points {
				if pt.Online == nil {
					gaps++
				}
			}
			if chart("range") != rng || chart("step") != "1d" || chart("tier") != "1d" || chart("agg") != agg ||
				chart("points") != fmt.Sprint(len(s.Points)) || chart("gaps") != fmt.Sprint(gaps) || gaps == len(s.Points) || s.Tier != "1d" {
				t.Errorf("%s: chart range %s step %s tier %s agg %s, %s points %s gaps; API: %d points, %d gaps, tier %s",
					rng, chart("range"), chart("step"), chart("tier"), chart("agg"), chart("points"), chart("gaps"), len(s.Points), gaps, s.Tier)
			}
			if got := p.str(`document.getElementById('resolution').textContent`); got != "Resolution: one point per UTC day, from daily summaries (UTC days)" {
				t.Errorf("%s: resolution %q", rng, got)
			}
		}
		check("1y", "max")
		n := p.loads()
		p.click(`#ranges button[data-range="90d"]`)
		p.waitLoads("90 days", n)
		check("90d", "max")
		n = p.loads()
		p.eval(`(() => { const s = document.getElementById('agg'); s.value = 'min'; s.dispatchEvent(new Event('change')); })()`, nil)
		p.waitLoads("min per day", n)
		check("90d", "min")
		if h := p.str("location.hash"); !strings.Contains(h, "range=90d") || !strings.Contains(h, "agg=min") {
			t.Errorf("fragment %s", h)
		}
		p.screenshot(filepath.Join(artifacts, "dashboard-90d.png"))
		n = p.loads()
		p.click(`#ranges button[data-range="24h"]`)
		p.waitLoads("24 hours", n)
		if got := p.str(`document.getElementById('resolution').textContent`); got != "Resolution: one point per 5 minutes, from 5-minute totals" || chart("tier") != "5m" {
			t.Errorf("24h: resolution %q, tier %s", got, chart("tier"))
		}
	})

	t.Run("compare children and CSV", func(t *testing.T) {
		p := open(t, link+"&node="+project+"&range=2d&step=1h&agg=mean&cmp=lines&n=2", 1280, 900)
		var tr apiv1.TreeResponse
		getJSON(ctx, t, srv.URL+"/v1/projects/"+project+"/tree", f.token, &tr)
		groups := slices.DeleteFunc(slices.Clone(tr.Nodes), func(n apiv1.TreeNode) bool { return n.Parent != project })
		slices.SortFunc(groups, func(a, b apiv1.TreeNode) int {
			if a.Online != b.Online {
				return int(b.Online - a.Online)
			}
			return strings.Compare(a.ID, b.ID)
		})
		wantIDs := groups[0].ID + "," + groups[1].ID
		chart := func(attr string) string { return p.str(`document.getElementById('chart').dataset.` + attr) }
		if chart("compare") != "lines" || chart("compareIds") != wantIDs || chart("step") != "1h" || chart("agg") != "mean" {
			t.Errorf("compare %s of %s at %s %s; want lines of %s at 1h mean", chart("compare"), chart("compareIds"), chart("step"), chart("agg"), wantIDs)
		}
		q := url.Values{"from": {chart("from")}, "to": {chart("to")}, "step": {"1h"}, "agg": {"mean"}}
		series := map[string]apiv1.SeriesResponse{}
		for _, id := range []string{project, groups[0].ID, groups[1].ID} {
			q.Set("node", id)
			var s apiv1.SeriesResponse
			getJSON(ctx, t, srv.URL+"/v1/projects/"+project+"/series?"+q.Encode(), f.token, &s)
			series[id] = s
		}
		// The readout has each child's value at the selected (latest) tick's hour.
		at := f.newest.Truncate(time.Hour)
		for _, g := range groups[:2] {
			got := p.str(`document.querySelector('#readout .kid[data-child-id="` + g.ID + `"]').dataset.online`)
			if want := valueAt(series[g.ID], at); got != want {
				t.Errorf("readout of %s: %q, API says %q at %s", g.ID, got, want, at.Format(time.RFC3339))
			}
		}

		// Stacked: same children, same readout.
		n := p.loads()
		p.eval(`(() => { const s = document.getElementById('cmp'); s.value = 'stacked'; s.dispatchEvent(new Event('change')); })()`, nil)
		p.waitLoads("stacked", n)
		if chart("compare") != "stacked" || chart("compareIds") != wantIDs || !strings.Contains(p.str("location.hash"), "cmp=stacked") {
			t.Errorf("stacked: %s %s, fragment %s", chart("compare"), chart("compareIds"), p.str("location.hash"))
		}
		p.screenshot(filepath.Join(artifacts, "dashboard-compare.png"))

		// The CSV is the series shown, exactly as the API answers them.
		dir := t.TempDir()
		p.allowDownloads(dir)
		skip := b.numEvents()
		p.click("#csv")
		name, data := p.waitDownload(skip, dir)
		wantName := fmt.Sprintf("rollup-%s-%s-%s-%s-1h-mean.csv", project, project, stamp(chart("from")), stamp(chart("to")))
		if name != wantName {
			t.Errorf("CSV file name %q, want %q", name, wantName)
		}
		rows, err := csv.NewReader(strings.NewReader(string(data))).ReadAll()
		if err != nil {
			t.Fatalf("CSV: %v\n%s", err, data)
		}
		want := [][]string{{"t", "node", "online", "reported", "expected", "complete"}}
		for _, id := range []string{project, groups[0].ID, groups[1].ID} {
			for _, pt := range series[id].Points {
				online := ""
				if pt.Online != nil {
					online = strconv.FormatFloat(*pt.Online, 'f', -1, 64)
				}
				want = append(want, []string{pt.T.Format(time.RFC3339), id, online, strconv.FormatInt(pt.Reported, 10),
					strconv.FormatInt(pt.Expected, 10), strconv.FormatBool(pt.Complete)})
			}
		}
		if len(rows) != len(want) || len(want) != 1+3*48 {
			t.Fatalf("CSV has %d rows, want %d (3 series of 48 hours)", len(rows), len(want))
		}
		for i := range want {
			if !csvRowEqual(rows[i], want[i]) {
				t.Errorf("CSV row %d: %q, API says %q", i, rows[i], want[i])
			}
		}
	})

	t.Run("shared link keeps the view, without the token", func(t *testing.T) {
		tick := f.latest.Add(-(ticks - 1 - halfTick) * tree.DefaultTick).Format(time.RFC3339)
		view := "&node=g02-s0001&tick=" + url.QueryEscape(tick) + "&range=2d&step=1h&agg=last&tz=local&cmp=stacked&n=3&refresh=off"
		p := open(t, link+view, 1280, 900)
		controls := func(p *page) string {
			return p.str(`['tick', 'step', 'agg', 'tz', 'cmp', 'cmp-n', 'refresh'].map((id) => id + '=' + document.getElementById(id).value).join(' ') +
				' range=' + document.querySelector('#ranges [aria-pressed="true"]').dataset.range +
				' node=' + document.getElementById('summary').dataset.nodeId + ' ' +
				['seriesNode', 'from', 'to', 'step', 'agg', 'compare', 'compareIds', 'tz'].map((k) => k + '=' + document.getElementById('chart').dataset[k]).join(' ')`)
		}
		got := controls(p)
		for _, want := range []string{"tick=" + tick + " ", "step=1h ", "agg=last ", "tz=local ", "cmp=stacked ", "cmp-n=3 ", "refresh=off ",
			"range=2d ", "node=g02-s0001 ", "seriesNode=g02-s0001 ", "step=1h ", "agg=last ", "compare=stacked ", "compareIds=g02-s0001-p"} {
			if !strings.Contains(got, want) {
				t.Errorf("loaded link: %s lacks %q", got, want)
			}
		}
		// Share: the link has the view but not the token, unless asked.
		p.click("#share-open")
		shared := p.str(`document.getElementById('share-link').value`)
		if strings.Contains(shared, "token") || strings.Contains(shared, f.token) || !strings.Contains(shared, "cmp=stacked") ||
			shared != srv.URL+"/"+p.str("location.hash") {
			t.Errorf("shared link %q (address %q)", shared, p.str("location.href"))
		}
		p.click("#share-token")
		if withToken := p.str(`document.getElementById('share-link').value`); !strings.Contains(withToken, "token="+url.QueryEscape(f.token)) {
			t.Errorf("with the token asked for: %q", withToken)
		}
		p.click("#share-token")
		// Locked to the time range: absolute from, to and tick, the same data tomorrow.
		p.click("#share-lock")
		locked := p.str(`document.getElementById('share-link').value`)
		from, to := p.str(`document.getElementById('chart').dataset.from`), p.str(`document.getElementById('chart').dataset.to`)
		if strings.Contains(locked, "range=") || !strings.Contains(locked, "from="+url.QueryEscape(from)) || !strings.Contains(locked, "to="+url.QueryEscape(to)) ||
			!strings.Contains(locked, "tick="+url.QueryEscape(tick)) {
			t.Errorf("locked link %q, want from=%s to=%s tick=%s and no relative range", locked, from, to, tick)
		}
		p.click("#share-lock")

		// Opened elsewhere: the link asks for a token, then shows the same view.
		q := b.newPage(ctx, t, 1280, 900)
		q.open(shared)
		q.waitFor("the login form", `document.body.dataset.state === 'login'`)
		if why := q.str(`document.getElementById('login-reason').textContent`); !strings.Contains(why, "This link carries no token") ||
			!strings.Contains(why, `project "`+project+`"`) || !strings.Contains(why, "--read-only") {
			t.Errorf("a link without a token says %q, want what to do", why)
		}
		q.eval(`document.getElementById('token-input').value = `+strconv.Quote(f.token), nil)
		q.click(`#login button[type=submit]`)
		q.waitLoads("the shared view", 0)
		// The range is relative (2d back from now): across an hour boundary between the two
		// pages its ends move, so they are compared apart, by the window's length.
		window := regexp.MustCompile(` from=(\S+) to=(\S+)`)
		again := controls(q)
		if window.ReplaceAllString(again, "") != window.ReplaceAllString(got, "") {
			t.Errorf("the shared link shows\n%s\nthe sharer saw\n%s", again, got)
		}
		span := func(c string) time.Duration {
			m := window.FindStringSubmatch(c)
			if m == nil {
				return 0
			}
			from, err1 := time.Parse(time.RFC3339, m[1])
			to, err2 := time.Parse(time.RFC3339, m[2])
			if err1 != nil || err2 != nil {
				return 0
			}
			return to.Sub(from)
		}
		if sa, sg := span(again), span(got); sa == 0 || sa != sg {
			t.Errorf("the shared link's window is %v long, the sharer's %v", sa, sg)
		}
		if q.str("location.hash") != p.str("location.hash") {
			t.Errorf("fragment %s, sharer's %s", q.str("location.hash"), p.str("location.hash"))
		}
	})

	t.Run("phone at 390 px", func(t *testing.T) {
		p := b.newPage(ctx, t, 390, 844)
		p.resize(390, 844, true)
		p.call("Emulation.setTouchEmulationEnabled", map[string]any{"enabled": true, "maxTouchPoints": 5}, nil)
		p.open(link + "&node=" + selected)
		p.waitLoads("the first view", 0)
		// Drag-zoom needs a mouse: a touch-only phone is offered pinch-zoom instead.
		if hint := p.str(`document.querySelector('#legend [data-hint="chart"]').textContent + ' ' + document.querySelector('#chart .u-over').title`); strings.Contains(hint, "drag") || strings.Contains(hint, "Drag") ||
			!strings.Contains(hint, "pinch: zoom in or out") {
			t.Errorf("a touch-only phone's zoom hint: %q", hint)
		}
		// Pinch: two fingers moved from 60 to 180 px apart narrow the range to a third around
		// the same time; moved back together, they widen it three times.
		rangeShown := func() (time.Time, time.Time) {
			c := findOne(t, p.dom(), "div", "id", "chart")
			a, err1 := time.Parse(time.RFC3339, c["data-from"])
			b, err2 := time.Parse(time.RFC3339, c["data-to"])
			if err1 != nil || err2 != nil {
				t.Fatalf("chart range %q–%q", c["data-from"], c["data-to"])
			}
			return a, b
		}
		pinch := func(what string, apart, to float64) {
			t.Helper()
			x, y := p.centre("#chart .u-over")
			n := p.loads()
			p.touch("touchStart", [2]float64{x - apart/2, y}, [2]float64{x + apart/2, y})
			for i := 1; i <= 4; i++ {
				d := apart + (to-apart)*float64(i)/4
				p.touch("touchMove", [2]float64{x - d/2, y}, [2]float64{x + d/2, y})
			}
			p.touch("touchEnd")
			p.waitLoads(what, n)
		}
		near := func(a, b time.Time) bool { return a.Sub(b).Abs() <= 2*tree.DefaultTick }
		from0, to0 := rangeShown()
		pinch("pinched apart", 60, 180)
		from1, to1 := rangeShown()
		mid0, mid1 := from0.Add(to0.Sub(from0)/2), from1.Add(to1.Sub(from1)/2)
		if got := findOne(t, p.dom(), "div", "id", "chart")["data-range"]; got != "custom" ||
			(to1.Sub(from1)-to0.Sub(from0)/3).Abs() > 2*tree.DefaultTick || !near(mid0, mid1) {
			t.Errorf("pinched apart: %s–%s (%s), was %s–%s; want a third of it around the same time", from1, to1, got, from0, to0)
		}
		pinch("pinched together", 180, 60)
		from2, to2 := rangeShown()
		if (to2.Sub(from2)-3*to1.Sub(from1)).Abs() > 2*tree.DefaultTick || to2.After(time.Now().Add(tree.DefaultTick)) {
			t.Errorf("pinched together: %s–%s, was %s–%s; want three times as long, not past now", from2, to2, from1, to1)
		}
		// Every control is wholly on screen (the tick picker was cut off).
		var cut []string
		p.eval(`[...document.querySelectorAll('#controls select, #controls button, .chart-opts select, .chart-opts button, #ranges button, #diff-with')]
			.filter((e) => !e.closest('[hidden]')).map((e) => [e.id || e.dataset.range || e.tagName, e.getBoundingClientRect()])
			.filter(([, r]) => r.width > 0 && (r.left < 0 || r.right > document.documentElement.clientWidth + 0.5)).map(([id, r]) => id + ' ' + Math.round(r.left) + '–' + Math.round(r.right))`, &cut)
		if len(cut) > 0 {
			t.Errorf("controls cut off at 390 px: %v", cut)
		}
		var over []string
		p.eval(`(() => {
			const w = document.documentElement.clientWidth, out = [];
			if (document.documentElement.scrollWidth > w) out.push('page scrollWidth ' + document.documentElement.scrollWidth);
			for (const e of document.querySelectorAll('body *')) {
				const r = e.getBoundingClientRect();
				if (r.width === 0 || getComputedStyle(e).visibility === 'hidden' || e.closest('[hidden]')) continue;
				if (r.right > w + 0.5 && !e.closest('.table-wrap')) out.push(e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className + ' right ' + Math.round(r.right));
			}
			return out; })()`, &over)
		if len(over) > 0 {
			t.Errorf("at 390 px these stick out of the page:\n%s", strings.Join(over, "\n"))
		}
		// Both the chart and the tree can be reached, and nothing covers them.
		for _, sel := range []string{"#chart .u-over", `#tree li[data-node-id="g01"] > .row`, "#ranges", "#tick"} {
			x, y := p.centre(sel)
			var hit bool
			p.eval(fmt.Sprintf(`(() => { const e = document.elementFromPoint(%f, %f); const t = document.querySelector(%q); return !!e && (t === e || t.contains(e)); })()`, x, y, sel), &hit)
			if !hit || x < 0 || x > 390 {
				t.Errorf("%s at (%.0f, %.0f) is covered or off screen", sel, x, y)
			}
		}
		p.eval(`window.scrollTo(0, 0)`, nil)
		p.screenshot(filepath.Join(artifacts, "dashboard-390.png"))
		n := p.loads()
		p.click(`#tree li[data-node-id="g01"] > .row`)
		p.waitLoads("g01 tapped", n)
		if got := p.str(`document.getElementById('summary').dataset.nodeId`); got != "g01" {
			t.Errorf("tapping g01 in the tree selected %s", got)
		}
	})

	t.Run("screenshot", func(t *testing.T) {
		p := open(t, link+"&node="+selected, 1280, 900)
		p.screenshot(filepath.Join(artifacts, "dashboard.png"))
		if st, err := os.Stat(filepath.Join(artifacts, "dashboard.png")); err != nil || st.Size() < 10_000 {
			t.Fatalf("screenshot: %v (size %d)", err, sizeOf(st))
		}
	})

	t.Run("damaged tick", func(t *testing.T) {
		tick := f.first.Add(damagedTick * tree.DefaultTick)
		res, err := db.Collection(store.CountsCollection).UpdateOne(ctx, bson.D{{Key: "id", Value: "g01"}, {Key: "timestamp", Value: tick}},
			bson.D{{Key: "$inc", Value: bson.D{{Key: store.FieldOnline, Value: 1000}}}})
		if err != nil || res.MatchedCount != 1 {
			t.Fatalf("damage g01 at %s: %v %+v", tick, err, res)
		}
		p := open(t, link+"&node=g01&tick="+url.QueryEscape(tick.Format(time.RFC3339)), 1280, 900)
		dom := p.dom()
		for id, want := range map[string]string{"g01": "true", project: "true", "g02": "false", "g01-s0001": "false"} {
			if got := findOne(t, dom, "li", "data-node-id", id)["data-mismatch"]; got != want {
				t.Errorf("%s: data-mismatch=%s, want %s", id, got, want)
			}
		}
		note := p.str(`document.getElementById('node-mismatch').hidden ? '' : document.getElementById('node-mismatch').textContent`)
		win := "--project " + project + " --from " + tick.Format(time.RFC3339) + " --to " + tick.Add(tree.DefaultTick).Format(time.RFC3339)
		if !strings.Contains(note, "Not the sum of its children") || !strings.Contains(note, "rollup verify "+win) || !strings.Contains(note, "rollup replay "+win) {
			t.Errorf("no warning on the damaged node: %q", note)
		}
		if p.str(`document.getElementById('tree-mismatch').textContent`) == "" || p.str(`document.getElementById('tree-mismatch').hidden`) != "false" {
			t.Error("the tree does not say that totals disagree")
		}
	})
}

// poll waits until cond is true, checking it every 20 ms for at most waitLimit.
func poll(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// secsAttr is the chart's data attribute (from or to) in unix seconds.
func secsAttr(t *testing.T, p *page, attr string) int64 {
	t.Helper()
	v := p.str(`document.getElementById('chart').dataset.` + attr)
	ts, err := time.Parse(time.RFC3339, v)
	if err != nil {
		t.Fatalf("chart data-%s=%q: %v", attr, v, err)
	}
	return ts.Unix()
}

func iso(s int64) string { return time.Unix(s, 0).UTC().Format(time.RFC3339) }

// stamp is the compact time of the CSV's file name.
func stamp(rfc string) string {
	ts, _ := time.Parse(time.RFC3339, rfc)
	return ts.UTC().Format("20060102T1504Z")
}

// valueAt is the online of s's point at ts as the page writes it ("" for no data).
func valueAt(s apiv1.SeriesResponse, ts time.Time) string {
	for _, p := range s.Points {
		if p.T.Equal(ts) {
			if p.Online == nil {
				return ""
			}
			return strconv.FormatFloat(*p.Online, 'f', -1, 64)
		}
	}
	return "(no point)"
}

// csvRowEqual compares a CSV row with the API's values; online may differ in the last digit
// of a mean, as JavaScript and Go print the same float64.
func csvRowEqual(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		if i == 2 && got[i] != want[i] {
			a, errA := strconv.ParseFloat(got[i], 64)
			b, errB := strconv.ParseFloat(want[i], 64)
			if errA != nil || errB != nil || a != b {
				return false
			}
			continue
		}
		if got[i] != want[i] {
			return false
		}
	}
	return true
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
	if chart["data-series-node"] != node || chart["data-step"] != step || chart["data-agg"] != agg {
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
	if gaps == len(sr.Points) {
		t.Errorf("the series shows %d gaps of %d points: the seeded data is not in it", gaps, len(sr.Points))
	}
	for attr, want := range map[string]int{"data-points": len(sr.Points), "data-gaps": gaps, "data-incomplete": inc} {
		if chart[attr] != strconv.Itoa(want) {
			t.Errorf("chart %s=%q, API says %d", attr, chart[attr], want)
		}
	}
}

// fixture is the seeded project.
type fixture struct {
	db            *mongo.Database
	trees         *treedb.Store
	built         *tree.Tree
	token         string
	first, latest time.Time // the first and the latest tick seeded
	newest        time.Time // the latest tick, including those added by addTick
}

// seed creates the project's read-only token, its tree, the leaves and (by recompute.Replay) the
// parents.
func seed(ctx context.Context, t *testing.T, db *mongo.Database) *fixture {
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
			docs = append(docs, leafDoc(leaf.ID, leaf.Type, ts, onlineOf(i, j)))
		}
	}
	docs = append(docs, leafDoc(orphanLeaf, tree.TypeProcess, latest, 7))
	if _, err := db.Collection(store.CountsCollection).InsertMany(ctx, docs); err != nil {
		t.Fatalf("insert leaves: %v", err)
	}
	st, err := recompute.Replay(ctx, db, treedb.NewCache(trees), project, first, latest.Add(tree.DefaultTick), recompute.ReplayOptions{})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if st.Ticks != ticks-3 || st.Orphans != 1 {
		t.Fatalf("replay recomputed %d ticks with %d orphans, want %d and 1", st.Ticks, st.Orphans, ticks-3)
	}
	return &fixture{db: db, trees: trees, built: built, token: token, first: first, latest: latest, newest: latest}
}

func onlineOf(i, j int) int64 { return int64(8 + (j*7+i*3)%11 + (i/6)%3) }

// addTick reports every leaf at ts and rolls the tick up, as a new tick arriving.
func (f *fixture) addTick(ctx context.Context, t *testing.T, ts time.Time) {
	t.Helper()
	var docs []any
	for j, leaf := range f.built.Leaves() {
		docs = append(docs, leafDoc(leaf.ID, leaf.Type, ts, onlineOf(ticks, j)))
	}
	if _, err := f.db.Collection(store.CountsCollection).InsertMany(ctx, docs); err != nil {
		t.Fatalf("insert leaves: %v", err)
	}
	if _, err := recompute.Replay(ctx, f.db, treedb.NewCache(f.trees), project, ts, ts.Add(tree.DefaultTick), recompute.ReplayOptions{}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	f.newest = ts
}

func leafDoc(id, typ string, ts time.Time, online int64) bson.D {
	return bson.D{
		{Key: store.FieldID, Value: id},
		{Key: store.FieldType, Value: typ},
		{Key: store.FieldTimestamp, Value: ts},
		{Key: store.FieldProject, Value: project},
		{Key: store.FieldOnline, Value: online},
		{Key: store.FieldVersion, Value: ts.UnixNano() + 1},
		{Key: store.FieldSubmissionID, Value: "seed"},
		{Key: store.FieldWrittenAt, Value: time.Now().UTC()},
	}
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

// requestLog records the requests the browser made, and answers the browser's API calls
// with 503 while failing is set (a store failover, as the API answers it), counting them.
type requestLog struct {
	mu       sync.Mutex
	reqs     []string    // "METHOD URI auth=<Authorization header>"
	failedAt []time.Time // when each 503 was answered
	failing  atomic.Bool
	failed   atomic.Int64
	// delay holds every browser API answer back this long (a slow network or store).
	delay atomic.Int64
}

func (l *requestLog) failedTimes() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.failedAt)
}

func (l *requestLog) reset() {
	l.mu.Lock()
	l.reqs = nil
	l.mu.Unlock()
}

// fromBrowser tells the browser's requests from the test's own (Go's client).
func fromBrowser(r *http.Request) bool { return r.Header.Get("User-Agent") != "Go-http-client/1.1" }

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fromBrowser(r) {
			l.mu.Lock()
			l.reqs = append(l.reqs, r.Method+" "+r.RequestURI+" auth="+r.Header.Get("Authorization"))
			l.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (l *requestLog) faulty(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := time.Duration(l.delay.Load()); d > 0 && fromBrowser(r) {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		if l.failing.Load() && fromBrowser(r) {
			l.mu.Lock()
			l.failedAt = append(l.failedAt, time.Now())
			l.failed.Add(1)
			l.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(apiv1.ErrorResponse{Error: apiv1.ErrUnavailable,
				Message: "the store is unavailable or too slow; retry after Retry-After", RetryAfterSeconds: 1, ResendSafe: true})
			return
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
		"data-nodata":   strconv.FormatBool(n.Reported == 0),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s of %s: %s=%q, API says %q", where, n.ID, k, got[k], v)
		}
	}
}

func digits(s string) string { return strings.ReplaceAll(s, ",", "") }

// artifactsDir returns the package's artifacts directory (gitignored), creating it.
func artifactsDir(t *testing.T) string {
	t.Helper()
	out, err := filepath.Abs("artifacts")
	if err != nil {
		t.Fatal(err)
	}
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
