package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/gameops/rollup/internal/cli"

	"github.com/gameops/rollup/internal/settings"
)

// errUsage marks a command-line mistake (exit status 2).
var errUsage = cli.ErrUsage

// command is one subcommand of the rollup binary.
type command struct {
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

// env is what every subcommand gets from main: its output streams and the environment.
type env struct {
	stdout io.Writer
	stderr io.Writer
	// lookupEnv reads the process environment (nil: os.LookupEnv); tests pass a map.
	lookupEnv settings.LookupEnv
}

func commands() map[string]command {
	return map[string]command{
		"mongod": {summary: "serve the embedded MongoDB-compatible server on its own", run: runMongod},
		"serve":  {summary: "run rollup (starts the embedded store without --mongodb-uri)", run: runServe},

		"migrate": {summary: "apply or show schema migrations (up [--dry-run], status)", run: runMigrate},
		"submit":  {summary: "send one tick's counts to a rollup server (for shell agents)", run: runSubmit},
		"agent":   {summary: "run the ready-made agent: sources → on-disk spool → rollup, nothing lost (--config FILE)", run: runAgent},
		"token":   {summary: "create or list a project's API tokens (create, list)", run: runToken},

		"tree": {summary: "import, show or validate a project's tree (import FILE, show --project P, validate FILE)", run: runTree},

		"simulate": {summary: "run simulated agents against a rollup API (the compose demo)", run: runSimulate},

		"replay": {summary: "recompute a project's parents for a time window from the leaves (--dry-run: show changes)", run: runReplay},
		"verify": {summary: "check a project's rollups for a time window; exit 1 on any violation", run: runVerify},

		"retention": {summary: "show or change how long each tier is kept (show, set, clear)", run: runRetention},
		"version":   {summary: "print the module version and VCS revision of this binary", run: runVersion},
	}
}

func main() {
	os.Exit(runMain(&env{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:], run))
}

// runMain runs the command line args with runFn under cli.Main's signal rule and returns
// the exit status.
func runMain(e *env, args []string, runFn func(context.Context, *env, []string) error) int {
	return cli.Main("rollup", e.stderr, func(ctx context.Context) error { return runFn(ctx, e, args) })
}

// exitCode is cli.ExitCode for this command.
func exitCode(stderr io.Writer, err error) int { return cli.ExitCode("rollup", stderr, err) }

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
	b.WriteString("\nRun 'rollup <subcommand> --help' for its flags, their environment variables and examples.\n")
	b.WriteString("Every flag --some-flag can also be set by the environment variable ROLLUP_SOME_FLAG or the\n")
	b.WriteString("key some-flag of the YAML file --config FILE; precedence: flag > environment > file > default.\n")
	b.WriteString("\nExit status: 0 success, 1 failure (for verify: violations found), 2 usage error.\n")
	b.WriteString("A first SIGINT or SIGTERM shuts down gracefully; a second one exits at once (status 1).\n")
	_, _ = io.WriteString(w, b.String())
}

// flags returns a subcommand's flag set (see package settings): errors and --help go to
// stderr.
func (e *env) flags(name, usage string) *settings.FlagSet {
	return settings.New(name, usage, e.stderr)
}

// parse parses a command line of flags only (settings.FlagSet.Parse) under e's environment.
func (e *env) parse(fs *settings.FlagSet, args []string) error {
	return fs.Parse(args, e.lookupEnv)
}

// parseArgs parses flags and arguments in any order (settings.FlagSet.ParseArgs) under e's
// environment and returns the arguments.
func (e *env) parseArgs(fs *settings.FlagSet, args []string) ([]string, error) {
	return fs.ParseArgs(args, e.lookupEnv)
}

// usageError is a subcommand's result for a flag-parsing error: nil after --help, else a usage
// error (exit status 2).
func usageError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return fmt.Errorf("%w: %w", errUsage, err)
}
