// Package soak is rollup's end-to-end soak test under faults (issue #12, item 9). It has no
// code outside its test files.
//
// TestSoak runs seeds. Each seed builds a world from real processes: the embedded store as
// `rollup mongod` (durable in a temporary directory, test commands on), one or two `rollup
// serve` reaching it through the black-pipe proxy, and the test's own driver client to the
// store for fail points and checks. Two projects are imported and given tokens; then, over a
// few rounds, concurrent agents of both projects submit counts through the HTTP API —
// duplicates, late (older) observations, orphans and cross-project attempts included — and
// resend every submission until it is acknowledged, while a fault schedule plays: fail points
// (NotWritablePrimary and closeConnection held for a while, error codes a few times, slow
// commands, write-concern errors, onPrimaryTransactionalWrite reply loss,
// failGetMoreAfterCursorCheckout), black-pipe cuts, resets, stalls and dropped requests, the
// store killed (SIGKILL) or stopped and restarted, serve killed or stopped and restarted, a
// replay of a window (`rollup replay`) and a tree edit (`rollup tree import`).
//
// After the schedule every fault is healed and the invariants are checked from outside:
// every acknowledged value is stored exactly once with its newest version, no stored leaf
// came from anywhere but its own project's submissions, every parent and root equals the sum
// of its reported leaves at every tick (and `rollup verify` agrees), and serve never exited
// on its own. Each seed fixes the whole schedule (the agents' plans, the faults and their
// times); the interleaving is up to the scheduler. The seed is logged so that a failure
// reproduces with ROLLUP_SOAK_SEED.
//
// Environment: ROLLUP_SOAK_SEEDS (how many seeds, default 3, 1 with -short), ROLLUP_SOAK_FIRST
// (the first seed, default 1), ROLLUP_SOAK_SEED (run only this seed), ROLLUP_SOAK_PARALLEL
// (seeds at once, default 3; an explicit go test -parallel caps it too), ROLLUP_SOAK_BINARY
// (a prebuilt rollup binary instead of building one; the one the test builds has no race
// detector, even under -race, so a race-built soak is a binary built with -race given here),
// ROLLUP_SOAK_JOURNAL (print every seed's event journal, not only a failed one's).
//
// It uses only rollup's public surfaces: the HTTP API, the rollup binary's commands, the
// stored documents through the driver, and the public packages that create tokens and import
// trees at setup. It decodes stored documents itself, so its checks do not share rollup's
// decoders. It skips itself against MONGODB_URI: it needs to stop and restart the store.
package soak
