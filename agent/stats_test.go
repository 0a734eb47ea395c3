package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += fmt.Sprintf("{%s=%q}", l.GetName(), l.GetValue())
			}
			got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for name, want := range map[string]float64{
		"rollup_agent_last_sent_tick_timestamp_seconds":       1795859700,
		`rollup_agent_send_errors_total{status="503"}`:        4,
		`rollup_agent_send_errors_total{status="network"}`:    1,
		"rollup_agent_spool_ticks":                            2,
		"rollup_agent_ticks_sent_total":                       3,
		`rollup_agent_ticks_dropped_total{reason="expired"}`:  2,
		`rollup_agent_ticks_dropped_total{reason="full"}`:     0,
		`rollup_agent_ticks_dropped_total{reason="corrupt"}`:  0,
		`rollup_agent_ticks_dropped_total{reason="rejected"}`: 0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}
