// Package bulk is the unordered bulk writer of leaf counts: Writer coalesces the items of many
// concurrent Submit calls into unordered BulkWrites of guarded, absolute upserts, and resolves
// only the failed indices of a BulkWriteException; store.Classify is the one place driver errors
// are interpreted.
//
// The one idea: every item is an upsert of an absolute value guarded by its version
// ({version: {$lt: v}}, never $inc), so any op may be re-sent after any failure without
// counting twice, and each item's answer (applied, stale, rejected, unknown) is final.
//
// It does not validate ids, counts or timestamps (packages api and tree do), does not create
// the unique index (package migrations does), does not choose the write concern (the
// collection's applies) and never touches parent or root documents. Batching (each batch
// filled round-robin across projects, so one project's backlog cannot hold back another's, and
// a project sending most of the items cut apart and written after the others), deduplication, the retry policy and store-outage handling are explained in
// docs/design/ingest.md. How many batches it keeps in flight (Workers, or the store's budget
// shared by the live instances: SetStoreBudget, ShareInFlight) is in docs/scaling.md.
package bulk
