// Package storage is the storage engine of the embedded MongoDB-compatible server: an
// in-process, concurrent, durable document store of databases, collections and immutable
// documents, with their indexes (the _id_ index and user indexes: compound, unique or not,
// multikey, TTL), collection renames and options (changeStreamPreAndPostImages: updates,
// replaces and deletes then keep the pre-image in their oplog entry), a write-ahead log with
// group commit, snapshots with log compaction, crash recovery that truncates a torn log tail,
// and a commit-ordered oplog for change streams.
//
// TTL: Writer.DeleteExpired deletes, in bounded batches, the documents a TTL index says have
// expired, reading only the index range of dates before the cutoff; the deletes are ordinary
// logged deletes. Running it periodically (the TTL monitor) is the server's job.
//
// Concurrency: one engine-wide reader/writer lock. Engine.Read runs with shared access and
// sees a consistent state; Engine.Write runs with exclusive access, so writes are serialized
// (an upsert's find-then-insert cannot race). Durability waits (fsync) happen outside the
// lock and are shared by concurrent writers (group commit). Engine.ReadYielding is Read for
// one long scan: after ~2 ms it continues on a copy-on-write clone of the index without the
// lock, so a million-document find does not block writers (see scan.go). Work that is a pure
// function of a statement and of a collection's index specifications may be done before the
// Write, without the lock, from an IndexSet (point.go): planning a find that is one full key of
// a unique index (PointLookup; inside the Write only that one key is looked up), computing a
// prepared document's index keys and encoding its oplog entry but for the entry's OpTime and
// wall clock (IndexSet.Prepare). Inside the Write it is used only if the
// collection is the same one with the same indexes (collection.gen); otherwise the full path
// runs. Every read that decides a result and every mutation still happen under the exclusive
// lock, so the unique constraints, the oplog's order (commit order) and durability are those
// of a serial execution. A pre-encoded entry is queued for the oplog under the lock, in
// commit order, and copied into it after the lock is released, before it is published and
// before any oplog read (oplog.appendLater).
//
// Durability and visibility: a mutation is visible to Read as soon as it is made, but Write
// returns only once it is durable. Oplog entries are exposed by OplogAfter and OplogRange
// only once durable, so a change stream never reports a write that a crash (kill -9) could
// still lose. If writing the log fails, Write returns the error and the engine refuses all
// later writes; mutations made in memory but never logged are lost at the next restart.
//
// Stored documents are kept encoded only (Doc.Raw; Doc.D decodes a copy on demand), and the
// retained oplog is kept encoded (the log form) in pointer-free byte segments, located by
// pointer-free references in fixed-size chunks (appending never copies the retained list), so
// the data's size costs the garbage collector little; OplogAfter decodes the entries it
// returns.
// A panic inside a Write's function is returned as an InternalError after the mutations
// made before it are logged, so the lock is never left held.
//
// On disk (Options.Dir): snapshot-<seq>.snap holds a consistent image of everything up to the
// start of log-<seq>.wal; logs with a sequence number at or after the snapshot's are replayed
// in order. Both are sequences of records [uint32 length][uint32 CRC-32C][payload]. The log's
// payloads are one Write's oplog entries (BSON), so the log is also the persisted oplog.
//
// Storage stores, indexes, finds candidate documents and persists. It does not match queries
// exactly, apply update operators or parse commands: Find returns a superset of matches that
// the caller (package embedded, with package query) filters exactly.
package storage
