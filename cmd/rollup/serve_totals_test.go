package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/internal/app"
	"github.com/gameops/rollup/metrics/totals"
)

func TestParseServeTotals(t *testing.T) {
	file := writeFile(t, "totals.yaml", "totals-groups: 'a, b'\ntotals-grace: 90s\n")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(app.Totals) bool
		wantErr []string
	}{
		{"defaults", nil, nil, func(c app.Totals) bool {
			o := c.Options()
			return c.Enabled() && o.Grace == totals.DefaultGrace && o.Interval == totals.DefaultInterval &&
				o.MaxProjects == totals.DefaultMaxProjects && o.MaxGroups == totals.DefaultMaxGroups && o.GroupProjects == nil
		}, nil},
		{"file", []string{"--config", file}, nil, func(c app.Totals) bool {
			return slices.Equal(c.Options().GroupProjects, []string{"a", "b"}) && c.Options().Grace == 90*time.Second
		}, nil},
		{"env over file", []string{"--config", file}, map[string]string{"ROLLUP_TOTALS_GROUPS": "*", "ROLLUP_TOTALS_MAX_GROUPS": "7"}, func(c app.Totals) bool {
			return slices.Equal(c.Options().GroupProjects, []string{totals.AllProjects}) && c.Options().MaxGroups == 7
		}, nil},
		{"no grace", []string{"--totals-grace", "0s"}, nil, func(c app.Totals) bool { return c.Options().Grace < 0 }, nil},
		{"off", []string{"--totals-max-projects", "0"}, nil, func(c app.Totals) bool { return !c.Enabled() }, nil},
		{"bad project", nil, map[string]string{"ROLLUP_TOTALS_GROUPS": "a,b c"}, nil,
			[]string{"--totals-groups (from environment variable ROLLUP_TOTALS_GROUPS)", "invalid project"}},
		{"negative grace", []string{"--totals-grace", "-1m"}, nil, nil, []string{"--totals-grace (from flag)", "want 0 to 24h0m0s"}},
		{"refresh too fast", []string{"--totals-refresh", "10ms"}, nil, nil, []string{"--totals-refresh (from flag)"}},
		{"too many projects", []string{"--totals-max-projects", "1000000"}, nil, nil, []string{"--totals-max-projects (from flag)"}},
		{"no groups", []string{"--totals-max-groups", "0"}, nil, nil, []string{"--totals-max-groups (from flag)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			c, err := parseServe(&env{stdout: &out, stderr: &out, lookupEnv: mapEnv(tc.env)}, tc.args)
			if tc.wantErr == nil {
				if err != nil || !tc.check(c.Totals) {
					t.Fatalf("got %+v, %v", c.Totals, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; config %+v", c.Totals)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// lineBuffer is an io.Writer whose lines a test reads while serve writes them.
type lineBuffer struct {
	w     *io.PipeWriter
	lines chan string
}

func newLineBuffer() *lineBuffer {
	r, w := io.Pipe()
	b := &lineBuffer{w: w, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case b.lines <- sc.Text():
			default: // nobody reads any more
			}
		}
		close(b.lines)
	}()
	return b
}

func (b *lineBuffer) Write(p []byte) (int, error) { return b.w.Write(p) }

// TestServeExportsTotals runs serve --demo in process and scrapes /metrics from outside, as
// Prometheus does, until the demo project's last complete tick is exported complete: the
// simulated agents report every leaf, so its completeness is 1 and its total positive. With
// --demo-agent the agents are package agent's (spooled backfill drained at start, then a
// sample every 15 s), and the result must be the same. The agents backfill 2 past ticks,
// not the default 36: the last complete tick is among them whenever the test starts, and
// three hours of backfill took 16 of the test's 18 CPU s under -race.
func TestServeExportsTotals(t *testing.T) {
	// Each serve --demo has its own in-memory store on a free port: nothing shared, and the
	// two waits for a complete tick overlap. The test itself stays serial: its CPU would run
	// beside the serve fault tests and their latency bounds.
	t.Run("agentsim", func(t *testing.T) { t.Parallel(); checkServeExportsTotals(t) })
	t.Run("demo-agent", func(t *testing.T) { t.Parallel(); checkServeExportsTotals(t, "--demo-agent") })
}

func checkServeExportsTotals(t *testing.T, extra ...string) {
	ctx, cancel := context.WithCancel(context.Background())
	stdout := newLineBuffer()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, &env{stdout: stdout, stderr: io.Discard}, append([]string{"serve", "--demo", "--demo-backfill", "2", "--listen", "127.0.0.1:0",
			"--log-level", "error", "--totals-refresh", "1s", "--totals-groups", "demo"}, extra...))
		_ = stdout.w.Close()
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("serve: %v", err)
		}
	}()
	var base string
	deadline := time.Now().Add(min(testTimeLeft(t), 2*time.Minute))
	for base == "" {
		select {
		case l, ok := <-stdout.lines:
			if !ok {
				t.Fatal("serve stopped before listening")
			}
			base, _ = strings.CutPrefix(l, "rollup API: ")
		case <-time.After(time.Until(deadline)):
			t.Fatal("serve did not print its address")
		}
	}
	var body string
	for {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		body = string(b)
		if strings.Contains(body, `rollup_project_completeness_ratio{project="demo"} 1`+"\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo project was not exported complete:\n%s", grepLines(body, "rollup_project_", "rollup_totals_"))
		}
		tm := time.NewTimer(100 * time.Millisecond) // a bounded poll interval, not a wait for a signal
		<-tm.C
	}
	lines := grepLines(body, "rollup_project_", "rollup_group_", "rollup_totals_")
	for _, want := range []string{
		`rollup_project_leaves_expected{project="demo"} 200`,
		`rollup_project_leaves_reported{project="demo"} 200`,
		`rollup_group_leaves_expected{group="g01",project="demo"} 50`,
		`rollup_totals_stale 0`,
	} {
		if !strings.Contains(lines, want+"\n") {
			t.Errorf("missing %q in\n%s", want, lines)
		}
	}
	var online float64
	if _, err := fmt.Sscanf(grepLines(body, `rollup_project_online{project="demo"}`), `rollup_project_online{project="demo"} %g`, &online); err != nil || online <= 0 {
		t.Errorf("demo total %v (%v):\n%s", online, err, lines)
	}
}

// grepLines returns body's lines that start with one of prefixes.
func grepLines(body string, prefixes ...string) string {
	var b strings.Builder
	for _, l := range strings.Split(body, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				b.WriteString(l + "\n")
				break
			}
		}
	}
	return b.String()
}

// testTimeLeft is what is left of the test's deadline, or a generous default.
func testTimeLeft(t *testing.T) time.Duration {
	if d, ok := t.Deadline(); ok {
		return time.Until(d) - 5*time.Second
	}
	return 5 * time.Minute
}
