package main

import (
	"io"

	"go.uber.org/zap"

	"github.com/gameops/rollup/metrics"
)

// newLogger builds the process logger: console encoding on w at the given level (serve in
// production uses metrics.NewLogger with JSON).
func newLogger(level string, w io.Writer) (*zap.Logger, error) {
	return metrics.NewLogger(level, false, w)
}
