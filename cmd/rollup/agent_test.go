package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/internal/testctx"
)

// fakeIngest answers POST /v1/counts: 200 with every item applied while up, 503 otherwise, and
// records the requests it answered 200.
type fakeIngest struct {
	mu   sync.Mutex
	up   bool
	got  []apiv1.CountsRequest
	errs int
}

func (f *fakeIngest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	var req apiv1.CountsRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.Header.Get("Authorization") != "Bearer tok" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"malformed_json","message":"test"}`))
		return
	}
	if !f.up {
		f.errs++
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"unavailable","message":"test"}`))
		return
	}
	f.got = append(f.got, req)
	resp := apiv1.CountsResponse{SubmissionID: req.SubmissionID, Project: req.Project, Timestamp: req.Timestamp}
	for i, c := range req.Counts {
		resp.Items = append(resp.Items, apiv1.ItemResult{Index: i, ID: c.ID, Type: c.Type, Status: apiv1.StatusApplied})
		resp.Summary.Applied++
	}
	_ = json.NewEncoder(w).Encode(resp)
}

// agentSetup writes a token file, a counts file and an agent config pointing at url.
func agentSetup(t *testing.T, url string) (config, spool string) {
	t.Helper()
	dir := t.TempDir()
	token := writeFile(t, "token", "tok\n")
	counts := filepath.Join(dir, "online.json")
	if err := os.WriteFile(counts, []byte(`{"p1": 7, "p2": 8}`), 0o600); err != nil {
		t.Fatal(err)
	}
	spool = filepath.Join(dir, "spool")
	config = writeFile(t, "agent.yaml", fmt.Sprintf(`url: %s
token_file: %s
project: mygame
spool: {dir: %s, max_mb: 1}
sources:
  - name: game
    file: {path: %s}
    leaves: [p1, p2]
`, url, token, spool, counts))
	return config, spool
}

func spoolFiles(t *testing.T, dir string) int {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(des)
}

// TestAgentOnce: --once sends one tick; while rollup answers 503 the tick stays in the spool
// (exit status 1) and the next --once sends it first, with its own observed_at.
func TestAgentOnce(t *testing.T) {
	ingest := &fakeIngest{}
	srv := httptest.NewServer(ingest)
	defer srv.Close()
	config, spool := agentSetup(t, srv.URL)
	e := &env{stdout: &strings.Builder{}, stderr: &strings.Builder{}, lookupEnv: mapEnv(nil)}
	args := []string{"agent", "--config", config, "--once", "--log-level", "error"}

	err := run(testctx.Context(t), e, args)
	if err == nil || !strings.Contains(err.Error(), "1 ticks left in the spool") || errors.Is(err, errUsage) {
		t.Fatalf("rollup away: %v, want 1 tick left", err)
	}
	if n := spoolFiles(t, spool); n != 1 {
		t.Fatalf("%d spool files, want 1", n)
	}
	ingest.mu.Lock()
	ingest.up = true
	ingest.mu.Unlock()
	if err := run(testctx.Context(t), e, args); err != nil {
		t.Fatal(err)
	}
	if n := spoolFiles(t, spool); n != 0 {
		t.Errorf("%d spool files left", n)
	}
	ingest.mu.Lock()
	defer ingest.mu.Unlock()
	if len(ingest.got) != 2 || ingest.errs != 1 {
		t.Fatalf("%d requests applied, %d refused; want 2 and 1", len(ingest.got), ingest.errs)
	}
	first, second := ingest.got[0], ingest.got[1]
	if !first.ObservedAt.Before(*second.ObservedAt) || first.SubmissionID == second.SubmissionID ||
		first.Project != "mygame" || len(first.Counts) != 2 || first.Counts[0] != (apiv1.Count{ID: "p1", Type: "process", Online: 7}) {
		t.Errorf("requests %+v", ingest.got)
	}
}

func TestParseAgent(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		env     map[string]string
		want    agentConfig
		wantErr string
	}{
		{[]string{"--config", "a.yaml"}, nil, agentConfig{config: "a.yaml", logLevel: "info"}, ""},
		{nil, map[string]string{"ROLLUP_CONFIG": "b.yaml", "ROLLUP_METRICS_LISTEN": ":9465"}, agentConfig{config: "b.yaml", metricsListen: ":9465", logLevel: "info"}, ""},
		{[]string{"--config", "a.yaml", "--once"}, nil, agentConfig{config: "a.yaml", logLevel: "info", once: true}, ""},
		{nil, nil, agentConfig{}, "--config (from default): is required"},
		{[]string{"--config", "a.yaml", "--metrics-listen", "nope"}, nil, agentConfig{}, "--metrics-listen (from flag)"},
	} {
		got, err := parseAgent(&env{stdout: &strings.Builder{}, stderr: &strings.Builder{}, lookupEnv: mapEnv(tc.env)}, tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
	var out strings.Builder
	if _, err := parseAgent(&env{stdout: &out, stderr: &out, lookupEnv: mapEnv(nil)}, []string{"--help"}); !errors.Is(err, flag.ErrHelp) ||
		!strings.Contains(out.String(), "--metrics-listen") || !strings.Contains(out.String(), "the agent's YAML file") {
		t.Errorf("--help: %v\n%s", err, out.String())
	}
}

// TestAgentBadConfig: a config the agent cannot run with is a usage error naming the key.
func TestAgentBadConfig(t *testing.T) {
	bad := writeFile(t, "agent.yaml", "url: http://h\ntoken: t\nproject: p\nspool: {dir: /tmp/x}\nsources: []\n")
	err := run(testctx.Context(t), &env{stdout: &strings.Builder{}, stderr: &strings.Builder{}, lookupEnv: mapEnv(nil)}, []string{"agent", "--config", bad})
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "sources: at least one source is required") {
		t.Errorf("err %v", err)
	}
}
