package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
)

// runVersion prints the module version and the VCS revision the binary was built from.
func runVersion(_ context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		_, _ = fmt.Fprintln(e.stderr, "usage: rollup version\n\nPrints the module version, the VCS revision and time, and the Go version of this binary.")
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: version takes no arguments", errUsage)
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return fmt.Errorf("read build info: the binary carries none")
	}
	printVersion(e.stdout, info)
	return nil
}

// printVersion writes what info says of the build: "rollup VERSION (REVISION[, modified],
// TIME) GO". A binary built outside a checkout has no revision ("unknown").
func printVersion(w io.Writer, info *debug.BuildInfo) {
	version := info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	rev, when, modified := "unknown", "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified {
		rev += ", modified"
	}
	if when != "" {
		rev += ", " + when
	}
	_, _ = fmt.Fprintf(w, "rollup %s (%s) %s\n", version, rev, info.GoVersion)
}
