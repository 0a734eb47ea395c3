// Command rollup-bench runs rollup's end-to-end benchmarks (package internal/bench): the
// embedded server's bulk upserts (mongod), change-stream throughput and latency
// (changestream), ingest against raw driver upserts (ingest), rollup against the designs it
// replaced (baselines), one project's latency beside a runaway one (runaway), and rollup as
// deployed at scale (scale: it runs a rollup binary, --rollup, as its store and serve
// processes).
//
// The one idea: benchmarks ship in their own binary, so the product binary (cmd/rollup)
// links what the product runs, not the black-pipe fault proxy or re-implementations of
// rejected designs. This package only turns a command line into settings and calls: each
// benchmark has one file with its usage text, its flags (internal/settings) and its checks;
// the work is in internal/bench. main.go decides exit codes in one place (0 ok, 1 failure,
// 2 usage) and handles signals: the first SIGINT or SIGTERM cancels the context, a second
// exits at once.
package main
