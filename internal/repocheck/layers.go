package repocheck

// Layers returns the service module's packages by floor, ground floor first (paths relative
// to the module). A package may import only packages on floors below its own; test files
// aside. The embedded server (embedded/) is a module of its own that imports nothing of
// rollup's.
func Layers() [][]string {
	return [][]string{
		{"rollup", "tree", "internal/cli", "internal/status", "internal/hist", "internal/settings", "internal/testctx", "internal/testnet", "internal/repocheck", "internal/certfile", "api/internal/jsonscan", "web"},
		{"store", "retry", "api/apiv1", "internal/certfile/certtest"},
		{"tree/treedb", "lease", "bulk", "internal/mongoconn", "api/agentclient"},
		{"migrations", "recompute", "retention", "metrics/totals", "agentsim", "agent", "tree/treedb/treedbtest"},
		{"watcher", "api"},
		{"metrics", "internal/ops"},
		{"internal/app"},
		{"internal/bench", "internal/soak"},
		{"cmd/rollup", "cmd/rollup-bench"},
	}
}
