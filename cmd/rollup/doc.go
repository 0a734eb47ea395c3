// Command rollup is rollup's binary: the service (serve), the embedded
// MongoDB-compatible server on its own (mongod), the operator commands (migrate, token, tree,
// replay, verify, submit, simulate). The benchmarks are a binary of their own
// (cmd/rollup-bench), so this one links no fault proxy or rejected design.
//
// The one idea: this package only turns a command line into settings and calls. Each
// subcommand has one file with its usage text, its flags (read through internal/settings:
// flag > ROLLUP_<FLAG> > --config file > default) and its checks; the work is in the library
// packages (internal/app for serve, internal/ops for the one-shot commands, and the packages
// they use). main.go decides exit codes in one place (0 ok, 1 failure, 2 usage) and handles
// signals: the first SIGINT or SIGTERM cancels the context, a second exits at once.
package main
