// Package status tracks whether each long-lived component of serve (store, migrations, bulk
// writer, watcher) is making progress, and since when it is not: a component owns its Tracker
// and reports Ready or NotReady(reason) on it; /readyz and /metrics read the snapshots.
//
// The one idea: readiness is reported by the component that knows, never probed from outside
// on the request path. A nil *Tracker ignores reports, so components run without one in
// tests.
//
// It does not decide what progress means (each component does), retry anything, or serve
// HTTP (package metrics does).
package status
