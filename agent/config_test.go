package agent

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const goodConfig = `url: http://rollup:8080
token: tok
project: mygame
spool: {dir: /var/lib/rollup-agent}
sources:
  - name: prom
    prometheus: {url: "http://127.0.0.1:9100/metrics", metric: players, label: server}
    leaves: [a, b]
  - name: cmd
    type: server
    exec: {command: [/bin/counts, --json]}
    leaves: [c]
  - name: file
    file: {path: /run/online.json}
    leaves: [d]
`

// TestParseFile: the defaults a valid file gets, and every invalid file's error naming its key.
func TestParseFile(t *testing.T) {
	f, err := ParseFile("agent.yaml", []byte(goodConfig))
	if err != nil {
		t.Fatal(err)
	}
	if f.Tick != 5*time.Minute || f.Interval != 5*time.Minute || f.Window != 24*time.Hour || f.Spool.MaxMB != DefaultSpoolMB ||
		f.Sources[0].Type != DefaultLeafType || f.Sources[1].Type != "server" || f.Sources[0].Prometheus.Timeout != DefaultSourceTimeout ||
		f.Sources[1].Exec.Timeout != DefaultSourceTimeout || f.Sources[2].File.MaxAge != 10*time.Minute {
		t.Errorf("defaults: %+v", f)
	}
	st, err := f.Build()
	if err != nil || len(st.Sources) != 3 || st.Client.MaxAttempts != 1 || st.Client.Token != "tok" || st.Types["cmd"] != "server" {
		t.Errorf("Build: %+v, %v", st, err)
	}

	tests := []struct{ name, edit, want string }{
		{"unknown key", "colour: blue\n", "field colour not found"},
		{"no url", "url: ''\n", "url: is required"},
		{"bad url", "url: rollup:8080\n", "url: want an http:// or https:// URL"},
		{"both tokens", "token_file: /x\n", "token: token and token_file exclude each other"},
		{"no project", "project: ''\n", "project: is required"},
		{"interval above the tick", "interval: 10m\n", "interval: must be from 1s to the tick"},
		{"window below a tick", "window: 1m\n", "window: must be at least one tick"},
		{"no spool dir", "spool: {max_mb: 3}\n", "spool.dir: is required"},
		{"negative spool bound", "spool: {dir: /x, max_mb: -1}\n", "spool.max_mb: must be at least 1"},
		{"bad duration", "tick: soon\n", "soon"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFile("agent.yaml", []byte(replaceKeys(goodConfig, tc.edit)))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "agent.yaml") {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
	sourceTests := []struct{ name, sources, want string }{
		{"none", "sources: []\n", "sources: at least one source is required"},
		{"no name", "sources: [{leaves: [a], file: {path: /x}}]\n", "sources[0].name: is required"},
		{"no leaves", "sources: [{name: s, file: {path: /x}}]\n", "sources[0].leaves: at least one leaf id is required"},
		{"two kinds", "sources: [{name: s, leaves: [a], file: {path: /x}, exec: {command: [x]}}]\n", "sources[0]: want exactly one of prometheus, exec and file"},
		{"no kind", "sources: [{name: s, leaves: [a]}]\n", "sources[0]: want exactly one of"},
		{"blank leaf", "sources: [{name: s, leaves: [' a'], file: {path: /x}}]\n", `sources[0].leaves[0]: want a leaf id, got " a"`},
		{"same name", "sources: [{name: s, leaves: [a], file: {path: /x}}, {name: s, leaves: [b], file: {path: /y}}]\n", `sources[1].name: "s" names two sources`},
		{"leaf in two sources", "sources: [{name: s, leaves: [a], file: {path: /x}}, {name: t, leaves: [a], file: {path: /y}}]\n", `leaf "a" (type process) is also in source "s"`},
		{"no metric", "sources: [{name: s, leaves: [a], prometheus: {url: 'http://h/metrics', label: l}}]\n", "sources[0].prometheus.metric: is required"},
		{"no label", "sources: [{name: s, leaves: [a], prometheus: {url: 'http://h/metrics', metric: m}}]\n", "sources[0].prometheus.label: is required"},
		{"bad scrape url", "sources: [{name: s, leaves: [a], prometheus: {url: 'h/metrics', metric: m, label: l}}]\n", "sources[0].prometheus.url"},
		{"no command", "sources: [{name: s, leaves: [a], exec: {command: []}}]\n", "sources[0].exec.command: is required"},
		{"no path", "sources: [{name: s, leaves: [a], file: {max_age: 1m}}]\n", "sources[0].file.path: is required"},
	}
	for _, tc := range sourceTests {
		t.Run(tc.name, func(t *testing.T) {
			base, _, _ := strings.Cut(goodConfig, "sources:")
			_, err := ParseFile("agent.yaml", []byte(base+tc.sources))
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want a ConfigError with %q", err, tc.want)
			}
		})
	}
	if _, err := ParseFile("agent.yaml", nil); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty file: %v", err)
	}
}

// replaceKeys sets the top-level keys of edit in a config (a later key would be a duplicate:
// the old line goes).
func replaceKeys(config, edit string) string {
	lines := strings.Split(config, "\n")
	for _, e := range strings.Split(strings.TrimSpace(edit), "\n") {
		key, _, _ := strings.Cut(e, ":")
		for i, l := range lines {
			if strings.HasPrefix(l, key+":") {
				lines[i] = ""
			}
		}
	}
	return edit + strings.Join(lines, "\n")
}
