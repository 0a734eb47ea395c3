package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/gameops/rollup/internal/bench"
)

// The scale benchmark runs rollup as deployed: `rollup mongod` and `rollup serve` are child
// processes of a rollup binary, which this file finds. The benchmark is not linked into that
// binary, so it is given one: --rollup PATH, else a rollup next to this executable (make build
// puts both in bin/), else rollup on PATH.

// rollupFlag is the flag that names the rollup binary scale runs.
const rollupFlag = "rollup"

// launch returns how scale runs `rollup args...`: e.launcher when a test set it, else
// rollupLauncher.
func (e *env) launch(path string) (bench.Launcher, error) {
	if e.launcher != nil {
		return e.launcher(path)
	}
	return rollupLauncher(path)
}

// rollupLauncher returns a Launcher that runs the rollup binary at path, or when path is
// empty the one findRollup finds.
func rollupLauncher(path string) (bench.Launcher, error) {
	exe, err := findRollup(path)
	if err != nil {
		return nil, err
	}
	return func(args ...string) *exec.Cmd { return exec.Command(exe, args...) }, nil
}

// findRollup returns the rollup binary to run: path (checked), else a rollup next to this
// executable, else rollup on PATH. The error names --rollup.
func findRollup(path string) (string, error) {
	if path != "" {
		exe, err := exec.LookPath(path)
		if err != nil {
			return "", fmt.Errorf("--%s %s: %w", rollupFlag, path, err)
		}
		return exe, nil
	}
	if self, err := os.Executable(); err == nil {
		next := filepath.Join(filepath.Dir(self), "rollup")
		if exe, err := exec.LookPath(next); err == nil {
			return exe, nil
		}
	}
	exe, err := exec.LookPath("rollup")
	if err != nil {
		return "", errors.New("no rollup binary next to rollup-bench or on PATH: build one (make build) or pass --" + rollupFlag + " PATH")
	}
	return exe, nil
}
