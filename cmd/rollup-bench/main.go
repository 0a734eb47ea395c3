package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gameops/rollup/internal/cli"

	"github.com/gameops/rollup/internal/bench"
	"github.com/gameops/rollup/internal/settings"
)

// errUsage marks a command-line mistake (exit status 2).
var errUsage = cli.ErrUsage

// env is what every benchmark gets from main: its output streams and the environment.
type env struct {
	stdout io.Writer
	stderr io.Writer
	// lookupEnv reads the process environment (nil: os.LookupEnv); tests pass a map.
	lookupEnv settings.LookupEnv
	// launcher returns how scale runs `rollup args...` given its --rollup flag (nil:
	// rollupLauncher, which finds the binary); tests pass a built rollup.
	launcher func(rollupFlag string) (bench.Launcher, error)
}

func main() {
	os.Exit(runMain(&env{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:], run))
}

// runMain runs the command line args with runFn under cli.Main's signal rule and returns
// the exit status.
func runMain(e *env, args []string, runFn func(context.Context, *env, []string) error) int {
	return cli.Main("rollup-bench", e.stderr, func(ctx context.Context) error { return runFn(ctx, e, args) })
}

// benchmark is one subcommand of rollup-bench.
type benchmark func(ctx context.Context, e *env, args []string) error

// benchmarks returns the subcommands by name.
func benchmarks() map[string]benchmark {
	return map[string]benchmark{
		"mongod":       runMongod,
		"changestream": runChangeStream,
		"ingest":       runIngest,
		"baselines":    runBaselines,
		"scale":        runScale,
		"runaway":      runRunaway,
	}
}

func run(ctx context.Context, e *env, args []string) error {
	name := ""
	if len(args) > 0 {
		name = args[0]
	}
	if b, ok := benchmarks()[name]; ok {
		return b(ctx, e, args[1:])
	}
	switch name {
	case "help", "-h", "--help":
		_, _ = fmt.Fprint(e.stdout, usage)
		return nil
	case "":
		_, _ = fmt.Fprint(e.stderr, usage)
		return fmt.Errorf("%w: a benchmark name is required (mongod, changestream, ingest, baselines, scale, runaway)", errUsage)
	}
	_, _ = fmt.Fprint(e.stderr, usage)
	return fmt.Errorf("%w: unknown benchmark %q (mongod, changestream, ingest, baselines, scale, runaway)", errUsage, name)
}

// flags returns a benchmark's flag set (see package settings) with --mongodb-uri (into uri)
// defined, read from the command line only: errors and --help go to stderr.
func (e *env) flags(name, usage string, uri *string) *settings.FlagSet {
	fs := settings.New("rollup-bench "+name, usage, e.stderr)
	fs.StringVar(uri, "mongodb-uri", "", "benchmark this MongoDB (one host) instead of an embedded server; command line only")
	fs.FlagOnly("mongodb-uri")
	return fs
}

// parse parses a benchmark's flags under e's environment and checks them with validate.
func (e *env) parse(fs *settings.FlagSet, args []string, validate func() error) error {
	if err := fs.Parse(args, e.lookupEnv); err != nil {
		return err
	}
	return validate()
}

// usageError is a benchmark's result for a flag-parsing error: nil after --help, else a usage
// error (exit status 2).
func usageError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return fmt.Errorf("%w: %w", errUsage, err)
}
