package api

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/api/apiv1"
)

// TestBucket: a token bucket against a naive model that counts the tokens granted over
// time, on a random schedule of requests.
func TestBucket(t *testing.T) {
	t0 := testNow()
	type step struct {
		at   time.Duration
		n    float64
		ok   bool
		wait time.Duration
	}
	for _, tc := range []struct {
		name        string
		rate, burst float64
		steps       []step
	}{
		{"a full bucket, then its rate", 2, 4, []step{
			{0, 1, true, 0}, {0, 1, true, 0}, {0, 1, true, 0}, {0, 1, true, 0},
			{0, 1, false, 500 * time.Millisecond},
			{250 * time.Millisecond, 1, false, 250 * time.Millisecond},
			{500 * time.Millisecond, 1, true, 0},
			{time.Hour, 4, true, 0}, // refilled, never beyond the burst
			{time.Hour, 1, false, 500 * time.Millisecond},
		}},
		{"more than the burst takes a full bucket", 10, 100, []step{
			{0, 1000, true, 0}, {0, 1, false, 100 * time.Millisecond}, {10 * time.Second, 5000, true, 0},
		}},
		{"a refused take takes nothing", 1, 10, []step{
			{0, 8, true, 0}, {0, 5, false, 3 * time.Second}, {0, 2, true, 0},
		}},
		{"a clock going back refills nothing", 1, 2, []step{
			{time.Second, 2, true, 0}, {0, 1, false, time.Second}, {time.Second, 1, false, time.Second},
		}},
	} {
		var b bucket
		for i, st := range tc.steps {
			ok, wait := b.take(st.n, tc.rate, tc.burst, t0.Add(st.at))
			if ok != st.ok || (wait-st.wait).Abs() > time.Millisecond {
				t.Errorf("%s: step %d (take %g at %s): %v, wait %s; want %v, %s", tc.name, i, st.n, st.at, ok, wait, st.ok, st.wait)
			}
		}
	}
}

// TestTokenLimits: past its requests per second a token gets 429 with Retry-After before its
// body is read; past its counts per second, 429 before anything is written; another token is
// not affected; an idle token's state is forgotten.
func TestTokenLimits(t *testing.T) {
	clock := &fakeClock{now: testNow()}
	sink := &fakeSink{}
	cfg := testConfig(t, sink)
	cfg.Now = clock.Now
	cfg.TokenRPS = 2             // burst 20
	cfg.TokenLeavesPerSecond = 3 // burst 30
	srv := newServer(cfg, newFakeTokens())
	post := func(token string, body io.Reader) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, apiv1.CountsPath, body)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	// Counts: 15 requests of 2 items spend the 30 counts; the 16th is refused after parsing.
	for i := range 15 {
		if rec := post(tokenA, strings.NewReader(reqBody(twoItems))); rec.Code != 200 {
			t.Fatalf("request %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	rec := post(tokenA, strings.NewReader(reqBody(twoItems)))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" ||
		!strings.Contains(rec.Body.String(), `"error":"rate_limited"`) || !strings.Contains(rec.Body.String(), "3 counts per second") ||
		!strings.Contains(rec.Body.String(), `"retry_after_seconds":1`) {
		t.Fatalf("over the counts: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	if n := sink.numCalls(); n != 15 {
		t.Fatalf("%d submissions written, want 15", n)
	}
	// Requests: 4 more are allowed (20 in all), then 429 without reading the body.
	for i := range 4 {
		clock.Advance(time.Second) // refills 3 counts: one more request of 2 items
		if rec := post(tokenA, strings.NewReader(reqBody(twoItems))); rec.Code != 200 {
			t.Fatalf("request %d after refill: %d %s", i, rec.Code, rec.Body)
		}
	}
	// 20 requests were taken; 4 s refilled 8. Spend them without counts, on a body never read.
	for i := range 8 {
		if rec := post(tokenA, strings.NewReader(reqBody(`[]`))); rec.Code != 200 {
			t.Fatalf("empty request %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	rec = post(tokenA, failingReader{t})
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), "2 requests per second") {
		t.Fatalf("over the requests: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	if rec := post(tokenB, strings.NewReader(strings.Replace(reqBody(twoItems), `"proj-a"`, `"proj-b"`, 1))); rec.Code != 200 {
		t.Fatalf("another token: %d %s", rec.Code, rec.Body)
	}
	// Reads count against the requests limit too.
	req := httptest.NewRequest(http.MethodGet, apiv1.ProjectsPath, nil)
	req.Header.Set("Authorization", "Bearer "+tokenA)
	rr := httptest.NewRecorder()
	srv.ServeHTTP(rr, req)
	if rr.Code != http.StatusTooManyRequests {
		t.Errorf("a read over the limit: %d %s", rr.Code, rr.Body)
	}
	if n := srv.limits.size(); n != 2 {
		t.Errorf("%d tokens with state, want 2", n)
	}
	clock.Advance(9 * time.Second)
	srv.limits.evictIdle(clock.Now())
	if n := srv.limits.size(); n != 2 {
		t.Errorf("%d tokens with state 9 s later, want 2 (buckets not full yet)", n)
	}
	clock.Advance(time.Second)
	srv.limits.evictIdle(clock.Now())
	if n := srv.limits.size(); n != 0 {
		t.Errorf("%d tokens with state once their buckets are full, want 0", n)
	}
}

// TestTokenLimitsBounded: the limiter's table never holds more than maxLimitedTokens tokens;
// past it, idle tokens make room, and with none idle a new token is let through unlimited.
func TestTokenLimitsBounded(t *testing.T) {
	l := newTokenLimits(newRateLimit(1, LimitBurst, 1), rateLimit{})
	now := testNow()
	for i := range maxLimitedTokens {
		if ok, _ := l.allowRequest(fmt.Sprint(i), now); !ok {
			t.Fatal("refused a fresh token")
		}
	}
	if ok, _ := l.allowRequest("extra", now); !ok || l.size() != maxLimitedTokens {
		t.Fatalf("a token past the table: %v, size %d", ok, l.size())
	}
	later := now.Add(LimitBurst)
	if ok, _ := l.allowRequest("extra", later); !ok || l.size() != 1 {
		t.Errorf("after the others went idle: %v, size %d, want 1", ok, l.size())
	}
	for range 9 { // the rest of its burst of 10
		l.allowRequest("extra", later)
	}
	if ok, _ := l.allowRequest("extra", later); ok {
		t.Error("the limit no longer applies to the token")
	}
}

// TestTokenBurst: Config.TokenBurst sets how much of its rate an idle token may spend at
// once: 2 requests per second with a 3 s burst admit 6 requests at once, not LimitBurst's 20.
func TestTokenBurst(t *testing.T) {
	clock := &fakeClock{now: testNow()}
	cfg := testConfig(t, &fakeSink{})
	cfg.Now = clock.Now
	cfg.TokenRPS = 2
	cfg.TokenBurst = 3 * time.Second
	srv := newServer(cfg, newFakeTokens())
	codes := make([]int, 0, 7)
	for range 7 {
		req := httptest.NewRequest(http.MethodPost, apiv1.CountsPath, strings.NewReader(reqBody(`[]`)))
		req.Header.Set("Authorization", "Bearer "+tokenA)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		codes = append(codes, rec.Code)
	}
	if want := []int{200, 200, 200, 200, 200, 200, 429}; fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Fatalf("answers %v, want %v", codes, want)
	}
}
