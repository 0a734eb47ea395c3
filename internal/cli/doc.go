// Package cli is what the repository's commands (cmd/rollup, cmd/rollup-bench) share around
// their run function: the usage error (exit status 2), the one place exit statuses are
// decided, and the signal rule (a first SIGINT or SIGTERM cancels the context for a graceful
// shutdown; a second one ends the process at once, status 1).
//
// It knows nothing of the commands themselves: flags are package settings', the wiring is
// each command's.
package cli
