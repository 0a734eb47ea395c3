// Package hist is a lock-free histogram with fixed bucket bounds that the components (bulk,
// watcher) fill at the source and the metrics layer reads as a snapshot.
//
// It owns: bucket bounds, concurrent observation and consistent-enough snapshots (cumulative
// counts as Prometheus expects). It does not own: exporting (package metrics turns a Snapshot
// into a Prometheus histogram), so the components stay free of Prometheus imports.
package hist
