// Package recompute turns leaf counts into the parent and root documents above them, and
// those into the hourly and daily summaries of every parent and root (Summarize: an hour from
// its 5-minute parents, a day from its hours), and checks that the stored ones are right.
// Engine is shared by the watcher's bursts and the replay of a lost change-stream window;
// Replay rebuilds a project's ticks and their summaries for operators (`rollup replay`,
// `--tiers-only`), Plan lists what a replay would change (`--dry-run`), and Verify proves a
// window's totals and summaries (`rollup verify`), naming for every kind of violation the
// command that repairs it.
//
// The one idea: every parent and summary write is an absolute $set guarded by the revision
// read before it (an upsert whose extra guard field turns a lost race into E11000 at that
// op's index), so writes may be repeated, reordered or raced by another writer and the
// result is the same: only the parents that lost are re-read, re-merged and written again.
//
// It does not read the change stream or keep checkpoints (package watcher), decide the merge
// rule (package rollup) or encode documents (package store).
package recompute
