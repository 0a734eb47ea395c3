package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The deployment checks need the metric names a PromQL expression (a rule's, a Grafana
// panel's) reads, to compare them with what rollup exports. promqlMetricNames is a small
// lexer for that, not a parser: it skips strings, label matchers ({...}), ranges ([...]),
// numbers and durations, keywords, grouping label lists (by/on/... (...)), function and
// aggregation names, and Grafana variables ($x, ${x}); every other identifier is a metric
// name. Whether an expression parses is promtool's job (TestDashboardQueriesParse).

// promqlAggregations are PromQL's aggregation operators: a name followed by by/without or (.
var promqlAggregations = []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio"}

// promqlGrouping are the keywords followed by a parenthesized list of label names.
var promqlGrouping = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// promqlKeywords are the other keywords and literals that are not metric names.
var promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentByte(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(s string, i int) int {
	for i < len(s) && strings.IndexByte(" \t\r\n", s[i]) >= 0 {
		i++
	}
	return i
}

// skipString returns the index after the string literal starting at s[i] (a quote).
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at %d", i)
}

// skipBalanced returns the index after the bracket opening at s[i] and its match, skipping
// strings inside.
func skipBalanced(s string, i int) (int, error) {
	open := s[i]
	closer := map[byte]byte{'{': '}', '[': ']', '(': ')'}[open]
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '"', '\'', '`':
			end, err := skipString(s, j)
			if err != nil {
				return 0, err
			}
			j = end - 1
		case open:
			depth++
		case closer:
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("unbalanced %q at %d", open, i)
}

// promqlMetricNames returns the metric names expr reads, sorted and distinct.
func promqlMetricNames(expr string) ([]string, error) {
	var out []string
	s := expr
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case strings.IndexByte(" \t\r\n", c) >= 0:
			i++
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(s, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{' || c == '[':
			end, err := skipBalanced(s, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '$': // a Grafana variable: $name or ${name}
			i++
			if i < len(s) && s[i] == '{' {
				end, err := skipBalanced(s, i)
				if err != nil {
					return nil, err
				}
				i = end
				continue
			}
			for i < len(s) && isIdentByte(s[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			// A number or a duration (5m, 1e-3, 0x1f, 1h30m).
			for i < len(s) && (isIdentByte(s[i]) || s[i] == '.' ||
				(s[i] == '-' || s[i] == '+') && (s[i-1] == 'e' || s[i-1] == 'E')) {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdentByte(s[j]) {
				j++
			}
			word := s[i:j]
			next := skipSpace(s, j)
			i = j
			lower := strings.ToLower(word)
			switch {
			case slices.Contains(promqlGrouping, lower):
				if next < len(s) && s[next] == '(' {
					end, err := skipBalanced(s, next)
					if err != nil {
						return nil, err
					}
					i = end
				}
			case slices.Contains(promqlKeywords, lower):
			case slices.Contains(promqlAggregations, lower) && next < len(s) && (s[next] == '(' || strings.HasPrefix(s[next:], "by") || strings.HasPrefix(s[next:], "without")):
			case next < len(s) && s[next] == '(': // a function
			default:
				if !slices.Contains(out, word) {
					out = append(out, word)
				}
			}
		case strings.IndexByte("()+-*/%^=!<>,@", c) >= 0:
			i++
		default:
			return nil, fmt.Errorf("unexpected %q at %d", c, i)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return nil, errors.New("no metric name")
	}
	return out, nil
}

func TestPromQLMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want string // space-separated names, or "error"
	}{
		{`up`, "up"},
		{`up{job="rollup"} == 0`, "up"},
		{`sum by (reason) (rate(rollup_ingest_rejections_total{reason!="unavailable"}[10m])) / scalar(sum(rate(rollup_ingest_requests_total[10m]))) > 0.05`,
			"rollup_ingest_rejections_total rollup_ingest_requests_total"},
		{`max by (project) (rollup_project_online unless on (instance) (rollup_totals_stale == 1)) < 0.8 * max by (project) (rollup_project_online offset 1d)`,
			"rollup_project_online rollup_totals_stale"},
		{`label_replace(rollup_watcher_leader == 1, "checkpoint", "$1", "id", "(.+)")`, "rollup_watcher_leader"},
		{`histogram_quantile(0.99, sum by (le) (rate(rollup_bulk_batch_ops_bucket{instance=~"$instance"}[$__rate_interval])))`, "rollup_bulk_batch_ops_bucket"},
		{`time() - rollup_totals_last_success_timestamp_seconds{instance=~"${instance}"}`, "rollup_totals_last_success_timestamp_seconds"},
		{`sum without (instance) (a) and on() group_left (x) b offset -5m`, "a b"},
		{`count_values("v", x) > bool 1e-3 and y[5m:1m]`, "x y"},
		{`max(x) by (project)`, "x"},
		{`{__name__="x"}`, "error"},
		{`rate(x{a="}`, "error"},
		{`sum(x`, "x"}, // unbalanced parentheses are promtool's to find
		{`x # comment`, "error"},
	}
	for _, tc := range tests {
		got, err := promqlMetricNames(tc.expr)
		s := strings.Join(got, " ")
		if err != nil {
			s = "error"
		}
		if s != tc.want {
			t.Errorf("promqlMetricNames(%q) = %q (%v), want %q", tc.expr, s, err, tc.want)
		}
	}
}

// FuzzPromQLMetricNames: the lexer never panics, and what it returns are identifiers.
func FuzzPromQLMetricNames(f *testing.F) {
	for _, s := range []string{`up`, `sum by (a) (rate(x{b="c"}[5m]))`, `x offset 1d`, `"\"`, `${v} + $v`, `{`, `1e-3`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		names, err := promqlMetricNames(expr)
		if err != nil {
			return
		}
		for _, n := range names {
			if n == "" || !isIdentStart(n[0]) {
				t.Fatalf("%q gives name %q", expr, n)
			}
			for i := range len(n) {
				if !isIdentByte(n[i]) {
					t.Fatalf("%q gives name %q", expr, n)
				}
			}
		}
	})
}
