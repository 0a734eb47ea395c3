// Package metrics owns rollup's observability surface: the Prometheus collectors (rollup_*
// series read from the components' Stats snapshots at scrape time), the health endpoints
// (/healthz: the process is alive; /readyz: every component's status.Tracker ready, plus any
// checks the caller wires), Probe (pings the store in the background for its tracker) and the
// process logger (JSON in production, console in --demo).
//
// It holds no business logic and no global state: the registry is injected (Register), the
// components keep their own counters (api.Stats, bulk.Stats, watcher.Stats and Progress) and
// never import Prometheus, and the readiness checks are functions the caller wires. The
// business series (rollup_project_*, rollup_group_*, rollup_totals_*) come the same way from
// a totals.Reader's Snapshot (package metrics/totals), so a scrape never queries the store.
package metrics
