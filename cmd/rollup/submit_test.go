package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/tree"
)

func TestParseSubmit(t *testing.T) {
	t.Setenv("ROLLUP_URL", "")
	t.Setenv("ROLLUP_TOKEN", "")
	base := []string{"--url", "http://h", "--token", "t", "--project", "p", "--timestamp", "now"}
	tests := []struct {
		args    []string
		wantErr string
		check   func(c submitConfig) bool
	}{
		{args: append(base, "-"), check: func(c submitConfig) bool { return c.file == "-" && c.attempts == 5 && c.tick == tree.DefaultTick }},
		{args: append(base, "--file", "x.json", "--attempts", "2", "--json"), check: func(c submitConfig) bool { return c.file == "x.json" && c.attempts == 2 && c.jsonOut }},
		{args: base, wantErr: "counts are required"},
		{args: append(base, "-", "extra"), wantErr: "unexpected argument"},
		{args: append(base, "--file", "a", "-"), wantErr: "unexpected argument"},
		{args: []string{"--token", "t", "--project", "p", "--timestamp", "now", "-"}, wantErr: "--url is required"},
		{args: []string{"--url", "u", "--project", "p", "--timestamp", "now", "-"}, wantErr: "--token"},
		{args: []string{"--url", "u", "--token", "t", "--timestamp", "now", "-"}, wantErr: "--project is required"},
		{args: []string{"--url", "u", "--token", "t", "--project", "p", "-"}, wantErr: "--timestamp is required"},
		{args: append(base, "-", "--attempts", "0"), wantErr: "unexpected argument"},
		{args: append(base, "--attempts", "0", "-"), wantErr: "at least 1"},
	}
	for _, tc := range tests {
		var out, errOut strings.Builder
		c, err := parseSubmit(&env{stdout: &out, stderr: &errOut}, tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err = %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !tc.check(c) {
			t.Errorf("%v: got %+v, %v", tc.args, c, err)
		}
	}
	t.Setenv("ROLLUP_TOKEN", "from-env")
	t.Setenv("ROLLUP_URL", "http://env")
	c, err := parseSubmit(&env{stdout: &strings.Builder{}, stderr: &strings.Builder{}}, []string{"--project", "p", "--timestamp", "now", "-"})
	if err != nil || c.token != "from-env" || c.url != "http://env" {
		t.Errorf("env defaults: %+v %v", c, err)
	}
}

func TestSubmitInput(t *testing.T) {
	now := time.Date(2024, 5, 1, 10, 7, 30, 0, time.UTC)
	file := filepath.Join(t.TempDir(), "counts.json")
	if err := os.WriteFile(file, []byte(`[{"id":"a","type":"t","online":2}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := submitConfig{project: "p", timestamp: "now", file: file, tick: 5 * time.Minute}
	s, err := submitInput(c, nil, now)
	if err != nil || !s.Timestamp.Equal(time.Date(2024, 5, 1, 10, 5, 0, 0, time.UTC)) || !s.ObservedAt.Equal(now) || len(s.Counts) != 1 || s.Counts[0].Online != 2 {
		t.Fatalf("got %+v, %v", s, err)
	}
	c = submitConfig{project: "p", timestamp: "2024-05-01T10:00:00Z", observed: "2024-05-01T10:00:01.25Z", file: "-", submissionID: "s1"}
	s, err = submitInput(c, strings.NewReader(`[]`), now)
	if err != nil || s.ObservedAt.Nanosecond() != 250_000_000 || s.SubmissionID != "s1" || s.Timestamp.Hour() != 10 {
		t.Fatalf("got %+v, %v", s, err)
	}
	for _, tc := range []struct {
		c       submitConfig
		stdin   string
		wantErr string
	}{
		{submitConfig{timestamp: "10:05", file: "-"}, `[]`, "--timestamp"},
		{submitConfig{timestamp: "now", observed: "x", file: "-", tick: time.Minute}, `[]`, "--observed-at"},
		{submitConfig{timestamp: "now", file: "-", tick: time.Minute}, `{"id":"a"}`, "JSON array"},
		{submitConfig{timestamp: "now", file: "-", tick: time.Minute}, `[{"id":"a","typo":"t"}]`, "unknown field"},
		{submitConfig{timestamp: "now", file: "-", tick: time.Minute}, `[] []`, "after the JSON array"},
		{submitConfig{timestamp: "now", file: filepath.Join(t.TempDir(), "missing"), tick: time.Minute}, ``, "read counts"},
	} {
		if _, err := submitInput(tc.c, strings.NewReader(tc.stdin), now); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%+v: err %v, want %q", tc.c, err, tc.wantErr)
		}
	}
}

// stubAPI answers POST /v1/counts with status and, for 200, marks the items whose id is in
// rejected as rejected.
type stubAPI struct {
	mu       sync.Mutex
	requests []apiv1.CountsRequest
	status   int
	rejected map[string]bool
}

func (s *stubAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req apiv1.CountsRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if s.status != http.StatusOK {
		w.WriteHeader(s.status)
		_ = json.NewEncoder(w).Encode(apiv1.ErrorResponse{Error: apiv1.ErrInvalidItem, Message: "bad",
			Errors: []apiv1.FieldError{{Field: "counts[0].id", Message: `character 0 is "$"`}}})
		return
	}
	resp := apiv1.CountsResponse{SubmissionID: req.SubmissionID, Project: req.Project, Timestamp: req.Timestamp}
	for i, c := range req.Counts {
		it := apiv1.ItemResult{Index: i, ID: c.ID, Type: c.Type, Status: apiv1.StatusApplied}
		if s.rejected[c.ID] {
			it.Status, it.Error = apiv1.StatusRejected, "document failed validation"
			resp.Summary.Rejected++
		} else {
			resp.Summary.Applied++
		}
		resp.Items = append(resp.Items, it)
	}
	_ = json.NewEncoder(w).Encode(resp)
}

func TestRunSubmit(t *testing.T) {
	counts := `[{"id":"srv-1","type":"proc","online":3},{"id":"srv-2","type":"proc","online":0}]`
	tests := []struct {
		name      string
		stub      *stubAPI
		extra     []string
		wantCode  int
		wantOut   []string
		wantErr   string
		wantTries int
	}{
		{"all applied", &stubAPI{status: 200}, nil, 0,
			[]string{"0\tsrv-1\tproc\tapplied\n", "1\tsrv-2\tproc\tapplied\n", ": 2 applied, 0 stale, 0 rejected"}, "", 1},
		{"one rejected: exit 1", &stubAPI{status: 200, rejected: map[string]bool{"srv-2": true}}, nil, 1,
			[]string{"1\tsrv-2\tproc\trejected\tdocument failed validation\n", "1 rejected"}, "1 of 2 items rejected", 1},
		{"400: not retried, fields named", &stubAPI{status: 400}, nil, 1, nil, `counts[0].id: character 0 is "$"`, 1},
		{"503: retried up to --attempts", &stubAPI{status: 503}, []string{"--attempts", "2"}, 1, nil, "gave up after 2 attempts", 2},
		{"json output", &stubAPI{status: 200}, []string{"--json"}, 0, []string{`"status": "applied"`, `"applied": 2`}, "", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.stub)
			defer srv.Close()
			var out, errOut strings.Builder
			args := append([]string{"--url", srv.URL, "--token", "tok", "--project", "p", "--timestamp", "2024-05-01T10:05:00Z", "--observed-at", "2024-05-01T10:05:01Z"}, tc.extra...)
			args = append(args, "-")
			err := runSubmitWith(context.Background(), &env{stdout: &out, stderr: &errOut}, strings.NewReader(counts), args)
			if code := exitCode(&errOut, err); code != tc.wantCode {
				t.Fatalf("exit %d, want %d (err %v)", code, tc.wantCode, err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err %v, want %q", err, tc.wantErr)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout %q lacks %q", out.String(), w)
				}
			}
			if len(tc.stub.requests) != tc.wantTries {
				t.Fatalf("%d requests, want %d", len(tc.stub.requests), tc.wantTries)
			}
			r := tc.stub.requests[0]
			if r.Project != "p" || len(r.Counts) != 2 || r.ObservedAt == nil || r.ObservedAt.Second() != 1 || r.SubmissionID == "" {
				t.Errorf("request %+v", r)
			}
			for _, o := range tc.stub.requests[1:] {
				if o.SubmissionID != r.SubmissionID {
					t.Errorf("retry with another submission id")
				}
			}
		})
	}
}

func TestRunSubmitUsageErrors(t *testing.T) {
	var out, errOut strings.Builder
	err := runSubmitWith(context.Background(), &env{stdout: &out, stderr: &errOut}, strings.NewReader(`nope`),
		[]string{"--url", "http://127.0.0.1:1", "--token", "t", "--project", "p", "--timestamp", "now", "-"})
	if !errors.Is(err, errUsage) || exitCode(&errOut, err) != 2 {
		t.Fatalf("bad counts: err %v, want a usage error", err)
	}
}
