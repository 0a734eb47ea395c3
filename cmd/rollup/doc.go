// Command rollup is the single binary of rollup: the service (serve: ingest and read API,
// dashboard, bulk writer, watcher, and the embedded store when no MongoDB URI is given), the
// embedded MongoDB-compatible server on its own (mongod), the operations commands (migrate,
// token, tree, replay, verify, submit, simulate) and the benchmarks (bench). main.go decides
// exit codes in one place; each subcommand lives in its own file and only wires packages
// together.
package main
