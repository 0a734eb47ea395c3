// Package tree is the service hierarchy of a project (root → groups → servers → processes, or
// any other shape) and its validation: Node, Build and the navigation methods of Tree that the
// watcher calls per event (Parent, Children, LeafCount, Levels... all O(1) or O(k)), the name
// rules (ValidateID, ValidateType), tick alignment (AlignTick), the import file formats
// (Parse, Encode: YAML or JSON, nested or flat) and a demo generator (Generate).
//
// It does no I/O and has no policy about where trees live: storing versions of a project's
// tree and choosing the version of a tick belong to package tree/treedb; reading files and
// printing belong to the command line.
package tree
