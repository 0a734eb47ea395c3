package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
)

// TestCollector: /metrics shows the last tick sent, the spool's depth and the send errors by
// status, from the agent's counters at scrape time.
func TestCollector(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), 1<<20, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := sp.Append(rec(i, time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	st := &Stats{}
	st.update(func(s *StatsSnapshot) {
		s.TicksSent = 3
		s.LastSentTick = t0.Add(-5 * time.Minute) // 2026-11-28T09:55:00Z: 1795859700
		bump(&s.SendErrors, "503", 4)
		bump(&s.SendErrors, SendErrorNetwork, 1)
		bump(&s.Dropped, DropExpired, 2)
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(st, sp))
	want := `
# HELP rollup_agent_last_sent_tick_timestamp_seconds The newest tick the API answered 200 for (0: none yet).
# TYPE rollup_agent_last_sent_tick_timestamp_seconds gauge
rollup_agent_last_sent_tick_timestamp_seconds 1.7958597e+09
# HELP rollup_agent_send_errors_total Failed sends by HTTP status ("network": no answer).
# TYPE rollup_agent_send_errors_total counter
rollup_agent_send_errors_total{status="503"} 4
rollup_agent_send_errors_total{status="network"} 1
# HELP rollup_agent_spool_ticks Ticks waiting in the spool.
# TYPE rollup_agent_spool_ticks gauge
rollup_agent_spool_ticks 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rollup_agent_last_sent_tick_timestamp_seconds",
		"rollup_agent_send_errors_total", "rollup_agent_spool_ticks"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "rollup_agent_ticks_dropped_total"); err != nil || n != 4 {
		t.Errorf("ticks_dropped_total: %d series, %v; want one per reason", n, err)
	}
}
