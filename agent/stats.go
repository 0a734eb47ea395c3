package agent

import (
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a tick leaves the spool without being applied (Stats.Dropped).
const (
	DropFull     = "full"     // the spool was full: the oldest tick made room
	DropExpired  = "expired"  // past the late-data window: the API would refuse it
	DropRejected = "rejected" // the API refused it for good (400, 413, 422): resending cannot help
	DropCorrupt  = "corrupt"  // its spool file failed its checksum: never sent
)

// SendErrorNetwork is the status label of a send that got no HTTP answer.
const SendErrorNetwork = "network"

// Stats are the agent's counters. The zero value is ready; it is safe for concurrent use.
type Stats struct {
	mu sync.Mutex
	s  StatsSnapshot
}

// StatsSnapshot is a copy of the counters.
type StatsSnapshot struct {
	// TicksSampled counts the records spooled; TicksSent those the API answered 200.
	TicksSampled, TicksSent int64
	// LastSentTick is the newest tick the API answered 200 for; LastSentAt when.
	LastSentTick, LastSentAt time.Time
	// SendErrors counts failed sends by HTTP status ("503", "429") or SendErrorNetwork.
	SendErrors map[string]int64
	// Dropped counts ticks that left the spool unsent, by reason (DropFull…).
	Dropped map[string]int64
	// LeafErrors counts leaves reported missing, by source.
	LeafErrors map[string]int64
	// Items counts the API's per-item answers by status (applied, stale, rejected).
	Items map[string]int64
	// ReloadErrors counts configurations refused by a reload (the old one was kept).
	ReloadErrors int64
}

func (st *Stats) update(f func(s *StatsSnapshot)) {
	st.mu.Lock()
	defer st.mu.Unlock()
	f(&st.s)
}

func bump(m *map[string]int64, k string, n int64) {
	if *m == nil {
		*m = map[string]int64{}
	}
	(*m)[k] += n
}

// Snapshot returns a copy of the counters.
func (st *Stats) Snapshot() StatsSnapshot {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := st.s
	out.SendErrors = maps.Clone(st.s.SendErrors)
	out.Dropped = maps.Clone(st.s.Dropped)
	out.LeafErrors = maps.Clone(st.s.LeafErrors)
	out.Items = maps.Clone(st.s.Items)
	return out
}

// Collector exposes an agent's Stats and its spool's depth as rollup_agent_* series, read at
// scrape time.
type Collector struct {
	stats *Stats
	spool *Spool

	sampled, sent, lastTick, lastAt, depth, depthBytes, sendErrs, dropped, leafErrs, items, reloadErrs *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns the collector of stats and spool.
func NewCollector(stats *Stats, spool *Spool) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("rollup_agent_"+name, help, labels, nil)
	}
	return &Collector{stats: stats, spool: spool,
		sampled:    d("ticks_sampled_total", "Ticks sampled and written to the spool."),
		sent:       d("ticks_sent_total", "Spooled ticks the API answered 200 for (every item final)."),
		lastTick:   d("last_sent_tick_timestamp_seconds", "The newest tick the API answered 200 for (0: none yet)."),
		lastAt:     d("last_sent_timestamp_seconds", "When the last tick was sent (0: none yet)."),
		depth:      d("spool_ticks", "Ticks waiting in the spool."),
		depthBytes: d("spool_bytes", "Bytes of the ticks waiting in the spool."),
		sendErrs:   d("send_errors_total", `Failed sends by HTTP status ("network": no answer).`, "status"),
		dropped:    d("ticks_dropped_total", "Ticks that left the spool unsent: full (oldest dropped), expired (past the late-data window), rejected (400/413/422), corrupt (bad checksum).", "reason"),
		leafErrs:   d("leaf_errors_total", "Leaves reported missing because their source failed or gave a bad value, by source.", "source"),
		items:      d("items_total", "The API's per-item answers by status.", "status"),
		reloadErrs: d("reload_errors_total", "Configurations a reload (SIGHUP) refused; the running one was kept."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sampled, c.sent, c.lastTick, c.lastAt, c.depth, c.depthBytes, c.sendErrs, c.dropped, c.leafErrs, c.items, c.reloadErrs} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats.Snapshot()
	n, bytes := c.spool.Depth()
	unix := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return float64(t.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(c.sampled, prometheus.CounterValue, float64(s.TicksSampled))
	ch <- prometheus.MustNewConstMetric(c.sent, prometheus.CounterValue, float64(s.TicksSent))
	ch <- prometheus.MustNewConstMetric(c.lastTick, prometheus.GaugeValue, unix(s.LastSentTick))
	ch <- prometheus.MustNewConstMetric(c.lastAt, prometheus.GaugeValue, unix(s.LastSentAt))
	ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.depthBytes, prometheus.GaugeValue, float64(bytes))
	ch <- prometheus.MustNewConstMetric(c.reloadErrs, prometheus.CounterValue, float64(s.ReloadErrors))
	for _, reason := range []string{DropFull, DropExpired, DropRejected, DropCorrupt} {
		ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(s.Dropped[reason]), reason)
	}
	for k, v := range s.SendErrors {
		ch <- prometheus.MustNewConstMetric(c.sendErrs, prometheus.CounterValue, float64(v), k)
	}
	for k, v := range s.LeafErrors {
		ch <- prometheus.MustNewConstMetric(c.leafErrs, prometheus.CounterValue, float64(v), k)
	}
	for k, v := range s.Items {
		ch <- prometheus.MustNewConstMetric(c.items, prometheus.CounterValue, float64(v), k)
	}
}
