package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/api/apiv1"
)

// BenchmarkHandleCounts measures the API's own cost per request (auth from cache, decode,
// validate, answer) with a no-op Sink: 10 leaves per request, as one agent's tick.
func BenchmarkHandleCounts(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("leaves=%d", n), func(b *testing.B) {
			cfg := Config{Sink: &fakeSink{}, Logger: zap.NewNop(), Now: testNow, TokenRPS: -1, TokenLeavesPerSecond: -1} // no per-token limits: one token makes every request
			srv := newServer(cfg, newFakeTokens())
			var sb strings.Builder
			sb.WriteString("[")
			for i := 0; i < n; i++ {
				if i > 0 {
					sb.WriteString(",")
				}
				fmt.Fprintf(&sb, `{"id":"eu-1-srv-%05d","type":"proc","online":%d}`, i, i%50)
			}
			sb.WriteString("]")
			body := reqBody(sb.String())
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req := httptest.NewRequest(http.MethodPost, apiv1.CountsPath, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+tokenA)
				rec := httptest.NewRecorder()
				srv.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "leaves/s")
		})
	}
}

// BenchmarkClientToAPI measures one agent submission end to end over loopback TCP: agent
// client encoding, HTTP both ways, the API's own work and the client's decoding (no-op Sink).
func BenchmarkClientToAPI(b *testing.B) {
	cfg := Config{Sink: &fakeSink{}, Logger: zap.NewNop(), Now: testNow, TokenRPS: -1, TokenLeavesPerSecond: -1} // no per-token limits: one token makes every request
	hs := httptest.NewServer(newServer(cfg, newFakeTokens()))
	defer hs.Close()
	client := &agentclient.Client{BaseURL: hs.URL, Token: tokenA, HTTP: hs.Client()}
	counts := make([]apiv1.Count, 10)
	for i := range counts {
		counts[i] = apiv1.Count{ID: fmt.Sprintf("eu-1-srv-%05d", i), Type: "proc", Online: int64(i)}
	}
	sub := agentclient.Submission{Project: "proj-a", Timestamp: time.Date(2024, 5, 1, 10, 5, 0, 0, time.UTC),
		ObservedAt: time.Date(2024, 5, 1, 10, 5, 1, 0, time.UTC), Counts: counts}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := client.Submit(context.Background(), sub); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(counts))/b.Elapsed().Seconds(), "leaves/s")
}

// BenchmarkParseRequest measures the parse of an ingest request body alone: the hand-written
// path the handler uses (decodeBody: the plain-JSON scanner, falling back to encoding/json),
// the strict encoding/json token parser on its own (parseRequest, the fallback), and, for
// reference, json.Unmarshal into a struct, which is not strict enough to be the parser (it
// matches keys case-insensitively, keeps the last of repeated keys and stops at the first
// error). docs/benchmarks.md records the numbers behind keeping the hand-written path.
func BenchmarkParseRequest(b *testing.B) {
	type count struct {
		ID     string      `json:"id"`
		Type   string      `json:"type"`
		Online json.Number `json:"online"`
	}
	type request struct {
		Project      *string `json:"project"`
		Timestamp    *string `json:"timestamp"`
		ObservedAt   *string `json:"observed_at"`
		SubmissionID *string `json:"submission_id"`
		Counts       []count `json:"counts"`
	}
	for _, n := range []int{10, 1000} {
		var sb strings.Builder
		sb.WriteString("[")
		for i := 0; i < n; i++ {
			if i > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `{"id":"eu-1-srv-%05d","type":"proc","online":%d}`, i, i%50)
		}
		sb.WriteString("]")
		body := []byte(reqBody(sb.String()))
		b.Run(fmt.Sprintf("handwritten/leaves=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var into rawRequest
			for range b.N {
				if _, herr := decodeBody(body, 10_000, &into); herr != nil {
					b.Fatal(herr)
				}
			}
		})
		b.Run(fmt.Sprintf("encoding-json-tokens/leaves=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for range b.N {
				if _, herr := parseRequest(body, 10_000); herr != nil {
					b.Fatal(herr)
				}
			}
		})
		b.Run(fmt.Sprintf("encoding-json-unmarshal/leaves=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for range b.N {
				var r request
				dec := json.NewDecoder(bytes.NewReader(body))
				dec.UseNumber()
				dec.DisallowUnknownFields()
				if err := dec.Decode(&r); err != nil || len(r.Counts) != n {
					b.Fatal(err)
				}
			}
		})
	}
}
