// Package treedb stores the versions of every project's tree in MongoDB: collections trees
// (one document per committed version, written last, so a version is visible only when all
// its nodes are stored) and tree_nodes (one document per node). Versions are immutable and
// numbered per project from 1; each is effective from a tick, and the tree of a tick is the
// version with the largest effective_from <= that tick (VersionAt).
//
// Directory keeps, in memory, every project's versions that apply to recent ticks, with an
// index of their node ids: which tree applies to a (project, tick) and which project's tree
// holds an id, without a query per question (the ingest API's checks). It refreshes itself
// from the trees collection at most every MaxAge. Cache is the TreeSource the watcher,
// replay and verify read trees through: which version applies at a tick is asked of the
// store each time, loaded versions are kept.
//
// It does not validate trees itself (package tree does, through tree.Build), does not watch
// for new versions (its callers poll VersionAt or a Directory, or watch the trees collection)
// and does not create its indexes (Indexes lists them; package store's catalog includes them
// and the migrations build them).
package treedb
