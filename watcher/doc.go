// Package watcher is the change-stream loop that recomputes parent and root totals, and its
// checkpoints (resume tokens saved only after the rollups before them are durable).
package watcher
