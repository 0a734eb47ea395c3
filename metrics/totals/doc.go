// Package totals reads the business numbers rollup exports: for every project, the root total
// and the completeness (leaves reported / leaves expected) of the last complete tick, and
// optionally the same for the root's children (the groups). A Reader refreshes a Snapshot in
// the background with a few indexed reads, whatever the number of leaves.
//
// The one idea: the last complete tick is the latest one that ended at least Options.Grace
// ago (LastCompleteTick), so every agent that is up has reported it and the watcher has rolled
// it up; a failed refresh keeps the last good values, marked stale.
//
// It does not know Prometheus (package metrics turns Snapshots into series), does not compute
// totals (the watcher does) and does not alert (deploy/prometheus/rules.yml does). Design
// notes: docs/design/observability.md.
package totals
