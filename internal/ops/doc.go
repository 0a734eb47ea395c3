// Package ops carries out rollup's one-shot operator commands — tree import and show, token
// create, list, revoke and rotate (each change logs one audit line), migrate up and status,
// submit — and writes their reports for a terminal or a script. cmd/rollup parses each
// command's settings and calls it with plain values and a connected store or client.
//
// The one idea: a report is the command's contract with its operator (one line per item,
// notes that say what to do next), so it is written in one place, next to the work.
//
// It does not parse command lines, connect to the store (its callers pass a *mongo.Database
// or a store of package treedb) or decide exit codes.
package ops
