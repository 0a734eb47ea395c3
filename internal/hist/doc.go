// Package hist is a lock-free histogram with fixed bucket bounds that components (bulk,
// watcher) fill at the source and the metrics layer reads as a snapshot (cumulative counts,
// as Prometheus expects).
//
// The one idea: observing is an atomic add on the hot path; exporting is someone else's job,
// so the components stay free of Prometheus imports.
//
// It does not export anything (package metrics turns a Snapshot into a Prometheus histogram).
package hist
