// Package tree is the service hierarchy of a project (root → groups → servers → processes, or
// any other shape) and its rules: Build validates a set of nodes into a Tree whose navigation
// (Parent, Children, Ancestors, LeafCount, Levels) is O(1) or O(k) per call, the name rules
// (ValidateID, ValidateType, ValidateName), tick alignment (AlignTick), the import file formats
// (Parse, Encode, ReadFile: YAML or JSON, nested or flat, errors at the nodes' lines) and a
// demo generator (Generate).
//
// The one idea: a Tree is immutable and valid by construction, so every caller (ingest
// checks, the watcher, replay, verify) can navigate it without checking again. It is compact
// and holds no pointer per node (ids in one string, navigation in int32 arrays, an
// open-addressing index), because serve keeps every project's trees in memory: a 1M-node tree
// costs ~64 bytes per node and nothing for the garbage collector to trace. Lookup returns a
// Ref, so a caller asking several questions about one id looks it up once.
//
// It has no policy about where trees live: storing versions of a project's tree and choosing
// the version of a tick belong to package tree/treedb.
package tree
