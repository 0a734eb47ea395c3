// Package migrations owns the schema of rollup's database: the names of its collections,
// indexes and fields (schema.go, imported by every package that touches the database), and the
// versioned, idempotent steps that create and repair that schema, recorded in the database and
// guarded by a lock so that two instances never migrate at once.
//
// Steps (see Steps):
//
//  1. counts: find documents that share (id, type, timestamp) — deployments of the system rollup
//     replaces ran without a unique index and hold such duplicates — keep the newest of each
//     group, delete the others (recording every removed document in the Report), then build the
//     unique index store.CountsKeyIndex on exactly {id: 1, type: 1, timestamp: 1}. Node ids are unique
//     within a deployment, so (id, type, timestamp) names one node's value for one tick.
//  2. tokens: the index on project.
//  3. projects: the collection.
//
// Keep-the-newest rule: within a duplicate group the kept document is the first in MongoDB sort
// order {version: -1, written_at: -1, _id: -1}: the highest version (the agent's observation
// time), then the latest written_at, then the greatest _id. A missing field sorts lowest, so a
// document that has a version beats one that has none. Grouping follows the unique index's own
// equality: a missing id, type or timestamp is the same as null, and numbers compare by value.
// A document is deleted only if its version and written_at are still what the scan saw; if a
// writer changed one in between, the step fails without building the index and a rerun
// resolves the group again.
//
// Applied steps are recorded in the migrations collection as {_id: version, name, applied_at}.
// A step is recorded only after it succeeded, so a crash mid-step reruns that step, which is
// why every step is idempotent.
//
// Locking: Up holds the lock document {_id: "lock"} in migration_lock while it runs. It is
// acquired with one atomic upsert whose filter only matches an expired lock, so a live lock
// makes the upsert fail with E11000; it carries an owner id and an expiry that a background
// renewal keeps pushing forward while steps run, and it is deleted at the end. An instance that
// crashed leaves a lock that expires after LockTTL. A second Up while the lock is held waits,
// polling until the holder releases it or UpOptions.LockWait passes, and then fails with a
// *LockHeldError naming the owner (so several `rollup serve` replicas starting together all
// wait for the first one, then find nothing pending). Expiry uses the instances' clocks, which
// are assumed to agree to well within LockTTL. A dry run changes nothing and takes no lock.
//
// The package does not write counts, tokens or projects in normal operation (packages bulk and
// api do), does not create the watcher's checkpoints collection (a later step will), and does
// not parse flags or print (cmd/rollup does, using Report.Format).
package migrations
