// Package treedbtest is an in-memory treedb.TreeSource for the tests of the packages that
// read trees (recompute, watcher): versions per project, each effective from a tick, without
// a store. It owns nothing else; tree/treedb itself is tested against the embedded server.
package treedbtest
