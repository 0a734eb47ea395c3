package main

import (
	"context"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/internal/testctx"
)

func TestParseGenerate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want [3]int
		ok   bool
	}{
		{"4,5,10", [3]int{4, 5, 10}, true},
		{" 1, 1 ,1", [3]int{1, 1, 1}, true},
		{"4,5", [3]int{}, false},
		{"4,5,0", [3]int{}, false},
		{"4,-5,10", [3]int{}, false},
		{"a,b,c", [3]int{}, false},
		{"1000,1000,1000", [3]int{}, false}, // 10^9 leaves
	} {
		got, err := parseGenerate(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseGenerate(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseSimulate(t *testing.T) {
	base := []string{"--url", "http://h:8080", "--project", "p", "--generate", "2,3,4"}
	tokenFile := writeFile(t, "token", "tok\n")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(simulateConfig) bool
		wantErr string
	}{
		{"token flag", append([]string{"--token", "t"}, base...), nil, func(c simulateConfig) bool {
			return c.token == "t" && c.generate == [3]int{2, 3, 4} && c.agents == 10 && c.backfill == 12 && c.refresh == 15*time.Second && c.wait == 2*time.Minute
		}, ""},
		{"token from the environment", base, map[string]string{"ROLLUP_TOKEN": "t", "ROLLUP_AGENTS": "3"}, func(c simulateConfig) bool {
			return c.token == "t" && c.agents == 3
		}, ""},
		{"token file", append([]string{"--token-file", tokenFile, "--tree", "x.yaml"}, "--url", "https://h"), nil, func(c simulateConfig) bool {
			return c.tokenFile == tokenFile && c.treeFile == "x.yaml" && c.project == ""
		}, ""},
		{"no url", []string{"--token", "t", "--project", "p", "--generate", "1,1,1"}, nil, nil, "--url (from default)"},
		{"url without scheme", []string{"--token", "t", "--url", "h:8080", "--project", "p", "--generate", "1,1,1"}, nil, nil, "--url (from flag)"},
		{"no token", base, nil, nil, "--token (from default): is required"},
		{"token and token file", append([]string{"--token-file", tokenFile}, base...), map[string]string{"ROLLUP_TOKEN": "t"}, nil,
			"--token (from environment variable ROLLUP_TOKEN) and --token-file (from flag) exclude each other"},
		{"no leaves", []string{"--token", "t", "--url", "http://h", "--project", "p"}, nil, nil, "exactly one of --tree"},
		{"both leaves", append([]string{"--token", "t", "--tree", "x.yaml"}, base...), nil, nil, "exactly one of --tree"},
		{"generate without project", []string{"--token", "t", "--url", "http://h", "--generate", "1,1,1"}, nil, nil, "--project (from default): is required with --generate"},
		{"bad generate", []string{"--token", "t", "--url", "http://h", "--project", "p", "--generate", "1,1"}, nil, nil, "--generate (from flag)"},
		{"bad agents", append([]string{"--token", "t", "--agents", "0"}, base...), nil, nil, "--agents (from flag)"},
		{"bad refresh from the environment", append([]string{"--token", "t"}, base...), map[string]string{"ROLLUP_REFRESH": "soon"}, nil, "--refresh (from environment variable ROLLUP_REFRESH)"},
		{"argument", append([]string{"--token", "t", "x"}, base...), nil, nil, `unexpected argument "x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			c, err := parseSimulate(&env{stdout: &out, stderr: &out, lookupEnv: mapEnv(tc.env)}, tc.args)
			if tc.wantErr == "" {
				if err != nil || !tc.check(c) {
					t.Fatalf("got %+v, %v", c, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
	var out strings.Builder
	if _, err := parseSimulate(&env{stdout: &out, stderr: &out, lookupEnv: mapEnv(nil)}, []string{"--help"}); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "--token-file") {
		t.Errorf("--help: %v, %q", err, out.String())
	}
}

// simAPI is a rollup API stand-in: the stub answers /v1/counts, "/" answers 200, and the
// Authorization headers are kept.
type simAPI struct {
	stub stubAPI
	mu   sync.Mutex
	auth map[string]int
}

func (s *simAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != apiv1.CountsPath {
		w.WriteHeader(http.StatusOK)
		return
	}
	s.mu.Lock()
	s.auth[r.Header.Get("Authorization")]++
	s.mu.Unlock()
	s.stub.ServeHTTP(w, r)
}

func (s *simAPI) requests() []apiv1.CountsRequest {
	s.stub.mu.Lock()
	defer s.stub.mu.Unlock()
	return append([]apiv1.CountsRequest(nil), s.stub.requests...)
}

// TestRunSimulate runs the command against a stub API: the backfilled ticks and the current
// one are reported for every leaf of the tree, with the token of the token file.
func TestRunSimulate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leaves func(t *testing.T) []string // args giving the leaves
		want   int                         // leaves
	}{
		{"generate", func(*testing.T) []string { return []string{"--project", "sim", "--generate", "2,2,3"} }, 12},
		{"tree file", func(t *testing.T) []string {
			return []string{"--tree", writeFile(t, "t.yaml", "project: sim\nroot: {id: sim, type: project, children: [{id: a, type: proc}, {id: b, type: proc}, {id: c, type: proc}]}\n")}
		}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &simAPI{stub: stubAPI{status: http.StatusOK}, auth: map[string]int{}}
			srv := httptest.NewServer(api)
			defer srv.Close()
			const backfill, agents = 2, 3
			args := append([]string{"--url", srv.URL, "--token-file", writeFile(t, "token", "s3cret\n"),
				"--agents", "3", "--backfill", "2", "--jitter", "1ns", "--refresh", "1h", "--log-level", "error"}, tc.leaves(t)...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out strings.Builder
			done := make(chan error, 1)
			go func() { done <- runSimulate(ctx, &env{stdout: &out, stderr: &out}, args) }()

			wantRequests := (backfill + 1) * min(agents, tc.want)
			deadline := testctx.Deadline(t)
			for len(api.requests()) < wantRequests {
				select {
				case err := <-done:
					t.Fatalf("simulate returned early: %v (%s)", err, out.String())
				case <-time.After(5 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d requests before the test's deadline, want %d", len(api.requests()), wantRequests)
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("simulate: %v", err)
			}
			leavesPerTick := map[time.Time]map[string]bool{}
			for _, r := range api.requests() {
				if r.Project != "sim" {
					t.Errorf("project %q", r.Project)
				}
				if leavesPerTick[r.Timestamp] == nil {
					leavesPerTick[r.Timestamp] = map[string]bool{}
				}
				for _, c := range r.Counts {
					leavesPerTick[r.Timestamp][c.ID] = true
				}
			}
			if len(leavesPerTick) != backfill+1 {
				t.Errorf("%d ticks reported, want %d", len(leavesPerTick), backfill+1)
			}
			for tick, leaves := range leavesPerTick {
				if len(leaves) != tc.want {
					t.Errorf("tick %s: %d leaves reported, want %d", tick, len(leaves), tc.want)
				}
			}
			api.mu.Lock()
			defer api.mu.Unlock()
			if len(api.auth) != 1 || api.auth["Bearer s3cret"] == 0 {
				t.Errorf("authorization headers %v, want only the token file's", api.auth)
			}
		})
	}
}

// TestRunSimulateSetupErrors: a token file or an API that fails the setup is named by its
// flag.
func TestRunSimulateSetupErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	closed := srv.URL
	srv.Close()
	leaves := []string{"--project", "sim", "--generate", "1,1,1", "--log-level", "error"}
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{append([]string{"--url", closed, "--token-file", "/nonexistent/token"}, leaves...), "--token-file: read token file"},
		{append([]string{"--url", closed, "--token", "t", "--wait", "50ms"}, leaves...), "--wait: the API at " + closed + " did not answer within 50ms"},
	} {
		var out strings.Builder
		err := runSimulate(t.Context(), &env{stdout: &out, stderr: &out, lookupEnv: mapEnv(nil)}, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}
