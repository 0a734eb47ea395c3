package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/bulk"
)

const twoItems = `[{"id":"srv-1","type":"proc","online":3},{"id":"srv-2","type":"proc","online":0}]`

func TestAuth(t *testing.T) {
	otherProject := strings.Replace(reqBody(twoItems), `"proj-a"`, `"proj-b"`, 1)
	noSuchProject := strings.Replace(reqBody(twoItems), `"proj-a"`, `"nope"`, 1)
	tests := []struct {
		name       string
		header     string // Authorization; "" = none
		body       string // "" = a body that must not be read
		wantStatus int
		wantCode   string
		wantMsg    string // in the message
	}{
		{"no header", "", "", 401, apiv1.ErrUnauthorized, ""},
		{"basic scheme", "Basic " + tokenA, "", 401, apiv1.ErrUnauthorized, ""},
		{"bearer without token", "Bearer ", "", 401, apiv1.ErrUnauthorized, ""},
		{"bearer with bad characters", "Bearer a b", "", 401, apiv1.ErrUnauthorized, ""},
		{"bearer too long", "Bearer " + strings.Repeat("a", maxTokenLen+1), "", 401, apiv1.ErrUnauthorized, ""},
		{"unknown token", "Bearer not-a-token", "", 401, apiv1.ErrUnauthorized, ""},
		{"token of another existing project", "Bearer " + tokenA, otherProject, 403, apiv1.ErrForbidden, ""},
		{"token of A, project that does not exist", "Bearer " + tokenA, noSuchProject, 403, apiv1.ErrForbidden, ""},
		{"token whose project was deleted", "Bearer " + tokenDel, strings.Replace(reqBody(twoItems), `"proj-a"`, `"gone"`, 1), 404, apiv1.ErrUnknownProject, ""},
		{"valid", "Bearer " + tokenA, reqBody(twoItems), 200, "", ""},
		{"scheme is case-insensitive", "bearer " + tokenA, reqBody(twoItems), 200, "", ""},
		{"revoked token (revocation wins over a later expiry)", "Bearer " + tokenRevoked, "", 401, apiv1.ErrUnauthorized, "token revoked at 2024-05-01T09:07:30Z"},
		{"token expired at the request's time", "Bearer " + tokenExpired, "", 401, apiv1.ErrUnauthorized, "token expired at 2024-05-01T10:07:30Z"},
		{"token expiring after the request", "Bearer " + tokenExpiring, reqBody(twoItems), 200, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink := &fakeSink{}
			srv := newServer(testConfig(t, sink), newFakeTokens())
			var body io.Reader = strings.NewReader(tc.body)
			if tc.body == "" {
				body = failingReader{t}
			}
			req := httptest.NewRequest(http.MethodPost, apiv1.CountsPath, body)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantStatus, rec.Body)
			}
			if tc.wantCode != "" && !strings.Contains(rec.Body.String(), `"error":"`+tc.wantCode+`"`) {
				t.Errorf("body %s, want error %q", rec.Body, tc.wantCode)
			}
			if !strings.Contains(rec.Body.String(), tc.wantMsg) {
				t.Errorf("body %s, want the message to hold %q", rec.Body, tc.wantMsg)
			}
			if tc.wantStatus == 401 && rec.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			wantCalls := 0
			if tc.wantStatus == 200 {
				wantCalls = 1
			}
			if n := sink.numCalls(); n != wantCalls {
				t.Errorf("sink called %d times, want %d", n, wantCalls)
			}
		})
	}
}

// TestForbiddenDoesNotRevealProjects: with a valid token, an existing and a missing project
// of someone else get byte-identical answers.
func TestForbiddenDoesNotRevealProjects(t *testing.T) {
	srv := newServer(testConfig(t, &fakeSink{}), newFakeTokens())
	a := post(t, srv, tokenA, strings.NewReader(strings.Replace(reqBody(twoItems), `"proj-a"`, `"proj-b"`, 1)))
	b := post(t, srv, tokenA, strings.NewReader(strings.Replace(reqBody(twoItems), `"proj-a"`, `"nope"`, 1)))
	if a.status != http.StatusForbidden || a.raw != b.raw {
		t.Fatalf("answers differ: %d %s vs %d %s", a.status, a.raw, b.status, b.raw)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	srv := newServer(testConfig(t, &fakeSink{}), newFakeTokens())
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, apiv1.CountsPath, nil))
	if rec.Code != http.StatusMethodNotAllowed || !strings.Contains(rec.Header().Get("Allow"), "POST") {
		t.Fatalf("GET: %d Allow=%q", rec.Code, rec.Header().Get("Allow"))
	}
}

// TestItemStatuses: each item's outcome from the Sink is reported at its index, and the
// Sink gets exactly the validated values.
func TestItemStatuses(t *testing.T) {
	sink := &fakeSink{fn: func(_ context.Context, items []bulk.Item) ([]bulk.Result, error) {
		out := []bulk.Outcome{bulk.OutcomeApplied, bulk.OutcomeStale, bulk.OutcomeRejected, bulk.OutcomeApplied}
		res := make([]bulk.Result, len(items))
		for i := range items {
			res[i].Outcome = out[i]
			if out[i] == bulk.OutcomeRejected {
				res[i].Err = errors.New("document failed validation")
			}
		}
		return res, nil
	}}
	srv := newServer(testConfig(t, sink), newFakeTokens())
	body := reqBody(`[{"id":"a","type":"proc","online":3},{"id":"b","type":"proc","online":0},{"id":"c","type":"proc","online":1000},{"id":"a","type":"srv","online":7}]`)
	r := post(t, srv, tokenA, strings.NewReader(body))
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	observed := time.Date(2024, 5, 1, 10, 5, 1, 500_000_000, time.UTC)
	tick := time.Date(2024, 5, 1, 10, 5, 0, 0, time.UTC)
	want := []apiv1.ItemResult{
		{Index: 0, ID: "a", Type: "proc", Status: apiv1.StatusApplied},
		{Index: 1, ID: "b", Type: "proc", Status: apiv1.StatusStale},
		{Index: 2, ID: "c", Type: "proc", Status: apiv1.StatusRejected, Error: "document failed validation"},
		{Index: 3, ID: "a", Type: "srv", Status: apiv1.StatusApplied},
	}
	if fmt.Sprint(r.ok.Items) != fmt.Sprint(want) {
		t.Errorf("items\n got %+v\nwant %+v", r.ok.Items, want)
	}
	if r.ok.Summary != (apiv1.Summary{Applied: 2, Stale: 1, Rejected: 1}) {
		t.Errorf("summary %+v", r.ok.Summary)
	}
	if r.ok.SubmissionID != "sub-1" || r.ok.Project != "proj-a" || !r.ok.Timestamp.Equal(tick) || r.ok.Version != observed.UnixNano() {
		t.Errorf("echo fields %+v", r.ok)
	}
	if sink.numCalls() != 1 {
		t.Fatalf("sink called %d times", sink.numCalls())
	}
	onl := []int64{3, 0, 1000, 7}
	for i, it := range sink.calls[0] {
		wantIt := bulk.Item{Key: bulk.Key{ID: want[i].ID, Type: want[i].Type, Timestamp: tick}, Project: "proj-a",
			Online: onl[i], Version: observed.UnixNano(), SubmissionID: "sub-1"}
		if it != wantIt || it.Timestamp.Location() != time.UTC {
			t.Errorf("item %d to sink %+v, want %+v", i, it, wantIt)
		}
	}
}

// TestDefaultObservedAt: without observed_at the version is the receive time.
func TestDefaultObservedAt(t *testing.T) {
	sink := &fakeSink{}
	srv := newServer(testConfig(t, sink), newFakeTokens())
	body := `{"project":"proj-a","timestamp":"2024-05-01T10:05:00+00:00","submission_id":"s","counts":` + twoItems + `}`
	r := post(t, srv, tokenA, strings.NewReader(body))
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	if r.ok.Version != testNow().UnixNano() || sink.calls[0][0].Version != testNow().UnixNano() {
		t.Fatalf("version %d, want the receive time %d", r.ok.Version, testNow().UnixNano())
	}
}

// TestEmptyCounts: an empty counts array is a valid no-op and does not call the Sink.
func TestEmptyCounts(t *testing.T) {
	sink := &fakeSink{}
	srv := newServer(testConfig(t, sink), newFakeTokens())
	r := post(t, srv, tokenA, strings.NewReader(reqBody(`[]`)))
	if r.status != http.StatusOK || len(r.ok.Items) != 0 || r.ok.Summary != (apiv1.Summary{}) {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	if sink.numCalls() != 0 {
		t.Error("sink called for no items")
	}
}

// TestUnavailable: the store being unavailable, the writer closing or an unknown outcome
// answer 503 with a jittered Retry-After and a body saying a resend is safe; unexpected
// errors answer 500.
func TestUnavailable(t *testing.T) {
	unknown := func(_ context.Context, items []bulk.Item) ([]bulk.Result, error) {
		res := make([]bulk.Result, len(items))
		res[0].Outcome = bulk.OutcomeApplied
		res[1] = bulk.Result{Outcome: bulk.OutcomeUnknown, Err: bulk.ErrUnavailable}
		return res, nil
	}
	tests := []struct {
		name       string
		fn         func(ctx context.Context, items []bulk.Item) ([]bulk.Result, error)
		wantStatus int
	}{
		{"store unavailable", func(context.Context, []bulk.Item) ([]bulk.Result, error) {
			return nil, fmt.Errorf("write batch: %w", bulk.ErrUnavailable)
		}, 503},
		{"writer closed", func(context.Context, []bulk.Item) ([]bulk.Result, error) { return nil, bulk.ErrClosed }, 503},
		{"one outcome unknown", unknown, 503},
		{"sink too slow", func(ctx context.Context, _ []bulk.Item) ([]bulk.Result, error) {
			<-ctx.Done() // SubmitTimeout
			return nil, ctx.Err()
		}, 503},
		{"unexpected error", func(context.Context, []bulk.Item) ([]bulk.Result, error) { return nil, errors.New("boom") }, 500},
		{"wrong number of results", func(context.Context, []bulk.Item) ([]bulk.Result, error) { return make([]bulk.Result, 1), nil }, 500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, &fakeSink{fn: tc.fn})
			cfg.RetryAfter = 3 * time.Second
			cfg.SubmitTimeout = 20 * time.Millisecond
			srv := newServer(cfg, newFakeTokens())
			r := post(t, srv, tokenA, strings.NewReader(reqBody(twoItems)))
			if r.status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", r.status, tc.wantStatus, r.raw)
			}
			if !r.err.ResendSafe {
				t.Error("resend_safe not set")
			}
			if tc.wantStatus != 503 {
				return
			}
			if r.err.Error != apiv1.ErrUnavailable || !strings.Contains(r.err.Message, "resending the same request unchanged is safe") {
				t.Errorf("body %s", r.raw)
			}
			secs, err := strconv.Atoi(r.header.Get("Retry-After"))
			if err != nil || secs < 3 || secs > 6 || secs != r.err.RetryAfterSeconds {
				t.Errorf("Retry-After %q (body %d), want 3..6 and equal", r.header.Get("Retry-After"), r.err.RetryAfterSeconds)
			}
		})
	}
}

// TestTokenStoreDown: a failing token lookup is 503 too (and the body is not read).
func TestTokenStoreDown(t *testing.T) {
	tokens := newFakeTokens()
	tokens.err = errors.New("connection refused")
	sink := &fakeSink{}
	srv := newServer(testConfig(t, sink), tokens)
	req := httptest.NewRequest(http.MethodPost, apiv1.CountsPath, failingReader{t})
	req.Header.Set("Authorization", "Bearer "+tokenA)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("status %d Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	if sink.numCalls() != 0 {
		t.Error("sink called")
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		base     time.Duration
		min, max int
	}{
		{0, 1, 2},
		{time.Millisecond, 1, 2},
		{time.Second, 1, 2},
		{1500 * time.Millisecond, 2, 4},
		{5 * time.Second, 5, 10},
	}
	for _, tc := range tests {
		seen := map[int]bool{}
		for i := 0; i < 2000; i++ {
			s := retryAfterSeconds(tc.base)
			if s < tc.min || s > tc.max {
				t.Fatalf("retryAfterSeconds(%v) = %d, want %d..%d", tc.base, s, tc.min, tc.max)
			}
			seen[s] = true
		}
		if len(seen) != tc.max-tc.min+1 {
			t.Errorf("retryAfterSeconds(%v) drew only %v: not jittered over the range", tc.base, seen)
		}
	}
}

// TestScratchReuse: an answer does not depend on the requests the server answered before
// (which leave their parsed counts and answer items in the reused scratch): each one is
// byte for byte what a fresh server answers, and what encoding/json makes of it.
func TestScratchReuse(t *testing.T) {
	// Items named r… are rejected with an error, s… are stale, the others applied.
	sinkFn := func(_ context.Context, items []bulk.Item) ([]bulk.Result, error) {
		res := make([]bulk.Result, len(items))
		for i, it := range items {
			switch it.ID[0] {
			case 'r':
				res[i] = bulk.Result{Outcome: bulk.OutcomeRejected, Err: errors.New("refused " + it.ID)}
			case 's':
				res[i].Outcome = bulk.OutcomeStale
			default:
				res[i].Outcome = bulk.OutcomeApplied
			}
		}
		return res, nil
	}
	bodies := []string{
		reqBody(`[{"id":"r1","type":"t","online":1},{"id":"r2","type":"t","online":2},{"id":"s3","type":"t","online":3},{"id":"a4","type":"t","online":4},{"id":"r5","type":"t","online":5}]`),
		reqBody(`[{"id":"a1","type":"u","online":9},{"id":"a2","type":"u","online":8}]`),
		reqBody(`[]`),
		reqBody(`[{"id":"a1","type":"t","online":1},{"id":"a1","type":"t","online":2}]`),  // 400
		`{"project":"proj-a","timestamp":"2024-05-01T10:05:00Z","submission_id":"sub-2"}`, // 400
		reqBody(`[{"id":"s1","type":"t","online":1},{"id":"a2","type":"t","online":2},{"id":"a3","type":"t","online":3}]`),
		`{"project":"proj-a","timestamp":"2024-05-01T10:05:00Z","submission_id":"sub-3","counts":[]}`,
		reqBody(`[{"id":"a1","type":"t","online":1}]`),
	}
	sink := &fakeSink{fn: sinkFn}
	srv := newServer(testConfig(t, sink), newFakeTokens())
	for round := range 3 {
		for i, body := range bodies {
			before := sink.numCalls()
			got := post(t, srv, tokenA, strings.NewReader(body))
			freshSink := &fakeSink{fn: sinkFn}
			want := post(t, newServer(testConfig(t, freshSink), newFakeTokens()), tokenA, strings.NewReader(body))
			if got.status != want.status || got.raw != want.raw || !reflect.DeepEqual(got.header, want.header) {
				t.Fatalf("round %d body %d: reused server %d %v\n%s\nfresh server %d %v\n%s",
					round, i, got.status, got.header, got.raw, want.status, want.header, want.raw)
			}
			// The items handed to the sink come from a reused slice: exactly this request's.
			if calls := sink.calls[before:]; len(calls) != len(freshSink.calls) || len(calls) > 0 && !reflect.DeepEqual(calls, freshSink.calls) {
				t.Fatalf("round %d body %d: reused server submitted %v, fresh server %v", round, i, sink.calls[before:], freshSink.calls)
			}
			if got.ok == nil {
				continue
			}
			var enc bytes.Buffer
			e := json.NewEncoder(&enc)
			e.SetEscapeHTML(false)
			if err := e.Encode(got.ok); err != nil {
				t.Fatal(err)
			}
			if got.raw != enc.String() {
				t.Fatalf("round %d body %d: answer\n%s\nencoding/json\n%s", round, i, got.raw, enc.String())
			}
		}
	}
}

// gateSink is a Sink that is also a StoreGate: down, with a fixed Retry-After.
type gateSink struct {
	fakeSink
	down       bool
	retryAfter time.Duration
	checks     int
}

func (g *gateSink) Available(context.Context) error {
	g.checks++
	if g.down {
		return &bulk.StoreDownError{Since: testNow(), Reason: "probe failed"}
	}
	return nil
}

func (g *gateSink) RetryAfter() time.Duration {
	if !g.down {
		return 0
	}
	return g.retryAfter
}

// TestStoreGate: while the Sink says the store is down, a submission is answered 503 with the
// Sink's Retry-After (to the nearest second) before its token is looked up or anything is
// written; once it is up again, submissions go through.
func TestStoreGate(t *testing.T) {
	for _, tc := range []struct {
		retryAfter time.Duration
		want       string
	}{
		{time.Second, "1"}, {1400 * time.Millisecond, "1"}, {1500 * time.Millisecond, "2"}, {17300 * time.Millisecond, "17"},
	} {
		sink := &gateSink{down: true, retryAfter: tc.retryAfter}
		tokens := newFakeTokens()
		srv := newServer(testConfig(t, sink), tokens)
		r := post(t, srv, tokenA, strings.NewReader(reqBody(`[{"id":"p1","type":"process","online":3}]`)))
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != tc.want || r.err.Error != apiv1.ErrUnavailable ||
			!r.err.ResendSafe || fmt.Sprint(r.err.RetryAfterSeconds) != tc.want {
			t.Fatalf("Retry-After %v: status %d, Retry-After %q: %s", tc.retryAfter, r.status, r.header.Get("Retry-After"), r.raw)
		}
		tokens.mu.Lock()
		lookups := tokens.lookups
		tokens.mu.Unlock()
		if lookups != 0 || sink.numCalls() != 0 {
			t.Fatalf("during the outage: %d token lookups, %d Submits", lookups, sink.numCalls())
		}
		sink.down = false
		if r := post(t, srv, tokenA, strings.NewReader(reqBody(`[{"id":"p1","type":"process","online":3}]`))); r.status != http.StatusOK || sink.numCalls() != 1 {
			t.Fatalf("after the outage: %d %s", r.status, r.raw)
		}
	}
}
