package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/internal/hist"
	"github.com/gameops/rollup/internal/settings"
	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/metrics"
	"github.com/gameops/rollup/metrics/totals"
	"github.com/gameops/rollup/retention"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/watcher"
)

// The observability checks: the Prometheus rules and their unit tests (promtool), the
// Prometheus and Grafana services of docker-compose.yml and the files they mount, and the
// metric names every rule and dashboard query reads, against rollup's real registry.

// ruleTestFiles are the unit tests of rules.yml, in prometheusDir.
var ruleTestFiles = []string{"rules_test.yml", ruleTestsDays}

const (
	prometheusDir  = "../../deploy/prometheus"
	grafanaDir     = "../../deploy/grafana"
	alertsDoc      = "../../docs/alerts.md"
	makefilePath   = "../../Makefile"
	rollupJob      = "rollup"
	prometheusPort = "9090"
	grafanaDSUID   = "rollup-prometheus"
	// ruleTestsDays holds the rule tests that span days, evaluated every 5 minutes rather
	// than every minute (a week at 1 minute took promtool 25 CPU s under go test -race).
	ruleTestsDays = "rules_test_days.yml"
	// dashboardDS is the data source every dashboard query names: the dashboard's own
	// "datasource" variable, so that the JSON imports into any Grafana.
	dashboardDS = "${datasource}"
)

// runbookBase is how every alert's runbook_url starts: the external label runbook_base_url
// of the Prometheus evaluating it, or this repository's docs/alerts.md on GitHub.
const runbookBase = "{{ with $externalLabels.runbook_base_url }}{{ . }}{{ else }}https://github.com/gameops/rollup/blob/main/docs/alerts.md{{ end }}"

// secondsExpr matches a query whose values are seconds: a _seconds gauge, histogram or sum
// (not a rate of a _total or _count), or an age computed from a timestamp.
var secondsExpr = regexp.MustCompile(`_seconds(_bucket|_sum)?\b|time\(\) -`)

// dashboardInputs are the data sources every dashboard asks for when imported (__inputs), each
// with the dashboard variable of type datasource that defaults to it and that every query of
// that plugin names as its uid: Prometheus (the first variable) and the rollup API through the
// Infinity plugin (the "rollup records" annotations, grafana_records_test.go).
var dashboardInputs = []struct {
	input, pluginID, variable string
}{
	{"DS_PROMETHEUS", "prometheus", "datasource"},
	{"DS_ROLLUP_API", infinityPlugin, "rollup_api"},
}

// checkDashboardPortable checks what makes a dashboard JSON import into any Grafana: no data
// source uid but a dashboard variable of the data source's plugin (or Grafana's built-in one)
// anywhere in it, an __inputs entry per data source (dashboardInputs), and per input a
// variable of type datasource defaulting to it, the Prometheus one first.
func checkDashboardPortable(t *testing.T, base string, data []byte) {
	t.Helper()
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", base, err)
	}
	varOf := map[string]string{"grafana": "-- Grafana --"}
	for _, in := range dashboardInputs {
		varOf[in.pluginID] = "${" + in.variable + "}"
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if ds, ok := x["datasource"].(map[string]any); ok {
				uid, _ := ds["uid"].(string)
				typ, _ := ds["type"].(string)
				if want, ok := varOf[typ]; !ok || uid != want {
					t.Errorf("%s: %s.datasource is %s uid %q: want a data source variable (%v)", base, path, typ, uid, varOf)
				}
			}
			for k, e := range x {
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk("$", doc)
	var d struct {
		Inputs []struct {
			Name, Type, PluginID string
		} `json:"__inputs"`
		Templating struct {
			List []struct {
				Name, Type string
				Query      any `json:"query"`
				Current    struct {
					Value any `json:"value"`
				} `json:"current"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", base, err)
	}
	if len(d.Inputs) != len(dashboardInputs) {
		t.Errorf("%s: __inputs %+v, want %d data source inputs", base, d.Inputs, len(dashboardInputs))
	}
	for i, want := range dashboardInputs {
		if i >= len(d.Inputs) || d.Inputs[i].Name != want.input || d.Inputs[i].Type != "datasource" || d.Inputs[i].PluginID != want.pluginID {
			t.Errorf("%s: __inputs %+v, want input %d a %s data source input %s", base, d.Inputs, i, want.pluginID, want.input)
		}
		found := false
		for j, v := range d.Templating.List {
			if v.Name != want.variable {
				continue
			}
			found = true
			if v.Type != "datasource" || v.Query != want.pluginID || v.Current.Value != "${"+want.input+"}" || (i == 0 && j != 0) {
				t.Errorf("%s: variable %+v, want %s (type datasource, query %s, default ${%s})", base, v, want.variable, want.pluginID, want.input)
			}
		}
		if !found {
			t.Errorf("%s: no variable %s (type datasource, query %s, default ${%s})", base, want.variable, want.pluginID, want.input)
		}
	}
	if l := d.Templating.List; len(l) == 0 || l[0].Name != dashboardInputs[0].variable {
		t.Errorf("%s: the first variable is %+v, want %s", base, l, dashboardInputs[0].variable)
	}
}

// prometheusMetrics are the series Prometheus itself adds to every scrape that rules and
// dashboards may read.
var prometheusMetrics = []string{"up"}

// captureRegisterer keeps what metrics.Register registers, to describe it.
type captureRegisterer struct{ cs []prometheus.Collector }

func (c *captureRegisterer) Register(x prometheus.Collector) error {
	c.cs = append(c.cs, x)
	return nil
}
func (c *captureRegisterer) MustRegister(xs ...prometheus.Collector) {
	c.cs = append(c.cs, xs...)
}
func (c *captureRegisterer) Unregister(prometheus.Collector) bool { return false }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// exportedMetrics returns every metric name rollup's /metrics can show (histograms as their
// _bucket, _sum and _count series), and the rollup_* families: the collector's descriptions,
// gathered through metrics.NewRegistry with a source for every series, so the test fails if
// a new series has no fake here.
func exportedMetrics(t *testing.T) (names map[string]bool, families []string) {
	t.Helper()
	now := time.Now()
	h := hist.New(1, 2).Snapshot()
	src := metrics.Sources{
		API: func() api.Stats {
			return api.Stats{Requests: map[int]int64{200: 1}, Rejections: map[string]int64{"invalid_item": 1}, Items: map[string]int64{"applied": 1},
				Reads: []api.ReadStat{{Route: "tree", Code: 200, Latency: h}}}
		},
		Bulk: func() bulk.Stats {
			return bulk.Stats{Batches: 1, BatchOps: h, Items: map[bulk.Outcome]int64{bulk.OutcomeApplied: 1},
				Retries: map[store.Class]int64{}, Failures: map[store.Class]int64{store.ClassUnknownOutcome: 1}}
		},
		Watcher: func() watcher.Stats { return watcher.Stats{Events: 1, LastEventTime: now} },
		Progress: func() watcher.Progress {
			return watcher.Progress{Recompute: h, Streams: []watcher.StreamProgress{{Checkpoint: "watcher", Position: now, CheckpointSavedAt: now}}}
		},
		Leadership: func() []watcher.PartitionState {
			return []watcher.PartitionState{{ID: "watcher", Leader: true, Term: 1}}
		},
		Components: func() []status.State { return []status.State{{Component: "bulk", Ready: true, Since: now}} },
		Totals: func() totals.Snapshot {
			return totals.Snapshot{Tick: now, LastSuccess: now, Projects: []totals.Project{{Name: "p", Groups: []totals.Group{{ID: "g"}}}}}
		},
		Retention: func() retention.Stats {
			return retention.Stats{Leader: true, Passes: 1, LastPass: now, Deleted: map[store.Tier]int64{store.TierLeaves: 1},
				Tiers: map[store.Tier]retention.TierStats{store.TierLeaves: {Projects: 1, Horizon: now, Lag: time.Second, Blocked: 1}}}
		},
	}
	capture := &captureRegisterer{}
	if err := metrics.Register(capture, src); err != nil {
		t.Fatal(err)
	}
	described := map[string]bool{}
	for _, c := range capture.cs {
		ch := make(chan *prometheus.Desc, 100)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read the name of %s", d)
			}
			described[m[1]] = true
		}
	}
	reg := metrics.NewRegistry()
	if err := metrics.Register(reg, src); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names = map[string]bool{}
	for _, mf := range mfs {
		name := mf.GetName()
		names[name] = true
		switch mf.GetType().String() {
		case "HISTOGRAM":
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case "SUMMARY":
			names[name+"_sum"], names[name+"_count"] = true, true
		}
		if strings.HasPrefix(name, "rollup_") {
			families = append(families, name)
		}
		delete(described, name)
	}
	if len(described) > 0 {
		t.Fatalf("series described but not gathered (give them a source in exportedMetrics): %v", described)
	}
	if len(families) < 40 || !names["go_goroutines"] || !names["rollup_watcher_recompute_seconds_bucket"] {
		t.Fatalf("exported metrics look incomplete: %d rollup families", len(families))
	}
	for _, m := range prometheusMetrics {
		names[m] = true
	}
	slices.Sort(families)
	return names, families
}

// checkMetricNames checks that expr parses with promqlMetricNames and reads only exported
// metrics; it returns the names read.
func checkMetricNames(t *testing.T, where, expr string, exported map[string]bool) []string {
	t.Helper()
	names, err := promqlMetricNames(expr)
	if err != nil {
		t.Errorf("%s: %v in %q", where, err, expr)
		return nil
	}
	for _, n := range names {
		if !exported[n] {
			t.Errorf("%s: metric %s is not exported by rollup (query %q)", where, n, expr)
		}
	}
	return names
}

// promtoolPath returns the promtool to run. Without one the test is skipped, unless CI is set:
// then it fails, as CI installs the pinned promtool (make tools).
func promtoolPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		home, _ := os.UserHomeDir()
		gopath = filepath.Join(home, "go")
	}
	p := filepath.Join(filepath.SplitList(gopath)[0], "bin", "promtool")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if os.Getenv("CI") == "" {
		t.Skip("promtool is missing (install it with: make tools); CI is unset, so skipping")
	}
	t.Fatal("CI is set but promtool is missing: make tools installs the pinned version")
	return ""
}

// promtool runs promtool with args in dir and returns its output; a non-zero exit fails the test.
func promtool(t *testing.T, bin, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// TestPrometheusRules runs the rules' unit tests and checks the Prometheus config (and the
// rule files it loads) with promtool.
func TestPrometheusRules(t *testing.T) {
	bin := promtoolPath(t)
	out := promtool(t, bin, prometheusDir, append([]string{"test", "rules"}, ruleTestFiles...)...)
	if strings.Count(out, "SUCCESS") != len(ruleTestFiles) {
		t.Fatalf("promtool test rules, want SUCCESS for each of %v:\n%s", ruleTestFiles, out)
	}
	for _, conf := range []string{"prometheus.yml", "prometheus-sharded.yml"} {
		out = promtool(t, bin, prometheusDir, "check", "config", conf)
		if !strings.Contains(out, "rules.yml") {
			t.Fatalf("promtool check config %s did not check rules.yml:\n%s", conf, out)
		}
	}
}

// rulesFile is the part of a Prometheus rules file the checks read.
type rulesFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// ruleTestFile is the part of a promtool rule test file the checks read.
type ruleTestFile struct {
	RuleFiles          []string `yaml:"rule_files"`
	EvaluationInterval string   `yaml:"evaluation_interval"`
	Tests              []struct {
		Name       string `yaml:"name"`
		AlertTests []struct {
			EvalTime  string           `yaml:"eval_time"`
			Alertname string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// markdownAnchors returns the GitHub anchors of a Markdown file's headings.
func markdownAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range strings.Split(string(data), "\n") {
		title, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " ")
		if !ok || !strings.HasPrefix(l, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// TestAlertRules checks the rules without promtool: every rule reads only metrics rollup
// exports; every alert has a severity (critical or warning), a summary and a runbook_url
// (under the configurable base) whose anchor is a heading of
// docs/alerts.md; the rule test files (ruleTestFiles) have, for every alert, a case where it
// fires and one where it does not; and every alert tested at a coarser evaluation interval
// than a minute holds (`for:`) a multiple of that interval, so the coarse steps fire it when
// minute steps would.
func TestAlertRules(t *testing.T) {
	exported, _ := exportedMetrics(t)
	var rules rulesFile
	readYAML(t, filepath.Join(prometheusDir, "rules.yml"), &rules)
	anchors := markdownAnchors(t, alertsDoc)
	fires, quiet := map[string]int{}, map[string]int{}
	// steps: the evaluation intervals each alert is tested at.
	steps := map[string]map[time.Duration]bool{}
	for _, file := range ruleTestFiles {
		var tests ruleTestFile
		readYAML(t, filepath.Join(prometheusDir, file), &tests)
		if !slices.Equal(tests.RuleFiles, []string{"rules.yml"}) {
			t.Errorf("%s tests %v, want rules.yml", file, tests.RuleFiles)
		}
		step, err := time.ParseDuration(cmp.Or(tests.EvaluationInterval, "1m"))
		if err != nil {
			t.Fatalf("%s: evaluation_interval: %v", file, err)
		}
		if len(tests.Tests) == 0 {
			t.Errorf("%s has no tests", file)
		}
		for _, tc := range tests.Tests {
			for _, a := range tc.AlertTests {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname]++
				} else {
					quiet[a.Alertname]++
				}
				if steps[a.Alertname] == nil {
					steps[a.Alertname] = map[time.Duration]bool{}
				}
				steps[a.Alertname][step] = true
			}
		}
	}
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			checkMetricNames(t, "rule "+name, r.Expr, exported)
			if r.Alert == "" {
				continue
			}
			if alerts[name] {
				t.Errorf("alert %s is defined twice", name)
			}
			alerts[name] = true
			if !slices.Contains([]string{"critical", "warning"}, r.Labels["severity"]) {
				t.Errorf("%s: severity %q, want critical or warning", name, r.Labels["severity"])
			}
			runbook, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbookBase+"#")
			if r.Annotations["summary"] == "" || !ok || !anchors[runbook] || r.Annotations["runbook"] != "" {
				t.Errorf("%s: summary %q, runbook_url %q: want a summary and %s#<a heading of docs/alerts.md>",
					name, r.Annotations["summary"], r.Annotations["runbook_url"], runbookBase)
			}
			if fires[name] == 0 || quiet[name] == 0 {
				t.Errorf("%s: %v have %d firing and %d not-firing cases, want at least one of each", name, ruleTestFiles, fires[name], quiet[name])
			}
			checkForFitsSteps(t, name, r.For, steps[name])
		}
	}
	for name := range steps {
		if !alerts[name] {
			t.Errorf("%v test alert %s, which rules.yml does not define", ruleTestFiles, name)
		}
	}
	if len(alerts) < 10 {
		t.Errorf("%d alerts, want the dip, agents-missing, stale, store and rejection alerts", len(alerts))
	}
}

// prometheusConfig is the part of prometheus.yml the compose check reads; decoding with
// KnownFields fails on any other key.
type prometheusConfig struct {
	Global struct {
		ScrapeInterval     string `yaml:"scrape_interval"`
		EvaluationInterval string `yaml:"evaluation_interval"`
	} `yaml:"global"`
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// mountedPath returns the repository path a service sees at path through a bind mount.
func mountedPath(s composeService, path string) (string, bool) {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], "./") {
			continue
		}
		if rel, ok := strings.CutPrefix(path, parts[1]); ok && (rel == "" || strings.HasPrefix(rel, "/")) {
			return filepath.Join(repoRoot, parts[0], rel), true
		}
	}
	return "", false
}

// hasVolumeAt reports whether a named volume is mounted at path.
func hasVolumeAt(s composeService, path string) bool {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && !strings.HasPrefix(parts[0], "./") && parts[1] == path {
			return true
		}
	}
	return false
}

// flagArg returns the value of --name=value in args.
func flagArg(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// promDays parses a Prometheus duration of whole days or weeks ("15d", "2w") into days.
func promDays(s string) (int, error) {
	var n int
	var unit string
	if _, err := fmt.Sscanf(s, "%d%s", &n, &unit); err != nil {
		return 0, fmt.Errorf("duration %q: %w", s, err)
	}
	switch unit {
	case "d":
		return n, nil
	case "w":
		return 7 * n, nil
	}
	return 0, fmt.Errorf("duration %q: want days (d) or weeks (w)", s)
}

// promtoolVersion returns the pinned promtool module version of the Makefile (v0.316.0) and
// the Prometheus release it is (v3.16.0).
func promtoolVersion(t *testing.T) (module, release string) {
	t.Helper()
	data, err := os.ReadFile(makefilePath)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PROMTOOL_VERSION := v0\.(\d+)\.(\d+)$`).FindStringSubmatch(string(data))
	if m == nil {
		t.Fatal("Makefile: no PROMTOOL_VERSION := v0.3XX.Y")
	}
	var minor int
	_, _ = fmt.Sscan(m[1], &minor)
	return "v0." + m[1] + "." + m[2], fmt.Sprintf("v%d.%d.%s", minor/100, minor%100, m[2])
}

// servePorts returns "service:port" of every compose service in exactly the given profiles
// that runs rollup serve: each stack's Prometheus scrapes its own stack's instances.
func servePorts(t *testing.T, c composeFile, profiles []string) []string {
	t.Helper()
	var out []string
	for name, s := range c.Services {
		if s.Image != rollupImage || len(s.Command) == 0 || s.Command[0] != "serve" || !slices.Equal(s.Profiles, profiles) {
			continue
		}
		for _, kv := range os.Environ() { // only the container's environment counts
			if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, settings.EnvPrefix) {
				t.Setenv(k, "")
				_ = os.Unsetenv(k)
			}
		}
		for k, v := range dockerfileEnv(t) {
			t.Setenv(k, v)
		}
		for k, v := range s.Environment {
			t.Setenv(k, v)
		}
		var sink strings.Builder
		cfg, err := parseServe(&env{stdout: &sink, stderr: &sink}, s.Command[1:])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, port, _ := strings.Cut(cfg.Listen, ":")
		out = append(out, name+":"+port)
	}
	slices.Sort(out)
	return out
}

// composePrometheuses are the compose file's Prometheus services, one per stack: each runs in
// its stack's profiles and scrapes exactly that stack's rollup serve instances. One Prometheus
// for both would see targets of a stack that is off (RollupInstanceDown) and mix the two
// stacks' project "demo" in the rules' max by (project).
var composePrometheuses = []struct {
	service  string
	profiles []string
}{
	{"prometheus", nil},
	{shardedPrefix + "prometheus", []string{shardedProfile}},
}

// TestComposePrometheus: each stack's prometheus service runs the release of the pinned
// promtool, keeps more than a week (the weekly drop alert), and its config — read through its
// bind mount — loads the tested rules file and scrapes every rollup serve instance of its
// stack, and only those, under job "rollup" (the rules' job).
func TestComposePrometheus(t *testing.T) {
	c := loadCompose(t)
	for _, p := range composePrometheuses {
		t.Run(p.service, func(t *testing.T) {
			prom, ok := c.Services[p.service]
			if !ok {
				t.Fatalf("no %s service", p.service)
			}
			if !slices.Equal(prom.Profiles, p.profiles) {
				t.Errorf("%s: profiles %q, want %q (its stack's)", p.service, prom.Profiles, p.profiles)
			}
			checkComposePrometheus(t, prom, servePorts(t, c, p.profiles))
		})
	}
}

// checkComposePrometheus checks one Prometheus service, which must scrape the targets want.
func checkComposePrometheus(t *testing.T, prom composeService, want []string) {
	t.Helper()
	_, release := promtoolVersion(t)
	if prom.Image != "prom/prometheus:"+release {
		t.Errorf("prometheus image %s, want prom/prometheus:%s (the release of the promtool the rules are tested with)", prom.Image, release)
	}
	days := 15 // Prometheus's default retention
	if v, ok := flagArg(prom.Command, "--storage.tsdb.retention.time"); ok {
		d, err := promDays(v)
		if err != nil {
			t.Error(err)
		}
		days = d
	}
	if days < 8 {
		t.Errorf("prometheus keeps %d days, want at least 8 (RollupPlayersDropWeekly reads a week back)", days)
	}
	if p, _ := flagArg(prom.Command, "--storage.tsdb.path"); p == "" || !hasVolumeAt(prom, p) {
		t.Errorf("prometheus stores in %q, which is not a named volume", p)
	}
	confPath, ok := flagArg(prom.Command, "--config.file")
	if !ok {
		t.Fatal("prometheus: no --config.file")
	}
	repoConf, ok := mountedPath(prom, confPath)
	if !ok {
		t.Fatalf("prometheus: %s is not under a bind mount", confPath)
	}
	data, err := os.ReadFile(repoConf)
	if err != nil {
		t.Fatal(err)
	}
	var conf prometheusConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&conf); err != nil {
		t.Fatalf("%s: %v", repoConf, err)
	}
	tested := false
	for _, rf := range conf.RuleFiles {
		p := rf
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(confPath), rf) // Prometheus resolves them from the config's directory
		}
		repo, ok := mountedPath(prom, p)
		if !ok {
			t.Errorf("rule file %s (%s) is not under a bind mount", rf, p)
			continue
		}
		if _, err := os.Stat(repo); err != nil {
			t.Errorf("rule file %s: %v", rf, err)
		}
		tested = tested || filepath.Clean(repo) == filepath.Clean(filepath.Join(prometheusDir, "rules.yml"))
	}
	if !tested {
		t.Errorf("%s rule_files %v do not load deploy/prometheus/rules.yml", repoConf, conf.RuleFiles)
	}
	var jobs []string
	for _, sc := range conf.ScrapeConfigs {
		jobs = append(jobs, sc.JobName)
		if sc.JobName != rollupJob {
			continue
		}
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("job %s scrapes %s, rollup serves /metrics", sc.JobName, sc.MetricsPath)
		}
		var targets []string
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
		slices.Sort(targets)
		if !slices.Equal(targets, want) {
			t.Errorf("job %s scrapes %v, want every rollup serve service of its stack %v", rollupJob, targets, want)
		}
	}
	if !slices.Contains(jobs, rollupJob) {
		t.Errorf("scrape jobs %v: want %q, the job the rules select", jobs, rollupJob)
	}
	if len(want) < 2 {
		t.Errorf("rollup serve services %v, want two", want)
	}
}

// dashboardQuery is one PromQL query of a dashboard: a panel's target or a variable's.
type dashboardQuery struct {
	where string // file and panel
	expr  string
}

// composeGrafanas are the compose file's Grafana services, one per stack, each with its
// stack's Prometheus as the dashboards' data source.
var composeGrafanas = []struct {
	service, prometheus string
}{
	{"grafana", "prometheus"},
	{shardedPrefix + "grafana", shardedPrefix + "prometheus"},
}

// grafanaDashboards returns the dashboards the grafana service provisions, checking the
// provisioning on the way: a Prometheus data source with the dashboards' uid at the
// prometheus service (its URL expanded with the service's environment, as Grafana does), and
// a file provider whose path is the bind-mounted dashboards folder.
func grafanaDashboards(t *testing.T, grafana, prometheus string) (files []string, queries []dashboardQuery) {
	t.Helper()
	c := loadCompose(t)
	g, ok := c.Services[grafana]
	if !ok {
		t.Fatalf("no %s service", grafana)
	}
	if g.DependsOn[prometheus].Condition == "" {
		t.Errorf("%s does not depend on %s", grafana, prometheus)
	}
	if !slices.Equal(g.Profiles, c.Services[prometheus].Profiles) {
		t.Errorf("%s: profiles %q, %s's are %q", grafana, g.Profiles, prometheus, c.Services[prometheus].Profiles)
	}
	prov, ok := mountedPath(g, "/etc/grafana/provisioning")
	if !ok {
		t.Fatalf("%s: /etc/grafana/provisioning is not bind-mounted", grafana)
	}
	if _, err := os.Stat(prov); err != nil {
		t.Fatal(err)
	}
	// Data sources.
	dsFiles, _ := filepath.Glob(filepath.Join(prov, "datasources", "*.yml"))
	found := false
	for _, f := range dsFiles {
		var ds struct {
			APIVersion  int `yaml:"apiVersion"`
			Datasources []struct {
				Name, UID, Type, Access, URL string
				IsDefault                    bool `yaml:"isDefault"`
				Editable                     bool `yaml:"editable"`
			} `yaml:"datasources"`
		}
		readYAML(t, f, &ds)
		for _, d := range ds.Datasources {
			if d.UID != grafanaDSUID {
				continue
			}
			found = true
			url := os.Expand(d.URL, func(k string) string {
				v, ok := g.Environment[k]
				if !ok {
					t.Errorf("%s: data source URL %s names $%s, which %s's environment does not set", f, d.URL, k, grafana)
				}
				return v
			})
			host, port, _ := strings.Cut(strings.TrimPrefix(url, "http://"), ":")
			p, ok := c.Services[host]
			if d.Type != "prometheus" || !ok || host != prometheus || port != prometheusPort || !strings.HasPrefix(p.Image, "prom/prometheus:") {
				t.Errorf("%s: data source %s: type %s url %s (%s), want prometheus at http://%s:%s", grafana, d.UID, d.Type, d.URL, url, prometheus, prometheusPort)
			}
			if v, ok := flagArg(p.Command, "--web.listen-address"); ok && !strings.HasSuffix(v, ":"+prometheusPort) {
				t.Errorf("prometheus listens on %s, the data source says %s", v, prometheusPort)
			}
		}
	}
	if !found {
		t.Fatalf("no provisioned data source with uid %s in %v", grafanaDSUID, dsFiles)
	}
	// Dashboard providers.
	provFiles, _ := filepath.Glob(filepath.Join(prov, "dashboards", "*.yml"))
	for _, f := range provFiles {
		var dp struct {
			Providers []struct {
				Name    string `yaml:"name"`
				Type    string `yaml:"type"`
				Options struct {
					Path string `yaml:"path"`
				} `yaml:"options"`
			} `yaml:"providers"`
		}
		readYAML(t, f, &dp)
		for _, p := range dp.Providers {
			dir, ok := mountedPath(g, p.Options.Path)
			if p.Type != "file" || !ok {
				t.Errorf("%s: provider %s reads %s, which is not bind-mounted", f, p.Name, p.Options.Path)
				continue
			}
			js, _ := filepath.Glob(filepath.Join(dir, "*.json"))
			files = append(files, js...)
		}
	}
	if len(files) < 2 {
		t.Fatalf("provisioned dashboards %v, want the service and the players dashboards", files)
	}
	if home := g.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != "" {
		if p, ok := mountedPath(g, home); !ok || !slices.Contains(files, p) {
			t.Errorf("home dashboard %s is not a provisioned dashboard", home)
		}
	}
	uids := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			UID        string            `json:"uid"`
			Title      string            `json:"title"`
			Panels     []json.RawMessage `json:"panels"`
			Templating struct {
				List []struct {
					Name       string         `json:"name"`
					Type       string         `json:"type"`
					Datasource map[string]any `json:"datasource"`
					Definition string         `json:"definition"`
				} `json:"list"`
			} `json:"templating"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		base := filepath.Base(f)
		checkDashboardPortable(t, base, data)
		if d.UID == "" || d.Title == "" || uids[d.UID] != "" {
			t.Errorf("%s: uid %q (also in %q) title %q: want a unique uid and a title", base, d.UID, uids[d.UID], d.Title)
		}
		uids[d.UID] = base
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			if v.Datasource["uid"] != dashboardDS {
				t.Errorf("%s: variable %s uses data source %v", base, v.Name, v.Datasource)
			}
			inner, ok := strings.CutPrefix(v.Definition, "label_values(")
			i := strings.LastIndexByte(inner, ',')
			if !ok || i < 0 {
				t.Errorf("%s: variable %s: %q, want label_values(metric, label)", base, v.Name, v.Definition)
				continue
			}
			queries = append(queries, dashboardQuery{base + " variable " + v.Name, inner[:i]})
		}
		var walk func([]json.RawMessage)
		walk = func(panels []json.RawMessage) {
			for _, raw := range panels {
				var p struct {
					Title       string            `json:"title"`
					Type        string            `json:"type"`
					Datasource  map[string]any    `json:"datasource"`
					Panels      []json.RawMessage `json:"panels"`
					FieldConfig struct {
						Defaults struct {
							Unit string `json:"unit"`
						} `json:"defaults"`
						Overrides []struct {
							Matcher struct {
								ID      string `json:"id"`
								Options string `json:"options"`
							} `json:"matcher"`
							Properties []struct {
								ID    string `json:"id"`
								Value any    `json:"value"`
							} `json:"properties"`
						} `json:"overrides"`
					} `json:"fieldConfig"`
					Options struct {
						Legend struct {
							Calcs []string `json:"calcs"`
						} `json:"legend"`
					} `json:"options"`
					Targets []struct {
						Expr       string         `json:"expr"`
						RefID      string         `json:"refId"`
						Datasource map[string]any `json:"datasource"`
					} `json:"targets"`
				}
				if err := json.Unmarshal(raw, &p); err != nil {
					t.Fatalf("%s: panel: %v", base, err)
				}
				walk(p.Panels)
				if p.Type == "row" {
					continue
				}
				where := base + " panel " + p.Title
				if len(p.Targets) == 0 {
					t.Errorf("%s: no query", where)
				}
				if p.Datasource["uid"] != dashboardDS {
					t.Errorf("%s: data source %v, want uid %s", where, p.Datasource, dashboardDS)
				}
				if p.Type == "timeseries" && !slices.Equal(p.Options.Legend.Calcs, []string{"min", "max", "mean", "lastNotNull"}) {
					t.Errorf("%s: legend calculations %v, want min, max, mean and last", where, p.Options.Legend.Calcs)
				}
				unitOf := map[string]string{}
				for _, o := range p.FieldConfig.Overrides {
					for _, pr := range o.Properties {
						if o.Matcher.ID == "byFrameRefID" && pr.ID == "unit" {
							unitOf[o.Matcher.Options], _ = pr.Value.(string)
						}
					}
				}
				for _, tg := range p.Targets {
					if tg.Datasource != nil && tg.Datasource["uid"] != dashboardDS {
						t.Errorf("%s %s: data source %v, want uid %s", where, tg.RefID, tg.Datasource, dashboardDS)
					}
					unit, ok := unitOf[tg.RefID]
					if !ok {
						unit = p.FieldConfig.Defaults.Unit
					}
					if secondsExpr.MatchString(tg.Expr) != (unit == "s") {
						t.Errorf("%s %s: unit %q for %q: a query of seconds (and only one) wants unit s, by default or a per-series override", where, tg.RefID, unit, tg.Expr)
					}
					queries = append(queries, dashboardQuery{where + " " + tg.RefID, tg.Expr})
				}
			}
		}
		walk(d.Panels)
	}
	return files, queries
}

// TestComposeGrafana: the dashboards are valid JSON provisioned with the Prometheus data
// source's uid, their queries read only metrics rollup exports, and together they show
// every rollup series.
func TestComposeGrafana(t *testing.T) {
	for _, g := range composeGrafanas[1:] { // the first is checked below
		t.Run(g.service, func(t *testing.T) {
			files, _ := grafanaDashboards(t, g.service, g.prometheus)
			first, _ := grafanaDashboards(t, composeGrafanas[0].service, composeGrafanas[0].prometheus)
			if !slices.Equal(files, first) {
				t.Errorf("%s provisions %v, %s %v: want the same dashboards", g.service, files, composeGrafanas[0].service, first)
			}
		})
	}
	exported, families := exportedMetrics(t)
	_, queries := grafanaDashboards(t, composeGrafanas[0].service, composeGrafanas[0].prometheus)
	used := map[string]bool{}
	for _, q := range queries {
		for _, n := range checkMetricNames(t, q.where, q.expr, exported) {
			used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")] = true
			used[n] = true
		}
	}
	for _, f := range families {
		if !used[f] {
			t.Errorf("no dashboard shows %s", f)
		}
	}
}

// TestDashboardQueriesParse parses every dashboard query with promtool's PromQL parser
// (Grafana's $__rate_interval replaced by a duration): each query is the expression of a
// recording rule named after its index, and one `promtool check rules` parses them all (one
// promtool process per query took 8 CPU s).
func TestDashboardQueriesParse(t *testing.T) {
	bin := promtoolPath(t)
	_, queries := grafanaDashboards(t, composeGrafanas[0].service, composeGrafanas[0].prometheus)
	if len(queries) == 0 {
		t.Fatal("the dashboards have no queries")
	}
	r := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	type group struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	}
	g := group{Name: "dashboard-queries"}
	var where strings.Builder
	for i, q := range queries {
		g.Rules = append(g.Rules, rule{Record: fmt.Sprintf("dashboard_query_%d", i), Expr: r.Replace(q.expr)})
		fmt.Fprintf(&where, "dashboard_query_%d: %s: %s\n", i, q.where, q.expr)
	}
	data, err := yaml.Marshal(map[string][]group{"groups": {g}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "check", "rules", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("SUCCESS: %d rules found", len(queries))) {
		t.Fatalf("promtool check rules of the dashboard queries: %v\n%s\nthe queries:\n%s", err, out, where.String())
	}
}

// checkForFitsSteps checks that an alert's hold (`for:`, "" for none) is a multiple of every
// evaluation interval above a minute it is tested at: a 12m hold evaluated every 5m would fire
// at 15m, and a test written for 5m steps would then pass against a rule that fires late.
func checkForFitsSteps(t *testing.T, name, hold string, steps map[time.Duration]bool) {
	t.Helper()
	d, err := time.ParseDuration(cmp.Or(hold, "0s"))
	if err != nil {
		t.Errorf("%s: for %q: %v", name, hold, err)
		return
	}
	for step := range steps {
		if step > time.Minute && d%step != 0 {
			t.Errorf("%s: for %s is tested with %s evaluation steps, want a multiple of them", name, hold, step)
		}
	}
}
