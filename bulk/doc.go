// Package bulk is the unordered bulk writer of leaf counts and the classification of its errors:
// it re-issues only the failed indices of a BulkWriteException.
//
// # What it owns
//
// Writer coalesces the items of many concurrent Submit calls into unordered BulkWrites to the
// counts collection. A batch is cut when Options.MaxBatch items are pending or the oldest one has
// waited Options.MaxDelay; up to Options.Workers batches are in flight. Accepted but unfinished
// items are bounded by Options.MaxPending: a Submit that does not fit blocks (backpressure),
// nothing is ever dropped.
//
// Every item becomes one guarded upsert, idempotent by construction:
//
//	filter {id, type, timestamp, version: {$lt: v}}
//	update {$set: {online, version, project, submission_id, written_at}}, upsert: true
//
// There is no $inc: re-sending an op can never count twice.
//
// Within one batch, items for the same key (id, type, timestamp at millisecond precision) are
// deduplicated before sending, because an unordered bulk does not order its ops. The item with
// the highest version is sent (the earliest among equal versions). An item with the winner's
// version gets the winner's result (same observation, so it is applied exactly when the winner
// is). An item with a lower version is stale when the winner is applied or stale, and otherwise
// shares the winner's result.
//
// # Retry policy
//
//   - BulkWriteException with write errors: WriteErrors[].Index are positions in the models
//     slice the writer passed (the driver maps them back through its regrouping). Ops without an
//     error are applied. E11000 ops, and only they, are re-issued once, in one BulkWrite of the
//     same guarded upserts. The guard (version < v) makes an upsert hit E11000 when a
//     same-or-newer version is stored, and also when a concurrent upsert of the same key won the
//     insert race. The first E11000 proves that a document with the key exists (leaves are never
//     deleted), so on the retry a second E11000 can only mean "stored version >= v": stale;
//     success means applied. This gives an exact per-op answer from one command. (A plain
//     upsert:false update would only return an aggregate matched count for a multi-op retry.)
//     Other write errors are permanent: OutcomeRejected with the error, per item.
//   - Write-concern error, or a command-level error left after the driver's own retry (network,
//     NotWritablePrimary, timeout): the outcome of the whole command is unknown, so it is re-sent
//     whole once (safe: absolute values plus the version guard). If that fails too, its items end
//     as OutcomeUnknown and Submit returns an error wrapping ErrUnavailable: no retry loops
//     during an outage. A command-level error a resend cannot fix (e.g. Unauthorized) ends the
//     same way without the resend, so agents keep their data and resend later.
//   - Options.AttemptTimeout (default none: the client's timeout and server selection timeout
//     apply) bounds each attempt; a timeout is an unknown outcome like any other.
//   - An item applied by a command whose reply was lost reports stale after the resend (its own
//     version is stored). Stale means "a same-or-newer version is stored": success either way.
//
// Classify, in classify.go, is the only place where driver errors are interpreted.
//
// # What it does not do
//
// It does not validate ids, types, counts or timestamps (package api and package tree do), does
// not create the unique index (package migrations does; without it concurrent upserts would
// insert duplicates), and does not choose the write concern: the collection's applies (serve
// configures w:majority, j:true). It never touches parent or root documents.
package bulk
