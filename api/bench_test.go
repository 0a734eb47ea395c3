package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/gameops/rollup/api/apiv1"
)

// BenchmarkHandleCounts measures the API's own cost per request (auth from cache, decode,
// validate, answer) with a no-op Sink: 10 leaves per request, as one agent's tick.
func BenchmarkHandleCounts(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("leaves=%d", n), func(b *testing.B) {
			cfg := Config{Sink: &fakeSink{}, Logger: zap.NewNop(), Now: testNow}
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
