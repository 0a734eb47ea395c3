package api

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gameops/rollup/bulk"
)

// TestStats sends a sequence of ingest requests and checks the counters after each.
func TestStats(t *testing.T) {
	sink := &fakeSink{}
	tokens := newFakeTokens()
	srv := newServer(testConfig(t, sink), tokens)
	valid := reqBody(`[{"id":"a","type":"process","online":1},{"id":"b","type":"process","online":2}]`)
	steps := []struct {
		name       string
		token      string
		body       string
		sink       func(ctx context.Context, items []bulk.Item) ([]bulk.Result, error)
		status     int
		requests   map[int]int64
		rejections map[string]int64
		items      map[string]int64
	}{
		{
			name: "applied", token: tokenA, body: valid, status: http.StatusOK,
			requests: map[int]int64{200: 1}, rejections: map[string]int64{},
			items: map[string]int64{"applied": 2, "stale": 0, "rejected": 0},
		},
		{
			name: "no token", body: valid, status: http.StatusUnauthorized,
			requests: map[int]int64{200: 1, 401: 1}, rejections: map[string]int64{"unauthorized": 1},
			items: map[string]int64{"applied": 2, "stale": 0, "rejected": 0},
		},
		{
			name: "an invalid item", token: tokenA, body: reqBody(`[{"id":"a","type":"process","online":-1}]`), status: http.StatusBadRequest,
			requests: map[int]int64{200: 1, 401: 1, 400: 1}, rejections: map[string]int64{"unauthorized": 1, "invalid_item": 1},
			items: map[string]int64{"applied": 2, "stale": 0, "rejected": 0},
		},
		{
			name: "another project", token: tokenB, body: valid, status: http.StatusForbidden,
			requests: map[int]int64{200: 1, 401: 1, 400: 1, 403: 1}, rejections: map[string]int64{"unauthorized": 1, "invalid_item": 1, "forbidden": 1},
			items: map[string]int64{"applied": 2, "stale": 0, "rejected": 0},
		},
		{
			name: "stale and rejected items", token: tokenA, body: valid, status: http.StatusOK,
			sink: func(_ context.Context, items []bulk.Item) ([]bulk.Result, error) {
				return []bulk.Result{{Outcome: bulk.OutcomeStale}, {Outcome: bulk.OutcomeRejected, Err: errors.New("no")}}, nil
			},
			requests: map[int]int64{200: 2, 401: 1, 400: 1, 403: 1}, rejections: map[string]int64{"unauthorized": 1, "invalid_item": 1, "forbidden": 1},
			items: map[string]int64{"applied": 2, "stale": 1, "rejected": 1},
		},
		{
			name: "store unavailable", token: tokenA, body: valid, status: http.StatusServiceUnavailable,
			sink: func(_ context.Context, items []bulk.Item) ([]bulk.Result, error) {
				return make([]bulk.Result, len(items)), bulk.ErrUnavailable
			},
			requests: map[int]int64{200: 2, 401: 1, 400: 1, 403: 1, 503: 1}, rejections: map[string]int64{"unauthorized": 1, "invalid_item": 1, "forbidden": 1, "unavailable": 1},
			items: map[string]int64{"applied": 2, "stale": 1, "rejected": 1},
		},
	}
	for _, st := range steps {
		sink.fn = st.sink
		r := post(t, srv, st.token, strings.NewReader(st.body))
		if r.status != st.status {
			t.Fatalf("%s: status %d, want %d (%s)", st.name, r.status, st.status, r.raw)
		}
		got := srv.Stats()
		// Every known status and code is there from the start, at 0 until it happens.
		if len(got.Requests) != len(IngestStatuses()) || len(got.Rejections) != len(IngestErrorCodes()) {
			t.Fatalf("%s: %d statuses and %d codes, want every known one (%d, %d)", st.name, len(got.Requests), len(got.Rejections),
				len(IngestStatuses()), len(IngestErrorCodes()))
		}
		if !maps.Equal(nonZero(got.Requests), st.requests) || !maps.Equal(nonZero(got.Rejections), st.rejections) || !maps.Equal(got.Items, st.items) {
			t.Fatalf("%s: stats %+v, want requests %v rejections %v items %v", st.name, got, st.requests, st.rejections, st.items)
		}
	}
	// Reads are not ingest requests.
	before := srv.Stats()
	req := httptest.NewRequest(http.MethodGet, "/v1/projects", nil)
	srv.ServeHTTP(httptest.NewRecorder(), req)
	if after := srv.Stats(); !maps.Equal(after.Requests, before.Requests) {
		t.Fatalf("a read changed the ingest requests: %v → %v", before.Requests, after.Requests)
	}
}

// nonZero returns the entries of m that are not 0.
func nonZero[K comparable](m map[K]int64) map[K]int64 {
	out := map[K]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
