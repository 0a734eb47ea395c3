package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/sourcegraph/conc/pool"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded"
)

const serveUsage = `usage: rollup serve [flags]

Run rollup. Without --mongodb-uri it starts the embedded MongoDB-compatible server in-process
(the embedded default): durable in --data, or in memory with --demo.

Examples:
  rollup serve --demo                                   # in memory, demo data, for a first look
  rollup serve --data ./rollup-data                     # embedded server, durable
  rollup serve --mongodb-uri 'mongodb://db1,db2,db3/?replicaSet=rs0'

Flags:
`

// serveConfig is the parsed configuration of the serve command.
type serveConfig struct {
	mongoURI  string
	dataDir   string
	demo      bool
	mongoAddr string
	logLevel  string
}

func parseServe(e *env, args []string) (serveConfig, error) {
	var c serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		_, _ = fmt.Fprint(e.stderr, serveUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.mongoURI, "mongodb-uri", os.Getenv("ROLLUP_MONGODB_URI"), "MongoDB connection string (env ROLLUP_MONGODB_URI); empty starts the embedded server")
	fs.StringVar(&c.dataDir, "data", "rollup-data", "data directory of the embedded server")
	fs.BoolVar(&c.demo, "demo", false, "demo mode: embedded server in memory, a demo project, token and simulated agents")
	fs.StringVar(&c.mongoAddr, "embedded-listen", "127.0.0.1:0", "address of the embedded server (port 0 picks a free one)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.demo && c.mongoURI != "" {
		return c, errors.New("--demo runs on the embedded server: drop --mongodb-uri")
	}
	return c, nil
}

func runServe(ctx context.Context, e *env, args []string) error {
	cfg, err := parseServe(e, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	log, err := newLogger(cfg.logLevel, e.stderr)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	defer func() { _ = log.Sync() }()

	p := pool.New().WithContext(ctx).WithCancelOnError()
	uri := cfg.mongoURI
	if uri == "" {
		dir := cfg.dataDir
		if cfg.demo {
			dir = ""
		}
		srv, err := embedded.New(embedded.Config{Listen: cfg.mongoAddr, DataDir: dir, Logger: log.Named("mongod")})
		if err != nil {
			return fmt.Errorf("start embedded server: %w", err)
		}
		uri = srv.URI()
		log.Info("embedded server listening", zap.String("uri", uri), zap.String("data", dirOrMemory(dir)))
		p.Go(srv.Run)
	}
	_, _ = fmt.Fprintf(e.stdout, "rollup store: %s\n", uri)
	if err := p.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func dirOrMemory(dir string) string {
	if dir == "" {
		return "(memory)"
	}
	return dir
}
