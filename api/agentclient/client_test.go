package agentclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/tree"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script is a test server answering attempt i with steps[i] (the last step repeats) and
// recording every request body.
type script struct {
	t      *testing.T
	mu     sync.Mutex
	bodies []apiv1.CountsRequest
	auth   []string
	steps  []func(w http.ResponseWriter, req apiv1.CountsRequest)
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		s.t.Errorf("read body: %v", err)
	}
	var req apiv1.CountsRequest
	if err := json.Unmarshal(data, &req); err != nil {
		s.t.Errorf("decode body %s: %v", data, err)
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, req)
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	step := s.steps[min(len(s.bodies), len(s.steps))-1]
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != apiv1.CountsPath {
		s.t.Errorf("%s %s", r.Method, r.URL.Path)
	}
	step(w, req)
}

func (s *script) requests() []apiv1.CountsRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]apiv1.CountsRequest(nil), s.bodies...)
}

func status(code int, retryAfter string) func(http.ResponseWriter, apiv1.CountsRequest) {
	return func(w http.ResponseWriter, _ apiv1.CountsRequest) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(apiv1.ErrorResponse{Error: "x", Message: "status " + strconv.Itoa(code),
			Errors: []apiv1.FieldError{{Field: "counts[0].id", Message: "bad"}}})
	}
}

func ok(w http.ResponseWriter, req apiv1.CountsRequest) {
	resp := apiv1.CountsResponse{SubmissionID: req.SubmissionID, Project: req.Project, Timestamp: req.Timestamp}
	for i, c := range req.Counts {
		resp.Items = append(resp.Items, apiv1.ItemResult{Index: i, ID: c.ID, Type: c.Type, Status: apiv1.StatusApplied})
		resp.Summary.Applied++
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// hangUp closes the connection without an answer: a network error for the client.
func hangUp(w http.ResponseWriter, _ apiv1.CountsRequest) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// recorder is the sleep hook: it records each wait instead of waiting.
type recorder struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.delays = append(r.delays, d)
	r.mu.Unlock()
	return ctx.Err()
}

func sub() Submission {
	return Submission{
		Project:    "proj-a",
		Timestamp:  time.Date(2024, 5, 1, 10, 5, 0, 0, time.UTC),
		ObservedAt: time.Date(2024, 5, 1, 10, 5, 2, 0, time.UTC),
		Counts:     []Count{{ID: "srv-1", Type: "proc", Online: 3}, {ID: "srv-2", Type: "proc", Online: 0}},
	}
}

func newClient(t *testing.T, url string, rec *recorder) *Client {
	return &Client{BaseURL: url + "/", Token: "tok", Logger: zaptest.NewLogger(t),
		BaseDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second, sleep: rec.sleep}
}

// TestRetries: failures are retried with the same submission (id, observed_at, counts), the
// waits follow the policy, and 4xx answers are never retried.
func TestRetries(t *testing.T) {
	tests := []struct {
		name         string
		steps        []func(http.ResponseWriter, apiv1.CountsRequest)
		wantAttempts int
		wantStatus   int // of the returned *APIError; 0 = success or network error
		wantErr      bool
		checkDelays  func(t *testing.T, d []time.Duration)
	}{
		{"first try", []func(http.ResponseWriter, apiv1.CountsRequest){ok}, 1, 0, false, nil},
		{"503 twice then ok, Retry-After honoured", []func(http.ResponseWriter, apiv1.CountsRequest){status(503, "1"), status(503, "3"), ok}, 3, 0, false,
			func(t *testing.T, d []time.Duration) {
				if d[0] < time.Second || d[0] >= time.Second+100*time.Millisecond || d[1] < 2*time.Second || d[1] >= 2*time.Second+100*time.Millisecond {
					t.Errorf("delays %v: want Retry-After (capped at MaxDelay 2s) plus < BaseDelay jitter", d)
				}
			}},
		{"500 and 502 then ok, exponential backoff", []func(http.ResponseWriter, apiv1.CountsRequest){status(500, ""), status(502, ""), status(504, ""), ok}, 4, 0, false,
			func(t *testing.T, d []time.Duration) {
				for i, c := range []time.Duration{100, 200, 400} {
					if d[i] < 0 || d[i] >= c*time.Millisecond {
						t.Errorf("delay %d = %v, want in [0, %v)", i, d[i], c*time.Millisecond)
					}
				}
			}},
		{"408 then ok (the body was cut, nothing written)", []func(http.ResponseWriter, apiv1.CountsRequest){status(408, ""), ok}, 2, 0, false, nil},
		{"415 not retried", []func(http.ResponseWriter, apiv1.CountsRequest){status(415, ""), ok}, 1, 415, true, nil},
		{"network errors then ok", []func(http.ResponseWriter, apiv1.CountsRequest){hangUp, hangUp, ok}, 3, 0, false, nil},
		{"always 503: bounded attempts", []func(http.ResponseWriter, apiv1.CountsRequest){status(503, "1")}, 5, 503, true, nil},
		{"always network error", []func(http.ResponseWriter, apiv1.CountsRequest){hangUp}, 5, 0, true, nil},
		{"400 not retried", []func(http.ResponseWriter, apiv1.CountsRequest){status(400, ""), ok}, 1, 400, true, nil},
		{"401 not retried", []func(http.ResponseWriter, apiv1.CountsRequest){status(401, ""), ok}, 1, 401, true, nil},
		{"403 not retried", []func(http.ResponseWriter, apiv1.CountsRequest){status(403, ""), ok}, 1, 403, true, nil},
		{"404 not retried", []func(http.ResponseWriter, apiv1.CountsRequest){status(404, ""), ok}, 1, 404, true, nil},
		{"413 not retried", []func(http.ResponseWriter, apiv1.CountsRequest){status(413, ""), ok}, 1, 413, true, nil},
		{"422 not retried", []func(http.ResponseWriter, apiv1.CountsRequest){status(422, ""), ok}, 1, 422, true, nil},
		{"429 then ok (over the token's rate, nothing written), Retry-After honoured", []func(http.ResponseWriter, apiv1.CountsRequest){status(429, "1"), ok}, 2, 0, false,
			func(t *testing.T, d []time.Duration) {
				if d[0] < time.Second || d[0] >= time.Second+100*time.Millisecond {
					t.Errorf("delay %v: want Retry-After 1s plus < BaseDelay jitter", d)
				}
			}},
		{"503 then 400: stops", []func(http.ResponseWriter, apiv1.CountsRequest){status(503, "1"), status(400, ""), ok}, 2, 400, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{t: t, steps: tc.steps}
			srv := httptest.NewServer(s)
			defer srv.Close()
			rec := &recorder{}
			c := newClient(t, srv.URL, rec)
			resp, err := c.Submit(context.Background(), sub())
			reqs := s.requests()
			if len(reqs) != tc.wantAttempts {
				t.Fatalf("%d attempts, want %d", len(reqs), tc.wantAttempts)
			}
			if len(rec.delays) != tc.wantAttempts-1 {
				t.Errorf("%d waits for %d attempts", len(rec.delays), len(reqs))
			}
			for i, r := range reqs {
				if r.SubmissionID != reqs[0].SubmissionID || tree.ValidateName("submission_id", r.SubmissionID) != nil {
					t.Errorf("attempt %d submission id %q, first %q", i, r.SubmissionID, reqs[0].SubmissionID)
				}
				if r.ObservedAt == nil || !r.ObservedAt.Equal(sub().ObservedAt) || len(r.Counts) != 2 || r.Counts[0] != sub().Counts[0] || r.Project != "proj-a" {
					t.Errorf("attempt %d sent %+v", i, r)
				}
				if s.auth[i] != "Bearer tok" {
					t.Errorf("attempt %d Authorization %q", i, s.auth[i])
				}
			}
			for _, d := range rec.delays {
				if d < 0 || d > c.MaxDelay+c.BaseDelay {
					t.Errorf("delay %v outside [0, MaxDelay+BaseDelay]", d)
				}
			}
			if tc.checkDelays != nil {
				tc.checkDelays(t, rec.delays)
			}
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("Submit: %v", err)
				}
				if resp.SubmissionID != reqs[0].SubmissionID || resp.Summary.Applied != 2 || len(resp.Items) != 2 {
					t.Errorf("response %+v", resp)
				}
				return
			}
			if err == nil {
				t.Fatal("Submit succeeded")
			}
			var apiErr *APIError
			if tc.wantStatus != 0 {
				if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.wantStatus {
					t.Fatalf("error %v, want an *APIError with status %d", err, tc.wantStatus)
				}
				if apiErr.Body.Message == "" || len(apiErr.Body.Errors) != 1 {
					t.Errorf("error body not decoded: %+v", apiErr.Body)
				}
			} else if errors.As(err, &apiErr) {
				t.Fatalf("error %v is an *APIError, want a network error", err)
			}
		})
	}
}

// TestSubmissionIDs: an empty id is generated per Submit call (distinct across calls), a
// given one is sent as is; a zero ObservedAt is fixed once per call.
func TestSubmissionIDs(t *testing.T) {
	s := &script{t: t, steps: []func(http.ResponseWriter, apiv1.CountsRequest){status(503, "1"), ok, status(503, "1"), ok, ok}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := newClient(t, srv.URL, &recorder{})
	a := sub()
	a.ObservedAt = time.Time{}
	before := time.Now()
	for i := 0; i < 2; i++ {
		if _, err := c.Submit(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	b := sub()
	b.SubmissionID = "mine-1"
	if _, err := c.Submit(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	r := s.requests()
	if r[0].SubmissionID != r[1].SubmissionID || r[2].SubmissionID != r[3].SubmissionID || r[0].SubmissionID == r[2].SubmissionID {
		t.Errorf("ids %q %q %q %q: want one per call, reused by its retry", r[0].SubmissionID, r[1].SubmissionID, r[2].SubmissionID, r[3].SubmissionID)
	}
	if !r[0].ObservedAt.Equal(*r[1].ObservedAt) || r[0].ObservedAt.Before(before) {
		t.Errorf("observed_at %v then %v: want fixed once per call", r[0].ObservedAt, r[1].ObservedAt)
	}
	if r[4].SubmissionID != "mine-1" {
		t.Errorf("given id sent as %q", r[4].SubmissionID)
	}
}

// TestCancelDuringBackoff: a cancelled context ends Submit during its wait, and the error
// carries both the cancellation and the last failure.
func TestCancelDuringBackoff(t *testing.T) {
	s := &script{t: t, steps: []func(http.ResponseWriter, apiv1.CountsRequest){status(503, "30")}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	inWait := make(chan struct{})
	c := &Client{BaseURL: srv.URL, Token: "tok", MaxDelay: time.Minute, sleep: func(ctx context.Context, d time.Duration) error {
		if d < 30*time.Second {
			t.Errorf("wait %v, want the 30s Retry-After", d)
		}
		close(inWait)
		<-ctx.Done()
		return ctx.Err()
	}}
	done := make(chan error, 1)
	go func() {
		_, err := c.Submit(ctx, sub())
		done <- err
	}()
	<-inWait
	cancel()
	err := <-done
	var apiErr *APIError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &apiErr) || apiErr.StatusCode != 503 {
		t.Fatalf("error %v: want context.Canceled wrapping the last failure", err)
	}
}

// TestCancelRealTimer: the real wait returns promptly when the context ends.
func TestCancelRealTimer(t *testing.T) {
	c := &Client{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := c.wait(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("wait returned %v after %v", err, time.Since(start))
	}
}

// TestRealBackoff runs the real timer path with tiny delays.
func TestRealBackoff(t *testing.T) {
	s := &script{t: t, steps: []func(http.ResponseWriter, apiv1.CountsRequest){status(500, ""), status(500, ""), ok}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, Token: "tok", BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, HTTP: srv.Client()}
	if _, err := c.Submit(context.Background(), sub()); err != nil {
		t.Fatal(err)
	}
	if n := len(s.requests()); n != 3 {
		t.Fatalf("%d attempts", n)
	}
}

// TestDelay checks the backoff against the policy with the random draw at its extremes.
func TestDelay(t *testing.T) {
	low := func(int64) int64 { return 0 }
	high := func(n int64) int64 { return n - 1 }
	c := &Client{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	ra := &APIError{StatusCode: 503, RetryAfter: 3 * time.Second}
	net := errors.New("connection reset")
	tests := []struct {
		retry     int
		last      error
		lo, hi    time.Duration
		wantRange string
	}{
		{0, net, 0, 100*time.Millisecond - 1, "[0,100ms)"},
		{1, net, 0, 200*time.Millisecond - 1, "[0,200ms)"},
		{3, net, 0, 800*time.Millisecond - 1, "[0,800ms)"},
		{4, net, 0, time.Second - 1, "capped"},
		{200, net, 0, time.Second - 1, "no overflow"},
		{0, &APIError{StatusCode: 500}, 0, 100*time.Millisecond - 1, "5xx without Retry-After"},
		{0, ra, time.Second, time.Second + 100*time.Millisecond - 1, "Retry-After capped at MaxDelay"},
	}
	for _, tc := range tests {
		c.randN = low
		if got := c.delay(tc.retry, tc.last); got != tc.lo {
			t.Errorf("%s: low draw %v, want %v", tc.wantRange, got, tc.lo)
		}
		c.randN = high
		if got := c.delay(tc.retry, tc.last); got != tc.hi {
			t.Errorf("%s: high draw %v, want %v", tc.wantRange, got, tc.hi)
		}
	}
	c = &Client{} // defaults
	c.randN = high
	if got := c.delay(0, net); got != DefaultBaseDelay-1 {
		t.Errorf("default first delay %v", got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"5", 5 * time.Second}, {" 7 ", 7 * time.Second}, {"0", 0}, {"-3", 0}, {"soon", 0},
		{"99999999999", 24 * time.Hour},
		{"Wed, 01 May 2024 10:00:09 GMT", 9 * time.Second},
		{"Wed, 01 May 2024 09:59:00 GMT", 0},
	}
	for _, tc := range tests {
		if got, _ := ParseRetryAfter(tc.in, now); got != tc.want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestStartJitter: within [0, tick/10) and spread over the whole window.
func TestStartJitter(t *testing.T) {
	const tick = 5 * time.Minute
	window := tick / 10
	var buckets [10]int
	for i := 0; i < 10000; i++ {
		d := StartJitter(tick)
		if d < 0 || d >= window {
			t.Fatalf("StartJitter = %v, want in [0, %v)", d, window)
		}
		buckets[int(d*10/window)]++
	}
	for i, n := range buckets {
		if n < 700 || n > 1300 { // expected 1000 per bucket; far outside means not uniform
			t.Errorf("bucket %d has %d of 10000 draws: %v", i, n, buckets)
		}
	}
	if StartJitter(0) != 0 || StartJitter(5) != 0 {
		t.Error("StartJitter of a tiny tick is not 0")
	}
}

func TestNewSubmissionID(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := NewSubmissionID()
		if err := tree.ValidateName("submission_id", id); err != nil || len(id) != 32 || seen[id] {
			t.Fatalf("NewSubmissionID = %q (%v, seen %v)", id, err, seen[id])
		}
		seen[id] = true
	}
}
