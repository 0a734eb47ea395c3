// Package treedb stores the versions of every project's tree in MongoDB (collections trees and
// tree_nodes) and answers which version applies to a tick (VersionAt: the version with the
// largest effective_from <= the tick). Directory keeps recent versions of every project in
// memory, with an index of their node ids, for the ingest API's checks without a query per
// request.
//
// The one idea: versions are immutable and numbered per project from 1, and a version's
// trees document is written last, so a version is visible only once all its nodes are stored;
// rollups of a tick always use the tree that was in effect then.
//
// It does not validate trees (package tree does, through tree.Build), does not watch for new
// versions (its callers poll VersionAt or a Directory) and does not create its indexes
// (Indexes lists them for the migrations step).
package treedb
