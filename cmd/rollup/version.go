package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

const versionUsage = `usage: rollup version

Prints the module version, the VCS revision and its time ("modified" when the checkout had
uncommitted changes), and the Go version this binary was built with, from its build info.

Examples:
  rollup version
  # rollup v1.4.0 (69d6559…, 2026-11-28T06:00:00Z) go1.26.8

Flags:
`

// runVersion prints the module version and the VCS revision the binary was built from.
func runVersion(_ context.Context, e *env, args []string) error {
	fs := e.flags("version", versionUsage)
	if err := e.parse(fs, args); err != nil {
		return usageError(err)
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
