// Package watcher is the change-stream loop over the counts collection and its checkpoints:
// it reads leaf writes one server batch at a time, ahead of the writes (a reader goroutine per
// stream), hands each burst of leaves to a recompute.Engine, writes the summaries of the
// parents written beside the next bursts, and saves the resume token once every event before
// it has its parents and their hourly and daily summaries durably written. It recovers a
// window the oplog lost by recomputing the leaves written since the last checkpoint, splits
// projects over partitions, and — with leases — runs only the partitions this instance leads
// (package lease).
//
// The one idea: a token is saved only after the rollups of everything before it are durable,
// and every parent write is idempotent, so a crash, a resume, a replay or a second leader can
// only redo work, never lose or double it. Run retries every store fault with capped,
// jittered backoff for as long as its context lives.
//
// It does not compute or write parents (package recompute), merge contributions (rollup),
// store trees (tree/treedb) or define documents and indexes (store, migrations).
// docs/design/watcher.md explains the loop, checkpoints, lost history and leases.
package watcher
