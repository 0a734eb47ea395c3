// Package bulk is the unordered bulk writer of leaf counts and the classification of its errors:
// it resolves only the failed indices of a BulkWriteException.
//
// # What it owns
//
// Writer coalesces the items of many concurrent Submit calls into unordered BulkWrites to the
// counts collection, up to Options.MaxBatch items each and up to Options.Workers in flight (see
// "Batching policy"). Accepted but unfinished items are bounded by Options.MaxPending: a Submit
// that does not fit blocks (backpressure), nothing is ever dropped.
//
// Every item becomes one guarded upsert, idempotent by construction:
//
//	filter {id, type, timestamp, project, version: {$lt: v}, rollup: {$ne: true}}
//	update {$set: {online, version, project, submission_id, written_at}}, upsert: true
//
// There is no $inc: re-sending an op can never count twice. The project and rollup guards mean
// an item never overwrites another project's leaf or a parent's total: it is rejected
// (ErrOtherProject, ErrParentKey; see "Retry policy").
//
// Within one batch, items of one project for the same key (id, type, timestamp at millisecond
// precision) are deduplicated before sending, because an unordered bulk does not order its ops. The item with
// the highest version is sent (the earliest among equal versions). An item with the winner's
// version gets the winner's result (same observation, so it is applied exactly when the winner
// is). An item with a lower version is stale when the winner is applied or stale, and otherwise
// shares the winner's result.
//
// Memory: a batch's items, deduplication, encoded documents, models and results live in one
// recycled batch value (at most Options.Workers are in use), and the pending FIFO reuses its
// array, so a steady load allocates little per item beyond what the driver does.
//
// # Batching policy
//
// The goal is full batches under sustained load (store commands per tick close to
// ceil(leaves / MaxBatch)) with bounded latency when load is light. Items wait in a FIFO
// pending set; Run cuts batches from its front, and only when a worker is free to send them
// at once, so items that arrive while every worker is busy join the next batch instead of
// waiting in a queue of half-empty ones.
//
//   - Full: as soon as MaxBatch items are pending and a worker is free, a batch of MaxBatch
//     goes.
//   - Partial, while a batch is in flight: never. Sending it alongside would spend a command
//     to save at most the rest of that batch's write time, while waiting usually fills it:
//     the finishing batch releases its submitters, who submit again. This is what fills
//     batches in a closed loop (agents that wait for their answer before the next
//     submission), where arrivals pause while results are pending.
//   - Partial, once nothing is in flight: it goes when no item arrived for Options.IdleGap
//     (the producers stopped, or all of them wait for this batch), or when it has been held
//     for Options.MaxDelay under a steady trickle. Both clocks start when the batch could
//     first have been sent: MaxDelay's at the later of the oldest item's arrival and the end
//     of the last in-flight batch, IdleGap's at the later of the newest arrival and that
//     end. IdleGap must exceed the pause between a batch's end and its submitters' next
//     items (answer, request, decoding, scheduling). Measured with `rollup bench ingest` on a
//     shared 2-core machine (load average 4-12): 2-10ms gaps still cut 1-10 partial batches
//     per 100,000-leaf tick; 20ms (the default) 0-3, most of them when the machine was
//     heavily overloaded; 50ms was no clear improvement.
//   - Draining (Run's context done): whatever is pending goes, a batch at a time.
//
// Latency: a lone Submit on an idle writer waits IdleGap, then its write. Under load an item
// waits for the batches ahead of it (FIFO) and for the batches in flight to finish, then at
// most MaxDelay. Holding is what makes full batches: without it, the bench ingest path sent
// 132-182 update commands per 100,000-leaf tick instead of 100-103. The rule is policy.cut
// (policy.go, a pure function, table-tested); Run only feeds it times and the in-flight count.
//
// # Retry policy
//
//   - BulkWriteException with write errors: WriteErrors[].Index are positions in the models
//     slice the writer passed (the driver maps them back through its regrouping). Ops without an
//     error are applied. An E11000 says a document with the key exists that the guard does not
//     match, or that a concurrent upsert won the insert race; the E11000 ops' documents are read
//     in one find (resolve.go): a parent's or another project's document rejects the item, a
//     same-or-newer version makes it stale, and the rest (the race was won by an older version
//     of the same project) are re-issued once, where an E11000 now means stale (a document's
//     project never changes). Other write errors are permanent: OutcomeRejected, per item.
//   - Write-concern error, or a command-level error left after the driver's own retry (network,
//     NotWritablePrimary, timeout): the outcome of the whole command is unknown. If the store
//     answers a probe, the batch is re-sent whole once (safe: absolute values plus the version
//     guard); if the probe or the resend fails, its items end as OutcomeUnknown, Submit returns
//     an error wrapping ErrUnavailable and the store is down (below). A command-level error a
//     resend cannot fix (e.g. Unauthorized) ends the same way without the resend, so agents
//     keep their data and resend later.
//   - No retry loop hides in the driver: driver v2 retries a retryable error for as long as the
//     context has a deadline (or the client a timeout), exactly once otherwise. Writes run
//     under contexts without a deadline; Options.AttemptTimeout is the writer's own timer that
//     cancels an attempt (an unknown outcome); CheckClientOptions refuses a client timeout.
//   - An item applied by a command whose reply was lost reports stale after the resend (its own
//     version is stored). Stale means "a same-or-newer version is stored": success either way.
//
// Classify, in classify.go, is the only place where driver errors are interpreted.
//
// # Store outages
//
// A batch that ends unavailable marks the store down (health.go): Tracker is not ready and
// Stats.StoreDown set until a write or a probe succeeds. Meanwhile pending batches and Submits
// are refused without a write (*StoreDownError). A Submit first waits for the next probe slot
// and runs or joins one probe (a multi-document update of a document that does not exist: it
// needs a writable primary, changes nothing and is never retried by the driver; each
// bounded by Options.ProbeTimeout, Options.ProbeInterval after the last one ended; a Submit
// joins a running probe only if it began at most 250ms ago, since an older one may have begun
// before the store came back and run out its timeout waiting for the driver to see it), so it
// is answered within about a second and the first one after the store's return is written
// (measured: 0.1–0.5 s after the return, bounded by the driver's monitor, which checks a
// server it lost at most every 500 ms). A background prober
// (backing off to 2s) sees the return without traffic. RetryAfter grows with the outage.
//
// With a StoreMonitor (Options.StoreMonitor, registered on the collection's client) the writer
// also follows the driver's view of the deployment: once the driver has seen no writable
// server for a second (the store stopped or unreachable, no primary), the store is down at
// once and the writes in flight are ended (outcome unknown) rather than left waiting for the
// driver's server selection timeout, so even the submission that discovers an outage is
// answered within about a second; and when the driver sees a writable server again, the
// writer probes at once rather than at its next probe slot. Going down ends every write in
// flight, whoever found the outage.
//
// # What it does not do
//
// It does not validate ids, types, counts or timestamps (package api and package tree do), does
// not create the unique index (package migrations does; without it concurrent upserts would
// insert duplicates), and does not choose the write concern: the collection's applies (serve
// configures w:majority, j:true). It never touches parent or root documents.
package bulk
