// Package rollup holds the pure functions that turn the children's counts at a tick into a
// parent's document. There is no MongoDB and no I/O inside: the watcher reads parent documents,
// calls Merge, and writes Parent.Update with its revision guard.
//
// A parent document embeds every child's latest Contribution together with that child's
// version (a leaf's observation time, or a parent's revision). Merge keeps, per child, the
// contribution with the greatest version (ties keep the stored one), drops children that are not
// children of the node in the tree version of the tick (ChildSet), and derives the totals from
// the kept children. Merging the same contributions twice, late, or in any order therefore gives
// the same document (apart from Rev, which counts the changes): the randomized tests check this
// against FullRecompute, a naive summation over the tree.
//
// A contribution is accepted only if its child id is a child of the node in the ChildSet and its
// type equals the tree node's type; anything else (an orphan leaf, a child moved or removed by a
// tree edit, a document of the same id but another type) is excluded from the totals.
//
// Rebuild is Merge with the stored children replaced by the given current values: the form a
// full recompute (replay) of a tick needs, in particular after a tree edit that turned an
// interior node into a leaf. Parent.Update is the absolute $set for the watcher's write (no
// $inc); ParentFromDoc reads a stored parent document back, strictly. Whoever walks up the tree
// must pass every merged parent's contribution to its own parent, changed or not (see Merge).
//
// Check is the verifier behind `rollup verify`: given one tick's tree, leaf documents and stored
// parent documents it lists every violation (a parent that is not the sum of its children or of
// its leaves, duplicate documents, counted orphans, wrong expected counts) and the parents a
// replay would change.
//
// The package does not decide which parents to recompute, read or write documents, or route
// leaves to parents (package watcher does), and it does not validate trees (package tree does).
package rollup
