// Package watcher is the change-stream loop that keeps every parent and root total of the
// counts collection equal to the sum of its children, and its checkpoints.
//
// It owns: the change stream on counts (fullDocument updateLookup, $match on leaf writes),
// grouping leaf events by (parent, tick) through the tree of that tick (treedb.TreeSource, TreeCache),
// the level-by-level rev-guarded parent writes, the checkpoints collection, recovery of a
// lost history window, and Replay (full recompute of a tick window). It does not own: the
// merge rule and the parent document's BSON (package rollup), trees and their storage
// (tree, tree/treedb), leaf writes (bulk), or the indexes (migrations).
//
// # Loop
//
// Run reads one server batch at a time (TryNext while RemainingBatchLength > 0). Consecutive
// batches form a burst — ended by an empty getMore (the stream is quiet for MaxAwait), by
// MaxBurstDelay, by MaxBurst leaves, by an invalidate or by shutdown; batches are never split.
// A burst's leaves become contributions to their parents; the deepest level is merged first
// (one find and one unordered BulkWrite per chunk of parents, chunks in parallel under a conc
// pool), then each parent's state contributes to its own parent, up to the root, so each dirty
// (parent, tick) is written at most once per burst plus conflict retries. The state of a
// parent is passed up even when it did not change: a burst redone after a crash completes the
// ancestors the crashed run did not reach.
//
// # Writes
//
// A parent is read (rev r, or absent), merged (rollup.Merge) and written with an upsert whose
// filter is {id, type, timestamp, version: r} (absent: version $exists false) and whose update
// is the absolute $set of rollup.Parent.Update. The extra guard field keeps the server from
// turning a duplicate-key upsert into an update, so a concurrent change shows up as E11000 at
// that op's index; only those parents are re-read, re-merged and re-issued (bounded by
// MaxConflicts). A write-concern or command-level error makes the outcome of the whole
// BulkWrite unknown: every parent of it is re-read and re-merged, which is idempotent. Writes
// use w:majority, j:true and reads read concern majority, whatever the database's defaults.
//
// # Checkpoints
//
// The checkpoints collection holds {_id: Options.Name, token, cluster_time, saved_at}. A token
// is saved only after the burst before it has been written; while the stream is idle the
// postBatchResumeToken is saved (at most every CheckpointInterval) so it never goes stale.
// Streams are opened with startAfter, which also works after an invalidate: a drop of counts
// restarts the stream after the invalidate event. Graceful shutdown finishes the burst in
// progress within ShutdownTimeout and saves the last safe token.
//
// # Lost history
//
// Without a checkpoint, or when the server answers ChangeStreamHistoryLost (286), Run opens a
// new stream first and then recomputes, through the same path, every leaf whose written_at is
// at or after the last safe position's cluster time minus ReplayMargin (all leaves without a
// checkpoint). Events the new stream delivers meanwhile are processed afterwards; the overlap
// is harmless because merging is idempotent. It logs a warning with the window and counts it in
// Stats.Replays (a missing checkpoint counts only when leaves exist). The query on written_at
// needs the index the integrator adds with the migrations; without it it is a full scan.
// With an oplog so small that the recovery's own parent writes push the new stream out of it,
// the recovery repeats (it converges: a second pass writes nothing new).
//
// # Orphans and trees
//
// A leaf whose project has no tree at its tick, whose id is not a leaf of that tree, or whose
// type differs from the tree's is an orphan: kept, excluded from totals, counted in
// Stats.Orphans. Documents at a parent's key that are not parent documents are skipped and
// counted in Stats.Invalid. TreeCache asks the store which version applies at each (project,
// tick) once per burst (a cheap indexed query, so an import is seen by the next burst) and
// keeps loaded versions, which are immutable. Leaf deletions are not events: they reach the
// parents only through Replay.
//
// Replay's semantics (children replaced, concurrent writes merged) are documented on Replay.
//
// Leases and partitions (Options.Leases, Options.Partitions): several instances can run a
// Watcher; exactly one leads each partition (a hash of the project name, or project lists) by a
// lease document with a fencing term taken from one counter for all partitions. The leader's
// parent writes and checkpoint saves carry its term and are refused for a newer stored term, so
// a stale leader that resumes after its lease expired cannot overwrite its successor's work;
// standbys take over after the lease TTL, or at once when a leader shuts down gracefully.
// A leader that cannot renew stops writing LeaseTTL/5 before its lease expires.
//
// Instance id: Options.Owner names the instance in leases and in the instances collection,
// where its holder beats a heartbeat. A restart with the same Owner reclaims its leases at
// once, with a newer term (so late writes of the dead process are fenced); a second live
// process with the same Owner is refused (DuplicateInstanceError), and one whose id is taken
// over stops (TakenOverError).
//
// Store faults: Run retries every store error with capped, jittered backoff (Options.Backoff)
// for as long as its context lives, and reports on Options.Status; only permanent errors
// (retry.IsPermanent) end it. After a fault the stream reopens after its last safe token (the
// driver itself resumes once per error); a token the oplog lost takes the lost-history path.
package watcher
