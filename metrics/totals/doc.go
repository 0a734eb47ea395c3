// Package totals reads the business numbers rollup exports to Prometheus: for every project,
// the root total and the completeness (leaves reported / leaves expected) of the last complete
// tick, and optionally the same for each of the root's children (the groups).
//
// The last complete tick at time now is the latest tick that ended at least Options.Grace
// ago: LastCompleteTick(now) = AlignTick(now − Grace − Tick). Agents report a tick at its
// start, so by then every agent that is up has reported and the watcher has rolled it up; the
// numbers are the stored root document's, as they are (a tick whose leaves partly reported
// has completeness < 1; one whose leaves never reported has no root document and is exported
// as 0 online, 0 of Expected leaves reported).
//
// A Reader refreshes a Snapshot every Options.Interval with a few indexed reads (the projects
// with a tree, their tree versions at the tick, the root documents of the tick by the unique
// {id, type, timestamp} index), independent of the number of leaves. A failed refresh never
// stops it: it keeps the last good values, marks the snapshot stale and retries with backoff.
// Past the caps (Options.MaxProjects, MaxGroups) projects and groups are left out in name
// order and counted.
//
// It does not know Prometheus (package metrics turns Snapshots into series), does not
// compute totals (the watcher does) and does not alert (deploy/prometheus/rules.yml does).
package totals
