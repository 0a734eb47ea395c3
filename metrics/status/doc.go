// Package status tracks whether each long-lived component of serve (bulk writer, watcher,
// migrations, …) is making progress, and since when it is not. A component owns its Tracker
// and reports on it; /readyz and /metrics read the snapshots.
//
// It does not decide what "progress" means (each component does), retry anything, or serve
// HTTP (package metrics does). A nil *Tracker ignores reports, so components run without one
// in tests.
package status
