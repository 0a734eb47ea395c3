// Package bench holds the harnesses of cmd/rollup-bench: the embedded server's bulk upserts
// through the driver (Mongod), change-stream throughput and latency (ChangeStream), ingest end
// to end against raw driver upserts of the same documents (Ingest, with a load generator
// playing the agents, which resend what a busy server refuses as real agents do), rollup
// against the designs people would otherwise build (Baselines), and rollup as deployed at
// scale (Scale: `rollup mongod` and `rollup serve` processes, trees imported, agents of one
// or many projects through the HTTP API; CPU and RSS of each process from /proc). Each one starts its own store (a fresh embedded server, or a
// given MongoDB), measures, and returns a result that prints itself.
//
// The one idea: a benchmark compares like with like in the same run (same documents, same
// indexes, same store, alternating order), and counts the store's commands through the
// black-pipe proxy, so a number means something on a shared, noisy machine. How each
// comparison is kept fair, and the numbers, are in docs/benchmarks.md.
//
// It is not imported by the service; its tests run the harnesses on small shapes.
package bench
