package metrics

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gameops/rollup/api"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/internal/hist"
	"github.com/gameops/rollup/internal/status"
	"github.com/gameops/rollup/metrics/totals"
	"github.com/gameops/rollup/retention"
	"github.com/gameops/rollup/store"
	"github.com/gameops/rollup/watcher"
)

// Sources are the snapshots the collector reads at every scrape. A nil source's series are
// not exported (an instance without a watcher, say).
type Sources struct {
	// API is api.Server.Stats.
	API func() api.Stats
	// Bulk is bulk.Writer.Stats.
	Bulk func() bulk.Stats
	// Watcher is watcher.Watcher.Stats.
	Watcher func() watcher.Stats
	// Progress is watcher.Watcher.Progress.
	Progress func() watcher.Progress
	// Leadership is watcher.Watcher.Leadership.
	Leadership func() []watcher.PartitionState
	// Components are the components' readiness states (status.Tracker).
	Components func() []status.State
	// Totals is totals.Reader.Snapshot: the business numbers of the last complete tick.
	Totals func() totals.Snapshot
	// Retention is retention.Enforcer.Stats.
	Retention func() retention.Stats
	// Now is the clock of the lag and age gauges (default time.Now).
	Now func() time.Time
}

// NewRegistry returns a registry with the Go runtime and process collectors, for Register.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Register adds rollup's collector over src to reg.
func Register(reg prometheus.Registerer, src Sources) error {
	if src.Now == nil {
		src.Now = time.Now
	}
	return reg.Register(&collector{src: src})
}

// Handler returns the /metrics handler of g.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("rollup_"+name, help, labels, nil)
}

var _ prometheus.Collector = (*collector)(nil)

// collector turns the Sources' snapshots into const metrics at scrape time.
type collector struct {
	src Sources
}

// descs are every series' descriptions. A function, not a package variable: no globals.
type descs struct {
	ingestRequests, ingestRejections, ingestItems, readSeconds           *prometheus.Desc
	bulkBatches, bulkOps, bulkItems, bulkReissued, bulkRetries, bulkFail *prometheus.Desc
	bulkDown, bulkDownFor, bulkRefused, bulkProbes, bulkConflicts        *prometheus.Desc
	bulkInFlight                                                         *prometheus.Desc
	events, batches, parentWrites, conflicts, replays, orphans, invalid  *prometheus.Desc
	fenced, takeovers, leaseLosses, lastEvent                            *prometheus.Desc
	recompute, lag, checkpointAge, leader, term                          *prometheus.Desc
	tierWrites, tierConflicts, tierSeconds                               *prometheus.Desc
	componentReady, componentSince                                       *prometheus.Desc
	projOnline, projReported, projExpected, projComplete, projAge        *prometheus.Desc
	groupOnline, groupReported, groupExpected, groupComplete             *prometheus.Desc
	totRefreshes, totStale, totSuccess, totDuration, totTick             *prometheus.Desc
	totDropped, totInvalid                                               *prometheus.Desc
	retLeader, retPasses, retLastPass, retDeleted, retHorizon, retLag    *prometheus.Desc
	retBlocked, retInvalid                                               *prometheus.Desc
}

func newDescs() descs {
	return descs{
		ingestRequests:   desc("ingest_requests_total", "Ingest requests (POST /v1/counts) answered, by HTTP status.", "status"),
		ingestRejections: desc("ingest_rejections_total", "Ingest requests answered with an error, by error code (reason).", "reason"),
		ingestItems:      desc("ingest_items_total", "Items of successful ingest requests, by item status.", "status"),
		readSeconds:      desc("read_request_seconds", "Read API requests (GET /v1/projects...) by route and HTTP status: time to answer.", "route", "code"),
		bulkBatches:      desc("bulk_batches_total", "Batches the bulk writer cut and wrote."),
		bulkOps:          desc("bulk_batch_ops", "Operations per bulk batch (after deduplicating keys)."),
		bulkItems:        desc("bulk_items_total", "Items that reached a bulk batch, by final outcome.", "outcome"),
		bulkReissued:     desc("bulk_reissued_ops_total", "Operations re-issued after a duplicate-key error (E11000) and a read of their document."),
		bulkConflicts:    desc("bulk_conflict_ops_total", "Operations that met an existing document on the unique key (E11000), resolved by reading it."),
		bulkRetries:      desc("bulk_retries_total", "Whole BulkWrites resent once because their outcome was unknown, by error class.", "class"),
		bulkFail:         desc("bulk_failures_total", "BulkWrites whose items ended unavailable, by error class of the last error.", "class"),
		bulkDown:         desc("bulk_store_unavailable", "1 while the bulk writer knows the store is down and refuses submissions (503), else 0."),
		bulkDownFor:      desc("bulk_store_unavailable_seconds", "Seconds the current store outage has lasted (0 when the store is up)."),
		bulkRefused:      desc("bulk_refused_items_total", "Items answered unavailable without a write because the store was known to be down."),
		bulkProbes:       desc("bulk_probes_total", "Probes of the store while it was down (or before a resend), by result.", "result"),
		bulkInFlight:     desc("bulk_writes_in_flight_limit", "Leaf bulk writes this instance keeps in flight at most now: --bulk-workers, or the store's budget (half its cores, 2 to 8) shared by the live instances."),
		events:           desc("watcher_events_total", "Leaf events the watcher recomputed (replayed leaves included)."),
		batches:          desc("watcher_batches_total", "Non-empty change stream batches received."),
		parentWrites:     desc("watcher_parent_writes_total", "Parent and root document writes sent (conflicting and resent ones included)."),
		conflicts:        desc("watcher_conflicts_total", "Parent writes that lost the rev guard and were re-merged."),
		replays:          desc("watcher_history_lost_replays_total", "Lost history windows replayed from the leaves (ChangeStreamHistoryLost or no checkpoint)."),
		orphans:          desc("watcher_orphans_total", "Leaf events not in the tree of their tick: kept, excluded from totals."),
		invalid:          desc("watcher_invalid_total", "Malformed documents skipped."),
		fenced:           desc("watcher_fenced_total", "Partitions stopped because a newer lease term refused their writes."),
		takeovers:        desc("watcher_lease_takeovers_total", "Leases this instance acquired."),
		leaseLosses:      desc("watcher_lease_losses_total", "Leases this instance lost (releases at shutdown excluded)."),
		lastEvent:        desc("watcher_last_event_timestamp_seconds", "Wall time of the last leaf event the watcher read (unix seconds)."),
		recompute:        desc("watcher_recompute_seconds", "Time to recompute a burst of leaves (every ancestor written)."),
		tierWrites:       desc("watcher_tier_writes_total", "Hourly and daily summary writes sent (conflicting and resent ones included)."),
		tierConflicts:    desc("watcher_tier_conflicts_total", "Summary writes that lost the rev guard and were recomputed."),
		tierSeconds:      desc("watcher_tier_seconds", "Time to write the waiting hourly and daily summaries (when the stream is quiet, at most every 5 s while events flow)."),
		lag:              desc("watcher_lag_seconds", "Now minus the cluster time after the last processed change stream batch.", "checkpoint"),
		checkpointAge:    desc("watcher_checkpoint_age_seconds", "Now minus the time the last checkpoint was saved by this process.", "checkpoint"),
		leader:           desc("watcher_leader", "1 when this instance runs the partition (leads its lease), else 0.", "partition", "id"),
		term:             desc("watcher_leader_term", "Lease term this instance leads the partition with (0 without leases or when not leading).", "partition", "id"),
		componentReady:   desc("component_ready", "1 when the component makes progress, 0 while it cannot (see /readyz for the reason).", "component"),
		componentSince:   desc("component_state_seconds", "Seconds since the component's readiness last changed.", "component"),
		projOnline:       desc("project_online", "Root total of the project's last complete tick (see rollup_totals_tick_timestamp_seconds).", "project"),
		projReported:     desc("project_leaves_reported", "Leaves of the project that reported for the last complete tick.", "project"),
		projExpected:     desc("project_leaves_expected", "Leaves of the project's tree at the last complete tick.", "project"),
		projComplete:     desc("project_completeness_ratio", "Leaves reported / leaves expected of the project's last complete tick (0 to 1).", "project"),
		projAge:          desc("project_tick_age_seconds", "Now minus the start of the last complete tick the project's numbers are from.", "project"),
		groupOnline:      desc("group_online", "Total of a child of the project's root (a group) at the last complete tick (opt-in per project).", "project", "group"),
		groupReported:    desc("group_leaves_reported", "Leaves of the group that reported for the last complete tick.", "project", "group"),
		groupExpected:    desc("group_leaves_expected", "Leaves of the group in the tree at the last complete tick.", "project", "group"),
		groupComplete:    desc("group_completeness_ratio", "Leaves reported / leaves expected of the group at the last complete tick (0 to 1).", "project", "group"),
		totRefreshes:     desc("totals_refreshes_total", "Refreshes of the project and group numbers from the store, by result (ok, error).", "result"),
		totStale:         desc("totals_stale", "1 when the last refresh of the project numbers failed (the values are the last good ones), else 0."),
		totSuccess:       desc("totals_last_success_timestamp_seconds", "Wall time the last successful refresh of the project numbers started (unix seconds)."),
		totDuration:      desc("totals_refresh_seconds", "Duration of the last successful refresh of the project numbers."),
		totTick:          desc("totals_tick_timestamp_seconds", "Start of the last complete tick the project numbers are from (unix seconds)."),
		totDropped:       desc("totals_dropped", "Projects or groups not exported because of the caps (--totals-max-projects, --totals-max-groups), by kind.", "kind"),
		totInvalid:       desc("totals_invalid_roots", "Root documents of the last complete tick that could not be decoded (their projects are not exported)."),
		retLeader:        desc("retention_leader", "1 when this instance holds the retention lease and enforces retention, else 0."),
		retPasses:        desc("retention_passes_total", "Retention passes over every project this instance completed."),
		retLastPass:      desc("retention_last_pass_timestamp_seconds", "Wall time the last retention pass of this instance ended (unix seconds)."),
		retDeleted:       desc("retention_deleted_total", "Documents retention deleted, by tier (leaves, 5m, 1h, 1d).", "tier"),
		retHorizon:       desc("retention_horizon_timestamp_seconds", "Oldest retention horizon of the tier over the projects that do not keep it forever (documents before it may have been deleted; unix seconds).", "tier"),
		retLag:           desc("retention_lag_seconds", "How far deletion is behind schedule: the longest time, over the projects, between where the tier is due to be cut now and where it is known deleted.", "tier"),
		retBlocked:       desc("retention_blocked_projects", "Projects whose deletion of the tier waits for the summaries built from it (build them with rollup replay).", "tier"),
		retInvalid:       desc("retention_invalid_policies", "Projects retention leaves alone because their policy is refused or their override does not read (see the logs, rollup retention show)."),
	}
}

// Describe sends every series' description.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	d := newDescs()
	for _, x := range []*prometheus.Desc{
		d.ingestRequests, d.ingestRejections, d.ingestItems, d.readSeconds,
		d.bulkBatches, d.bulkOps, d.bulkItems, d.bulkReissued, d.bulkRetries, d.bulkFail,
		d.bulkDown, d.bulkDownFor, d.bulkRefused, d.bulkProbes, d.bulkConflicts, d.bulkInFlight,
		d.events, d.batches, d.parentWrites, d.conflicts, d.replays, d.orphans, d.invalid,
		d.fenced, d.takeovers, d.leaseLosses, d.lastEvent,
		d.recompute, d.lag, d.checkpointAge, d.leader, d.term,
		d.tierWrites, d.tierConflicts, d.tierSeconds,
		d.componentReady, d.componentSince,
		d.projOnline, d.projReported, d.projExpected, d.projComplete, d.projAge,
		d.groupOnline, d.groupReported, d.groupExpected, d.groupComplete,
		d.totRefreshes, d.totStale, d.totSuccess, d.totDuration, d.totTick, d.totDropped, d.totInvalid,
		d.retLeader, d.retPasses, d.retLastPass, d.retDeleted, d.retHorizon, d.retLag, d.retBlocked, d.retInvalid,
	} {
		ch <- x
	}
}

// Collect reads the sources and sends their series.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	d := newDescs()
	now := c.src.Now()
	out := sender{ch: ch}
	if c.src.API != nil {
		collectAPI(out, d, c.src.API())
	}
	if c.src.Bulk != nil {
		collectBulk(out, d, c.src.Bulk(), now)
	}
	if c.src.Watcher != nil {
		collectWatcher(out, d, c.src.Watcher())
	}
	if c.src.Progress != nil {
		collectProgress(out, d, c.src.Progress(), now)
	}
	if c.src.Leadership != nil {
		collectLeadership(out, d, c.src.Leadership())
	}
	if c.src.Components != nil {
		collectComponents(out, d, c.src.Components(), now)
	}
	if c.src.Totals != nil {
		collectTotals(d, c.src.Totals(), now, out.counter, out.gauge)
	}
	if c.src.Retention != nil {
		collectRetention(d, c.src.Retention(), out.counter, out.gauge)
	}
}

// sender sends the const metrics of a scrape on its channel.
type sender struct {
	ch chan<- prometheus.Metric
}

// counter sends the counter dd with value v.
func (s sender) counter(dd *prometheus.Desc, v int64, labels ...string) {
	s.ch <- prometheus.MustNewConstMetric(dd, prometheus.CounterValue, float64(v), labels...)
}

// gauge sends the gauge dd with value v.
func (s sender) gauge(dd *prometheus.Desc, v float64, labels ...string) {
	s.ch <- prometheus.MustNewConstMetric(dd, prometheus.GaugeValue, v, labels...)
}

// histogram sends the histogram dd of h.
func (s sender) histogram(dd *prometheus.Desc, h hist.Snapshot, labels ...string) {
	s.ch <- prometheus.MustNewConstHistogram(dd, h.Count, h.Sum, h.Buckets(), labels...)
}

// collectAPI sends the ingest API's series: requests, rejections and items, and the reads'
// latency by route and status.
func collectAPI(out sender, d descs, s api.Stats) {
	for status, n := range s.Requests {
		out.counter(d.ingestRequests, n, strconv.Itoa(status))
	}
	for reason, n := range s.Rejections {
		out.counter(d.ingestRejections, n, reason)
	}
	for status, n := range s.Items {
		out.counter(d.ingestItems, n, status)
	}
	for _, r := range s.Reads {
		out.histogram(d.readSeconds, r.Latency, r.Route, strconv.Itoa(r.Code))
	}
}

// collectBulk sends the bulk writer's series: batches, item outcomes, retries and failures
// by class, and the store's availability as the writer sees it.
func collectBulk(out sender, d descs, s bulk.Stats, now time.Time) {
	out.counter(d.bulkBatches, s.Batches)
	out.histogram(d.bulkOps, s.BatchOps)
	// Every known outcome and class from the start (0 until the first): rate() then sees
	// the first failure instead of a series that appears with it.
	for _, o := range []bulk.Outcome{bulk.OutcomeApplied, bulk.OutcomeStale, bulk.OutcomeRejected, bulk.OutcomeUnknown} {
		out.counter(d.bulkItems, s.Items[o], o.String())
	}
	out.counter(d.bulkReissued, s.Reissued)
	out.counter(d.bulkConflicts, s.Conflicts)
	for _, cl := range []store.Class{store.ClassUnknownOutcome, store.ClassWriteConcern} {
		out.counter(d.bulkRetries, s.Retries[cl], cl.String())
	}
	for _, cl := range bulkClasses() {
		out.counter(d.bulkFail, s.Failures[cl], cl.String())
	}
	for cl, n := range s.Failures {
		if !slices.Contains(bulkClasses(), cl) {
			out.counter(d.bulkFail, n, cl.String())
		}
	}
	down, downFor := 0.0, 0.0
	if s.StoreDown {
		down, downFor = 1, max(0, now.Sub(s.DownSince).Seconds())
	}
	out.gauge(d.bulkDown, down)
	out.gauge(d.bulkDownFor, downFor)
	out.counter(d.bulkRefused, s.Refused)
	out.counter(d.bulkProbes, s.ProbesOK, "ok")
	out.counter(d.bulkProbes, s.ProbesFailed, "failed")
	out.gauge(d.bulkInFlight, float64(s.InFlightLimit))
}

// collectWatcher sends the watcher's counters and the time of its last event.
func collectWatcher(out sender, d descs, s watcher.Stats) {
	out.counter(d.events, s.Events)
	out.counter(d.batches, s.Batches)
	out.counter(d.parentWrites, s.ParentWrites)
	out.counter(d.conflicts, s.Conflicts)
	out.counter(d.tierWrites, s.TierWrites)
	out.counter(d.tierConflicts, s.TierConflicts)
	out.counter(d.replays, s.Replays)
	out.counter(d.orphans, s.Orphans)
	out.counter(d.invalid, s.Invalid)
	out.counter(d.fenced, s.Fenced)
	out.counter(d.takeovers, s.Takeovers)
	out.counter(d.leaseLosses, s.LeaseLosses)
	if !s.LastEventTime.IsZero() {
		out.gauge(d.lastEvent, float64(s.LastEventTime.UnixNano())/1e9)
	}
}

// collectProgress sends the watcher's durations and, per stream, its lag and the age of its
// checkpoint at now.
func collectProgress(out sender, d descs, p watcher.Progress, now time.Time) {
	out.histogram(d.recompute, p.Recompute)
	out.histogram(d.tierSeconds, p.Tiers)
	for _, s := range p.Streams {
		if !s.Position.IsZero() {
			out.gauge(d.lag, max(0, now.Sub(s.Position).Seconds()), s.Checkpoint)
		}
		if !s.CheckpointSavedAt.IsZero() {
			out.gauge(d.checkpointAge, max(0, now.Sub(s.CheckpointSavedAt).Seconds()), s.Checkpoint)
		}
	}
}

// collectLeadership sends, per partition, whether this instance leads it and the term.
func collectLeadership(out sender, d descs, parts []watcher.PartitionState) {
	for _, p := range parts {
		v := 0.0
		if p.Leader {
			v = 1
		}
		out.gauge(d.leader, v, p.Partition, p.ID)
		out.gauge(d.term, float64(p.Term), p.Partition, p.ID)
	}
}

// collectComponents sends, per component, whether it is ready and since when (seconds
// before now).
func collectComponents(out sender, d descs, states []status.State, now time.Time) {
	for _, s := range states {
		v := 0.0
		if s.Ready {
			v = 1
		}
		out.gauge(d.componentReady, v, s.Component)
		out.gauge(d.componentSince, max(0, now.Sub(s.Since).Seconds()), s.Component)
	}
}

// bulkClasses are the error classes a bulk failure is counted under.
func bulkClasses() []store.Class {
	return []store.Class{store.ClassDuplicateKey, store.ClassPermanent, store.ClassWriteConcern, store.ClassUnknownOutcome, store.ClassContext}
}

// collectRetention sends the retention enforcer's series.
func collectRetention(d descs, s retention.Stats, counter func(*prometheus.Desc, int64, ...string), gauge func(*prometheus.Desc, float64, ...string)) {
	leader := 0.0
	if s.Leader {
		leader = 1
	}
	gauge(d.retLeader, leader)
	counter(d.retPasses, s.Passes)
	if !s.LastPass.IsZero() {
		gauge(d.retLastPass, float64(s.LastPass.UnixNano())/1e9)
	}
	gauge(d.retInvalid, float64(s.InvalidPolicies))
	for _, t := range store.Tiers() {
		tier := string(t)
		counter(d.retDeleted, s.Deleted[t], tier)
		ts, ok := s.Tiers[t]
		if !ok {
			continue // no project deletes the tier (or no pass yet): no horizon, no lag
		}
		if !ts.Horizon.IsZero() {
			gauge(d.retHorizon, float64(ts.Horizon.Unix()), tier)
		}
		gauge(d.retLag, max(0, ts.Lag.Seconds()), tier)
		gauge(d.retBlocked, float64(ts.Blocked), tier)
	}
}

// collectTotals sends the business series of a totals.Snapshot: per project (and opted-in
// group) the numbers of the last complete tick, and the refreshes' health.
func collectTotals(d descs, s totals.Snapshot, now time.Time, counter func(*prometheus.Desc, int64, ...string), gauge func(*prometheus.Desc, float64, ...string)) {
	counter(d.totRefreshes, s.Refreshes, "ok")
	counter(d.totRefreshes, s.Failures, "error")
	stale := 0.0
	if s.Stale {
		stale = 1
	}
	gauge(d.totStale, stale)
	gauge(d.totDropped, float64(s.DroppedProjects), "project")
	gauge(d.totDropped, float64(s.DroppedGroups), "group")
	gauge(d.totInvalid, float64(s.Invalid))
	if s.LastSuccess.IsZero() {
		return // nothing read yet: no numbers, rather than zeros that look like an outage
	}
	gauge(d.totSuccess, float64(s.LastSuccess.UnixNano())/1e9)
	gauge(d.totDuration, s.LastDuration.Seconds())
	gauge(d.totTick, float64(s.Tick.Unix()))
	age := max(0, now.Sub(s.Tick).Seconds())
	for _, p := range s.Projects {
		gauge(d.projOnline, float64(p.Online), p.Name)
		gauge(d.projReported, float64(p.Reported), p.Name)
		gauge(d.projExpected, float64(p.Expected), p.Name)
		gauge(d.projComplete, p.Completeness(), p.Name)
		gauge(d.projAge, age, p.Name)
		for _, g := range p.Groups {
			gauge(d.groupOnline, float64(g.Online), p.Name, g.ID)
			gauge(d.groupReported, float64(g.Reported), p.Name, g.ID)
			gauge(d.groupExpected, float64(g.Expected), p.Name, g.ID)
			gauge(d.groupComplete, g.Completeness(), p.Name, g.ID)
		}
	}
}
