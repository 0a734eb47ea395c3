// Package store owns what rollup keeps in MongoDB, apart from the trees (tree/treedb): the
// names of every collection and field, the codecs of the documents, the queries other
// packages run on them, and the indexes rollup relies on with the check that finds drift.
// Ingest, the watcher, replay, verify, the read API, the business metrics and the migrations
// all read and write through it, so they cannot disagree about a document. It is the ground
// floor of the MongoDB side: the one durable write concern (DurableWriteConcern), a distinct
// that reports its error (DistinctInto), the index type the trees' package uses too
// (migrations.Catalog holds both), and how many writes of one kind rollup keeps in flight by
// default (DefaultWritesInFlight, for the bulk writer and the watcher's parent writes; Cores
// asks the store its own cores, by which the instances' shared budget is sized).
//
// The one idea to know: a stored number is a count when Count says so (int32, int64, or a
// double without a fraction within int64's range); any other value makes its document
// invalid, an *InvalidDocError naming the field, which every reader skips and counts the same
// way, and verify lists.
//
// It does not decide anything about totals (package rollup merges and checks them), when to
// recompute (package recompute and the watcher), or which schema steps run in which order
// (package migrations).
package store
