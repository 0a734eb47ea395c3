// Package retention decides how long each tier of a project's data is kept and deletes what
// is older: the policy (Policy, Defaults, the minimums and the ordering Validate enforces),
// the stored overrides (the retention collection: a deployment default and per-project
// overrides, which every instance reads, so they all agree), and the Enforcer that serve runs
// in every instance, of which only the holder of the retention lease deletes.
//
// The one idea: a tier's horizon (store.Horizons) is advanced durably BEFORE anything older
// is deleted, so whoever reads a tier's documents and then finds its horizon at or before
// them read them whole; replay and verify rely on it. Deletes go oldest first, in bounded,
// paced batches, and a tier's sources are kept until the tier built from them has its
// summaries.
//
// It does not build the tiers (the watcher side does) and does not decide what replay or
// verify do past a horizon (package recompute). Rationale: docs/design/retention.md.
package retention
