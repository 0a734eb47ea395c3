package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/bulk"
)

// testNow is the fake server clock: 2.5 minutes into the 10:05 tick.
func testNow() time.Time { return time.Date(2024, 5, 1, 10, 7, 30, 0, time.UTC) }

const (
	tokenA   = "token-of-project-a"
	tokenB   = "token-of-project-b"
	tokenDel = "token-of-deleted-project"
	// Tokens of proj-a that were revoked, that expired, and that expire after testNow.
	tokenRevoked  = "token-revoked"
	tokenExpired  = "token-expired"
	tokenExpiring = "token-expiring"
)

// fakeSink records every Submit and answers with fn (default: everything applied).
type fakeSink struct {
	mu    sync.Mutex
	calls [][]bulk.Item
	fn    func(ctx context.Context, items []bulk.Item) ([]bulk.Result, error)
}

func (f *fakeSink) Submit(ctx context.Context, items []bulk.Item) ([]bulk.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, append([]bulk.Item(nil), items...))
	f.mu.Unlock()
	if f.fn != nil {
		return f.fn(ctx, items)
	}
	res := make([]bulk.Result, len(items))
	for i := range res {
		res[i].Outcome = bulk.OutcomeApplied
	}
	return res, nil
}

func (f *fakeSink) numCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// fakeTokens is a tokenStore over a map of token hashes.
type fakeTokens struct {
	mu      sync.Mutex
	tokens  map[string]tokenInfo
	err     error
	lookups int
	block   chan struct{} // when set, lookups wait for it to be closed
}

func newFakeTokens() *fakeTokens {
	return &fakeTokens{tokens: map[string]tokenInfo{
		HashToken(tokenA):   {project: "proj-a", projectExists: true},
		HashToken(tokenB):   {project: "proj-b", projectExists: true},
		HashToken(tokenDel): {project: "gone", projectExists: false},
		HashToken(tokenRevoked): {project: "proj-a", projectExists: true, revokedAt: testNow().Add(-time.Hour),
			expiresAt: testNow().Add(time.Hour)},
		HashToken(tokenExpired):  {project: "proj-a", projectExists: true, expiresAt: testNow()},
		HashToken(tokenExpiring): {project: "proj-a", projectExists: true, expiresAt: testNow().Add(time.Nanosecond)},
	}}
}

func (f *fakeTokens) lookupToken(ctx context.Context, hash string) (tokenInfo, bool, error) {
	f.mu.Lock()
	f.lookups++
	block, err := f.block, f.err
	info, ok := f.tokens[hash]
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return tokenInfo{}, false, ctx.Err()
		}
	}
	if err != nil {
		return tokenInfo{}, false, err
	}
	return info, ok, nil
}

func (f *fakeTokens) numLookups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookups
}

// testConfig is the configuration of most tests: small limits to test them cheaply.
func testConfig(t *testing.T, sink Sink) Config {
	return Config{
		MaxBodyBytes: 4096,
		MaxItems:     5,
		MaxOnline:    1000,
		Sink:         sink,
		Logger:       zaptest.NewLogger(t),
		Now:          testNow,
	}
}

type result struct {
	status int
	header http.Header
	ok     *apiv1.CountsResponse
	err    *apiv1.ErrorResponse
	raw    string
}

// post sends body to srv with the token (none when "") and decodes the answer.
func post(t *testing.T, srv http.Handler, token string, body io.Reader) result {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, apiv1.CountsPath, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return do(t, srv, req)
}

// do serves req and decodes the answer.
func do(t *testing.T, srv http.Handler, req *http.Request) result {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	r := result{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	if ct := rec.Header().Get("Content-Type"); rec.Code != http.StatusMethodNotAllowed && ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json (body %s)", ct, r.raw)
	}
	dec := json.NewDecoder(strings.NewReader(r.raw))
	dec.DisallowUnknownFields()
	var err error
	if rec.Code == http.StatusOK {
		r.ok = &apiv1.CountsResponse{}
		err = dec.Decode(r.ok)
	} else if rec.Code != http.StatusMethodNotAllowed {
		r.err = &apiv1.ErrorResponse{}
		err = dec.Decode(r.err)
	}
	if err != nil {
		t.Fatalf("decode %d answer %q: %v", rec.Code, r.raw, err)
	}
	return r
}

// reqBody is a valid request for proj-a with the given counts array.
func reqBody(counts string) string {
	return `{"project":"proj-a","timestamp":"2024-05-01T10:05:00Z","observed_at":"2024-05-01T10:05:01.5Z","submission_id":"sub-1","counts":` + counts + `}`
}

// failingReader fails the test if the handler reads the body.
type failingReader struct{ t *testing.T }

func (r failingReader) Read([]byte) (int, error) {
	r.t.Error("the body was read")
	return 0, errors.New("must not be read")
}

func (f *fakeTokens) touchTokens(context.Context, map[string]time.Time) error { return nil }
