// Package embedded is rollup's embedded MongoDB-compatible server: it speaks the MongoDB wire
// protocol over TCP for exactly the subset of commands rollup uses, so the product always
// talks to its store through the official Go driver — one code path for the embedded default,
// the tests and a production replica set.
//
// It advertises a single-node replica set (so "?replicaSet=rs0" discovery works), executes
// commands against package storage (documents, indexes, durability, oplog), package query
// (filters, updates, projections, sorts) and package aggregate (pipelines), and keeps the
// per-connection and per-session state a real mongod keeps: cursors, retryable-write results
// (per statement), cluster time. Like mongod it runs a TTL monitor (Config.TTLMonitorInterval)
// that deletes the documents TTL indexes say have expired, and it writes the output of $out
// and $merge. With EnableTestCommands it has mongod's fail points failCommand,
// onPrimaryTransactionalWrite and failGetMoreAfterCursorCheckout, so fault tests run unchanged
// against both. Anything outside the subset answers NotImplemented (code 238) naming what is
// missing; it never answers wrongly in silence.
//
// It does not do authentication, TLS, compression, transactions or sharding.
package embedded
