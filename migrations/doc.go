// Package migrations holds rollup's versioned, idempotent schema steps (Steps), applies the
// pending ones under a lock so two instances never migrate at once (Migrator.Up), and finds
// and repairs schema drift: an index an applied step built that was dropped or changed
// (Migrator.Drift; Up runs that step again).
//
// The one idea: a step is recorded only after it succeeded and may run again at any time, so
// a crash mid-step, a second instance, or drift all resolve by running Up.
//
// The names and definitions of collections and indexes are package store's; the steps only
// build them. It does not parse flags or print (cmd/rollup does, with Report.Format).
// docs/design/schema.md lists the steps and the duplicate-resolution rule.
package migrations
