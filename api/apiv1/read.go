package apiv1

import "time"

// ProjectsPath is the path of the project list (method GET). The other read endpoints are
// below it: ProjectsPath + "/{project}/tree", "/series", "/top" and "/ticks".
const ProjectsPath = "/v1/projects"

// Read endpoints' path suffixes, after ProjectsPath + "/{project}".
const (
	// TreePath answers a TreeResponse.
	TreePath = "/tree"
	// SeriesPath answers a SeriesResponse.
	SeriesPath = "/series"
	// TopPath answers a TopResponse.
	TopPath = "/top"
	// TicksPath answers a []TickSummary.
	TicksPath = "/ticks"
)

// Downsampling steps and aggregations of GET .../series (the step and agg parameters).
const (
	// Step5m is one point per tick (no downsampling), the default step.
	Step5m = "5m"
	// Step1h is one point per hour.
	Step1h = "1h"
	// Step1d is one point per UTC day.
	Step1d = "1d"
	// AggMax takes the largest online of the step's ticks (the default).
	AggMax = "max"
	// AggMin takes the smallest online of the step's ticks that have a document.
	AggMin = "min"
	// AggMean takes the mean online of the step's ticks that have a document.
	AggMean = "mean"
	// AggLast takes the online of the step's latest tick that has a document.
	AggLast = "last"
)

// ProjectsResponse is the body of GET /v1/projects: the projects the token may read.
type ProjectsResponse struct {
	// Projects lists them by name (just the token's own project).
	Projects []ProjectInfo `json:"projects"`
}

// ProjectInfo is one readable project.
type ProjectInfo struct {
	// Name is the project's name, the {project} of the read paths.
	Name string `json:"name"`
}

// TreeResponse is the body of GET /v1/projects/{project}/tree: every node of the tree version
// of one tick with its totals, and the tick's orphans.
type TreeResponse struct {
	// Project is the project.
	Project string `json:"project"`
	// Tick is the tick shown (RFC 3339, UTC).
	Tick time.Time `json:"tick"`
	// TreeVersion is the tree version of the tick.
	TreeVersion int `json:"tree_version"`
	// Open is true while the tick has not ended by the server's clock: its counts are
	// provisional (agents may still overwrite them).
	Open bool `json:"open"`
	// ClosesAt is the end of the tick: when an Open tick's counts become final.
	ClosesAt time.Time `json:"closes_at"`
	// Root is the id of the root node (Nodes[0]).
	Root string `json:"root"`
	// Nodes has every node of the tree: the root first, then breadth-first with children in
	// tree order.
	Nodes []TreeNode `json:"nodes"`
	// Orphans are the tick's leaf documents whose (id, type) is not a leaf of the tree
	// (counted nowhere; verify and replay use the same rule), sorted by id then type.
	Orphans []Orphan `json:"orphans"`
}

// TreeNode is one node of a TreeResponse.
type TreeNode struct {
	// ID is the node id.
	ID string `json:"id"`
	// Type is the node's type.
	Type string `json:"type"`
	// Parent is the parent's id, "" for the root.
	Parent string `json:"parent"`
	// Online is the node's total (0 without a document at the tick).
	Online int64 `json:"online"`
	// Reported is how many leaves under the node reported (for a leaf: 1 if it reported).
	Reported int64 `json:"reported"`
	// Expected is how many leaves the tree has under the node (1 for a leaf).
	Expected int64 `json:"expected"`
	// Children are the ids of the node's children in tree order (empty for a leaf).
	Children []string `json:"children"`
}

// Orphan is a leaf document whose (id, type) is not a leaf of the tree version of its tick.
type Orphan struct {
	// ID is the document's id.
	ID string `json:"id"`
	// Type is the document's type.
	Type string `json:"type"`
	// Online is the document's count.
	Online int64 `json:"online"`
}

// SeriesResponse is the body of GET /v1/projects/{project}/series: one point per step of the
// window [from, to), gaps included.
type SeriesResponse struct {
	// Node is the node id.
	Node string `json:"node"`
	// Type is the node's type (in the latest tree version of the window that has the node).
	Type string `json:"type"`
	// Step is the step of the points (Step5m, Step1h or Step1d).
	Step string `json:"step"`
	// Agg is how a step's ticks were combined (AggMax, AggMin, AggMean or AggLast).
	Agg string `json:"agg"`
	// Tier is the stored resolution the points were read from: "5m" (the 5-minute
	// documents), "1h" or "1d" (the hourly or daily summaries of a parent or root; a leaf's
	// 1h and 1d points come from its 5-minute documents).
	Tier string `json:"tier"`
	// Points are in time order.
	Points []SeriesPoint `json:"points"`
}

// SeriesPoint is one step of a series.
type SeriesPoint struct {
	// T is the start of the step.
	T time.Time `json:"t"`
	// Online is the step's aggregated total; null when no tick of the step has a document (a gap).
	Online *float64 `json:"online"`
	// Reported is the sum over the step's ticks of the leaves that reported (0 for a tick
	// without a document); for a 5m step, the tick's.
	Reported int64 `json:"reported"`
	// Expected is the sum over the step's ticks of the leaves the tree expects (a tick without
	// a document still expects the node's leaves); for a 5m step, the tick's.
	Expected int64 `json:"expected"`
	// Complete is true when every tick of the step due so far has a document with reported ==
	// expected (TicksComplete == TicksDue > 0). For an Open point it describes the ticks so
	// far: the step is not final.
	Complete bool `json:"complete"`
	// Ticks is the number of ticks in the step (1 at 5m, 12 at 1h, 288 at 1d).
	Ticks int `json:"ticks"`
	// TicksDue is how many of them are due: started by the server's clock, or ahead of it
	// but already holding a document.
	TicksDue int `json:"ticks_due"`
	// TicksComplete is how many of them have a document with reported == expected: the
	// completeness of a 1h or 1d point, in ticks (Reported and Expected are leaves × ticks).
	TicksComplete int `json:"ticks_complete"`
	// Open is true while the step has not ended by the server's clock (the open tick, hour
	// or day): its values are provisional, agents may still overwrite them.
	Open bool `json:"open"`
	// ClosesAt is the end of the step: when an Open step's values become final.
	ClosesAt time.Time `json:"closes_at"`
}

// TopResponse is the body of GET /v1/projects/{project}/top: a node's children at a tick,
// largest first.
type TopResponse struct {
	// Node is the node id.
	Node string `json:"node"`
	// Type is the node's type.
	Type string `json:"type"`
	// Tick is the tick shown.
	Tick time.Time `json:"tick"`
	// Children are at most n children by online descending, then id ascending.
	Children []TopChild `json:"children"`
}

// TopChild is one child of a TopResponse, as its parent's document counts it.
type TopChild struct {
	// ID is the child's id.
	ID string `json:"id"`
	// Type is the child's type.
	Type string `json:"type"`
	// Online is the child's contribution (0 when it has none).
	Online int64 `json:"online"`
	// Reported is how many leaves under the child reported.
	Reported int64 `json:"reported"`
	// Expected is how many leaves the tree has under the child.
	Expected int64 `json:"expected"`
}

// TickSummary is one element of the body of GET /v1/projects/{project}/ticks (a JSON array,
// in time order): a tick that has a root document, with the root's totals.
type TickSummary struct {
	// Tick is the tick's start.
	Tick time.Time `json:"tick"`
	// Online is the root's total.
	Online int64 `json:"online"`
	// Reported is how many leaves of the tree reported.
	Reported int64 `json:"reported"`
	// Expected is how many leaves the tree has.
	Expected int64 `json:"expected"`
}

// Error codes of the read API (besides ErrUnauthorized, ErrForbidden, ErrUnknownProject,
// ErrUnavailable and ErrInternal).
const (
	// ErrInvalidParameter (400): a query parameter is invalid or the window too large; Errors
	// names the parameter.
	ErrInvalidParameter = "invalid_parameter"
	// ErrUnknownNode (404): the node is not in the project's tree (at the tick, or at any tick
	// of the window).
	ErrUnknownNode = "unknown_node"
	// ErrNoData (404): nothing to show: no tree version is effective at the tick, or (without
	// a tick) no tick has a root document yet.
	ErrNoData = "no_data"
)

// Error codes of any path of the API (ingest or read).
const (
	// ErrNotFound (404): no endpoint has the request's path.
	ErrNotFound = "not_found"
	// ErrMethodNotAllowed (405): the path's endpoint takes other methods, listed in the
	// answer's Allow header.
	ErrMethodNotAllowed = "method_not_allowed"
)

// DiffPath answers a DiffResponse: GET ProjectsPath + "/{project}" + DiffPath.
const DiffPath = "/diff"

// DiffResponse is the body of GET /v1/projects/{project}/diff?from=&to=&node=&n=: why a
// node's total changed between two ticks, node by node of its subtree.
type DiffResponse struct {
	// Node is the subtree's root (the node asked for, by default the tree's root).
	Node string `json:"node"`
	// From and To are the two ticks compared.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// FromTreeVersion and ToTreeVersion are the tree versions of the two ticks.
	FromTreeVersion int `json:"from_tree_version"`
	ToTreeVersion   int `json:"to_tree_version"`
	// Root is Node's own change; Share of every node is its change over Root.Change.
	Root DiffNode `json:"root"`
	// Nodes are the nodes under Node whose total changed, or with leaves that went silent,
	// by |change| descending then id; at most n of NodesTotal.
	Nodes      []DiffNode `json:"nodes"`
	NodesTotal int        `json:"nodes_total"`
	// Silent are the leaves that reported at From and not at To (still in the tree): a drop
	// of their whole count that is missing data, not players gone. By online at From
	// descending then id; at most n of SilentTotal, whose online at From sums to SilentOnline.
	Silent       []SilentLeaf `json:"silent"`
	SilentTotal  int          `json:"silent_total"`
	SilentOnline int64        `json:"silent_online"`
}

// DiffNode is one node's change between the two ticks of a DiffResponse.
type DiffNode struct {
	// ID, Type and Parent are the node's (in the tree of To, or of From when it left).
	ID     string `json:"id"`
	Type   string `json:"type"`
	Parent string `json:"parent"`
	// Leaf is true for a leaf.
	Leaf bool `json:"leaf"`
	// From and To are its online totals at the two ticks (0 without a document or not in
	// that tick's tree).
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Change is To − From.
	Change int64 `json:"change"`
	// Share is Change over the root's change (null when the root did not change).
	Share *float64 `json:"share"`
	// SilentLeaves are the leaves under it (itself for a leaf) that went silent, and
	// SilentOnline their online at From: that much of a drop is missing reports.
	SilentLeaves int64 `json:"silent_leaves"`
	SilentOnline int64 `json:"silent_online"`
	// ReportedChange is Change + SilentOnline: the change that is not silence (real drops
	// and gains of the leaves that reported, plus leaves that came or left).
	ReportedChange int64 `json:"reported_change"`
}

// SilentLeaf is a leaf that reported at the first tick of a diff and not at the second.
type SilentLeaf struct {
	// ID, Type and Parent are the leaf's.
	ID     string `json:"id"`
	Type   string `json:"type"`
	Parent string `json:"parent"`
	// Online is its count at the first tick.
	Online int64 `json:"online"`
}

// AnnotationsPath answers an AnnotationsResponse: GET ProjectsPath + "/{project}" +
// AnnotationsPath.
const AnnotationsPath = "/annotations"

// AnnotationsResponse is the body of GET /v1/projects/{project}/annotations?from=&to=: what
// rollup itself recorded in the window, to draw on charts (the dashboard's, or Grafana's
// through a JSON data source).
type AnnotationsResponse struct {
	// From and To are the window, [from, to).
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Annotations overlap the window, by Time.
	Annotations []Annotation `json:"annotations"`
}

// Annotation is one recorded event.
type Annotation struct {
	// Time is when it starts; TimeEnd when it ends (equal for an instant).
	Time    time.Time `json:"time"`
	TimeEnd time.Time `json:"time_end"`
	// Kind is "tree" (a tree version takes effect), "replay", "retention", "outage" (a store
	// outage) or "history_lost" (the watcher replayed a window its change stream lost).
	Kind string `json:"kind"`
	// Title is a one-line summary, Text the details.
	Title string `json:"title"`
	Text  string `json:"text"`
	// Tags are "rollup" and Kind (and "alert" for history_lost), for Grafana's annotation
	// filters.
	Tags []string `json:"tags"`
}
