// Package metrics is rollup's observability surface: the Prometheus collectors (rollup_*
// series read at scrape time from the components' snapshots, Register), the health endpoints
// (Health: /healthz alive, /readyz every component's status.Tracker ready), Probe (pings the
// store in the background for its tracker) and the process logger (NewLogger: JSON in
// production, console in the demo).
//
// The one idea: the components keep their own counters (api.Stats, bulk.Stats, watcher.Stats
// and Progress, totals snapshots) and never import Prometheus; this package only reads them,
// so a scrape never queries the store and no state is global (the registry is injected).
//
// It holds no business logic and computes no totals. Design notes: docs/design/observability.md.
package metrics
