package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/internal/testctx"
)

// describe prints Values in a stable order: ok id=n, bad id: error.
func describe(v Values, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var parts []string
	for id, n := range v.Online {
		parts = append(parts, fmt.Sprintf("ok %s=%d", id, n))
	}
	for id, e := range v.Bad {
		parts = append(parts, fmt.Sprintf("bad %s: %v", id, e))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

func TestParseCountsJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a": 1, "b": 0}`, "ok a=1; ok b=0"},
		{`{}`, ""},
		{`{"a": null, "b": 3}`, "ok b=3"},
		{`{"a": 1.0}`, "bad a: value 1.0 is not a whole number"},
		{`{"a": 1e2}`, "bad a: value 1e2 is not a whole number"},
		{`{"a": -1}`, "bad a: value -1 is negative"},
		{`{"a": "7"}`, `bad a: value "7" is not a whole number`},
		{`{"a": 9007199254740993}`, "bad a: value 9007199254740993 is too large"},
		{`{"a": 99999999999999999999}`, "bad a: value 99999999999999999999 is not a whole number"},
		{`{"a": [1]}`, "bad a: value [1] is not a whole number"},
		{`[1, 2]`, "error: want a JSON object of counts"},
		{`null`, "error: want a JSON object of counts such as {\"leaf-id\": 42}, got null"},
		{``, "error: want a JSON object of counts"},
		{`{"a": 1`, "error: want a JSON object of counts"},
		{`{"a": 1} {"b": 2}`, "error: unexpected data after the JSON object"},
		{`{"a": 1} x`, "error: unexpected data after the JSON object"},
	}
	for _, tc := range tests {
		got := describe(ParseCountsJSON([]byte(tc.in)))
		if !strings.HasPrefix(got, tc.want) || (tc.want == "" && got != "") {
			t.Errorf("ParseCountsJSON(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzParseCountsJSON: any input gives an error or values that are all counts, and never a
// leaf both counted and bad.
func FuzzParseCountsJSON(f *testing.F) {
	for _, s := range []string{`{"a": 1}`, `{"a": 1.5, "b": null}`, `[]`, `{"a": -0}`, `{"a":1}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseCountsJSON(data)
		if err != nil {
			return
		}
		for id, n := range v.Online {
			if n < 0 || n > 1<<53 {
				t.Errorf("leaf %q: count %d", id, n)
			}
			if _, bad := v.Bad[id]; bad {
				t.Errorf("leaf %q both counted and bad", id)
			}
		}
	})
}

const exposition = `# HELP game_players_online Players online per server process.
# TYPE game_players_online gauge
game_players_online{server="p1",map="a"} 12
game_players_online{server="p2"} 0
game_players_online{server="p3"} 1.5
game_players_online{server="p4"} -2
game_players_online{server="p5"} NaN
game_players_online{server="p6"} 1
game_players_online{server="p6",map="b"} 2
game_players_online{other="p7"} 9
# TYPE requests_total counter
requests_total{server="p1"} 100
`

func TestParseProm(t *testing.T) {
	tests := []struct{ name, data, metric, label, want string }{
		{"gauge", exposition, "game_players_online", "server",
			"bad p3: game_players_online{server=\"p3\"}: value 1.5 is not a whole number; " +
				"bad p4: game_players_online{server=\"p4\"}: value -2 is negative; " +
				"bad p5: game_players_online{server=\"p5\"}: value NaN is not a count; " +
				"bad p6: 2 series of game_players_online have server=\"p6\"; " +
				"ok p1=12; ok p2=0"},
		{"untyped", "players{server=\"p1\"} 3\n", "players", "server", "ok p1=3"},
		{"counter refused", exposition, "requests_total", "server", "error: metric requests_total is a COUNTER, want a gauge"},
		{"absent metric", exposition, "nope", "server", "error: metric nope is absent from the exposition"},
		{"no series has the label", exposition, "game_players_online", "zone", ""},
		{"syntax error", "game_players_online{server=\"p1\" 3\n", "game_players_online", "server", "error: parse exposition:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := describe(ParseProm([]byte(tc.data), tc.metric, tc.label))
			if !strings.HasPrefix(got, tc.want) || (tc.want == "" && got != "") {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// FuzzParseProm: the exposition parser never panics and only ever yields counts.
func FuzzParseProm(f *testing.F) {
	f.Add([]byte(exposition))
	f.Add([]byte("players{server=\"p1\"} 3\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseProm(data, "game_players_online", "server")
		if err != nil {
			return
		}
		for id, n := range v.Online {
			if n < 0 || n > 1<<53 {
				t.Errorf("leaf %q: count %d", id, n)
			}
		}
	})
}

func TestPromSource(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(exposition))
	}))
	defer srv.Close()
	s := &PromSource{SourceName: "prom", URL: srv.URL, Metric: "game_players_online", Label: "server", HTTP: srv.Client()}
	v, err := s.Read(testctx.Context(t), t0)
	if err != nil || v.Online["p1"] != 12 {
		t.Errorf("Read = %s", describe(v, err))
	}
	status = http.StatusInternalServerError
	if _, err := s.Read(testctx.Context(t), t0); err == nil || !strings.Contains(err.Error(), "HTTP 500") {
		t.Errorf("500: %v", err)
	}
	srv.Close()
	if _, err := s.Read(testctx.Context(t), t0); err == nil || !strings.Contains(err.Error(), "scrape") {
		t.Errorf("closed: %v", err)
	}
}

func TestExecSource(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	tests := []struct {
		name    string
		script  string
		timeout time.Duration
		want    string
	}{
		{"counts", `echo '{"a": 3, "b": 1.5}'`, 5 * time.Second, "bad b: value 1.5 is not a whole number; ok a=3"},
		{"exit status", `echo oops >&2; exit 3`, 5 * time.Second, `error: command /bin/sh: exit status 3 (stderr: "oops\n")`},
		{"not JSON", `echo hello`, 5 * time.Second, "error: command /bin/sh: want a JSON object of counts"},
		{"timeout", `exec sleep 10`, 50 * time.Millisecond, "error: command /bin/sh: no answer within 50ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &ExecSource{SourceName: "exec", Command: []string{"/bin/sh", "-c", tc.script}, Timeout: tc.timeout}
			got := describe(s.Read(testctx.Context(t), t0))
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestFileSource(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "online.json")
	write := func(data string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	s := &FileSource{SourceName: "file", Path: path, MaxAge: 10 * time.Minute}
	now := time.Now()
	if got := describe(s.Read(context.Background(), now)); !strings.Contains(got, "no such file") {
		t.Errorf("missing file: %s", got)
	}
	write(`{"a": 5}`, now.Add(-time.Minute))
	if got := describe(s.Read(context.Background(), now)); got != "ok a=5" {
		t.Errorf("fresh file: %s", got)
	}
	write(`{"a": 5}`, now.Add(-11*time.Minute))
	if got := describe(s.Read(context.Background(), now)); !strings.Contains(got, "is stale: last written 11m0s ago") {
		t.Errorf("stale file: %s", got)
	}
	write(`{"a": 5`, now) // a torn write by the game server
	if got := describe(s.Read(context.Background(), now)); !strings.Contains(got, "want a JSON object") {
		t.Errorf("torn file: %s", got)
	}
}
