// Package rollup holds the pure functions from children to parent totals: Merge and Rebuild
// turn a parent and its children's contributions into the parent's next state, FullRecompute
// is the naive reference they are checked against, and Check lists every way a tick's stored
// documents disagree with their leaves and tree (what `rollup verify` reports).
//
// The one idea: a parent stores each child's latest contribution with that child's version,
// and its totals are the sum of what it stores, so merging the same contributions twice,
// late or in any order gives the same document.
//
// There is no MongoDB inside (TestPure checks it): documents are package store's, and which
// parents to recompute is package recompute's. docs/design/rollup.md explains the merge rule.
package rollup
