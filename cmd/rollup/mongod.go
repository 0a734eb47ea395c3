package main

import (
	"context"
	"fmt"

	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/embedded/storage"
	"github.com/gameops/rollup/internal/settings"
	"github.com/gameops/rollup/metrics"
)

const mongodUsage = `usage: rollup mongod --listen ADDR (--data DIR | --memory) [flags]

Serve the embedded MongoDB-compatible server on its own, so any MongoDB client (mongosh, the
official drivers) can connect. It prints the connection URI once it listens. --memory on the
command line wins over a --data from the environment or the config file.

Examples:
  rollup mongod --listen 127.0.0.1:27017 --data ./data
  rollup mongod --listen 127.0.0.1:0 --memory --enable-test-commands

Flags:
`

func runMongod(ctx context.Context, e *env, args []string) error {
	fs := e.flags("mongod", mongodUsage)
	listen := fs.String("listen", "127.0.0.1:27017", "TCP address to listen on (port 0 picks a free port)")
	dataDir := fs.String("data", "", "data directory (durable: every acknowledged write survives a crash)")
	memory := fs.Bool("memory", false, "keep everything in memory (nothing survives the process)")
	replSet := fs.String("replset", "rs0", "replica-set name advertised to clients")
	testCmds := fs.Bool("enable-test-commands", false, "enable configureFailPoint (tests only, like mongod's enableTestCommands)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	oplogMB := fs.Int("oplog-size-mb", embedded.DefaultOplogSizeMB, "retained oplog in MiB (like mongod's --oplogSize): a change stream that falls further behind loses its history and its watcher replays the window from the leaves; size it for the watcher's longest lag (docs/capacity.md)")
	if err := e.parse(fs, args); err != nil {
		return usageError(err)
	}
	if err := embedded.CheckOplogSizeMB(*oplogMB); err != nil {
		return fmt.Errorf("%w: --oplog-size-mb: %w", errUsage, err)
	}
	if *memory && *dataDir != "" && fs.Source("memory") == settings.SourceFlag && fs.Source("data") != settings.SourceFlag {
		*dataDir = "" // the command line's --memory beats a --data of the environment or file
	}
	if (*dataDir == "") == !*memory {
		return fmt.Errorf("%w: mongod needs exactly one of --data DIR or --memory", errUsage)
	}
	log, err := metrics.NewLogger(*logLevel, false, e.stderr)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	defer func() { _ = log.Sync() }()

	srv, err := embedded.New(embedded.Config{
		Listen:             *listen,
		DataDir:            *dataDir,
		ReplSetName:        *replSet,
		EnableTestCommands: *testCmds,
		Logger:             log.Named("mongod"),
		Storage:            storage.Options{OplogMaxBytes: int64(*oplogMB) << 20},
	})
	if err != nil {
		return fmt.Errorf("start embedded server: %w", err)
	}
	_, _ = fmt.Fprintln(e.stdout, srv.URI())
	if err := srv.Run(ctx); err != nil {
		return fmt.Errorf("embedded server: %w", err)
	}
	return nil
}
