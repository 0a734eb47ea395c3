package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// errUsage marks a command-line mistake; main exits with status 2 for it.
var errUsage = errors.New("usage")

// command is one subcommand of the rollup binary.
type command struct {
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

// env is what every subcommand gets from main: its output streams.
type env struct {
	stdout io.Writer
	stderr io.Writer
}

func commands() map[string]command {
	return map[string]command{
		"mongod": {summary: "serve the embedded MongoDB-compatible server on its own", run: runMongod},
		"bench":  {summary: "run a benchmark (mongod: bulk upserts through the driver)", run: runBench},
		"serve":  {summary: "run rollup (starts the embedded store without --mongodb-uri)", run: runServe},

		"migrate": {summary: "apply or show schema migrations (up [--dry-run], status)", run: runMigrate},
		"submit":  {summary: "send one tick's counts to a rollup server (for shell agents)", run: runSubmit},
		"token":   {summary: "create or list a project's API tokens (create, list)", run: runToken},

		"tree": {summary: "import, show or validate a project's tree (import FILE, show --project P, validate FILE)", run: runTree},

		"simulate": {summary: "run simulated agents against a rollup API (the compose demo)", run: runSimulate},

		"replay": {summary: "recompute a project's parents for a time window from the leaves (--dry-run: show changes)", run: runReplay},
		"verify": {summary: "check a project's rollups for a time window; exit 1 on any violation", run: runVerify},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, &env{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(exitCode(os.Stderr, err))
}

// exitCode decides the process exit status in one place: 0 ok, 2 usage, 1 anything else.
func exitCode(stderr io.Writer, err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		_, _ = fmt.Fprintln(stderr, "rollup:", err)
		return 2
	default:
		_, _ = fmt.Fprintln(stderr, "rollup:", err)
		return 1
	}
}

func run(ctx context.Context, e *env, args []string) error {
	cmds := commands()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printUsage(e.stdout, cmds)
		if len(args) == 0 {
			return fmt.Errorf("%w: a subcommand is required", errUsage)
		}
		return nil
	}
	c, ok := cmds[args[0]]
	if !ok {
		printUsage(e.stderr, cmds)
		return fmt.Errorf("%w: unknown subcommand %q", errUsage, args[0])
	}
	return c.run(ctx, e, args[1:])
}

func printUsage(w io.Writer, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("usage: rollup <subcommand> [flags]\n\nsubcommands:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-10s %s\n", n, cmds[n].summary)
	}
	b.WriteString("\nRun 'rollup <subcommand> --help' for its flags and examples.\n")
	b.WriteString("\nExit status: 0 success, 1 failure (for verify: violations found), 2 usage error.\n")
	_, _ = io.WriteString(w, b.String())
}

// newFlagSet returns a subcommand's flag set: errors and --help go to stderr, and --help prints
// usage (the command's text with its examples) followed by the flags.
func newFlagSet(e *env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		_, _ = fmt.Fprint(e.stderr, usage)
		fs.PrintDefaults()
	}
	return fs
}

// usageError is a subcommand's result for a flag-parsing error: nil after --help, else a usage
// error (exit status 2).
func usageError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return fmt.Errorf("%w: %w", errUsage, err)
}
