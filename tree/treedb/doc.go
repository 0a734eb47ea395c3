// Package treedb stores the versions of every project's tree in MongoDB (collections trees and
// tree_nodes) and answers which version applies to a tick (VersionAt: the version with the
// largest effective_from <= the tick).
//
// The one idea: versions are immutable and numbered per project from 1, and a version's
// trees document is written last, so a version is visible only once all its nodes are stored;
// rollups of a tick always use the tree that was in effect then.
//
// Directory keeps, in memory, every project's versions that apply to recent ticks, with an
// index of their node ids: which tree applies to a (project, tick) and which project's tree
// holds an id, without a query per question (the ingest API's checks). It refreshes itself
// from the trees collection at most every MaxAge. Cache is the TreeSource the watcher,
// replay and verify read trees through: which version applies at a tick is asked of the
// store each time, loaded versions are kept.
//
// It does not validate trees itself (package tree does, through tree.Build), does not watch
// for new versions (its callers poll VersionAt or a Directory) and does not create its
// indexes (Indexes lists them; package store's catalog includes them and the migrations
// build them).
package treedb
