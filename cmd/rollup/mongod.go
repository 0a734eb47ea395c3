package main

import (
	"context"
	"crypto/tls"
	"errors"
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

It listens on loopback by default. To listen beyond loopback, turn authentication on with
--auth (SCRAM-SHA-256 users: created with createUser, the first one from a loopback client
while none exists, or given in a --users file), ideally with TLS (--tls-cert, --tls-key);
--insecure-no-auth listens beyond loopback without authentication. docs/deploy.md, "The
embedded server: TLS and authentication", has the details and the --users file format.

Examples:
  rollup mongod --listen 127.0.0.1:27017 --data ./data
  rollup mongod --listen 127.0.0.1:0 --memory --enable-test-commands
  rollup mongod --listen 0.0.0.0:27017 --data ./data --auth --users users.yaml \
      --tls-cert server.pem --tls-key server-key.pem

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
	tlsCert := fs.String("tls-cert", "", "PEM file of the server's TLS certificate (and chain): clients must then connect with tls=true")
	tlsKey := fs.String("tls-key", "", "PEM file of the TLS certificate's private key (may be the --tls-cert file)")
	tlsCA := fs.String("tls-ca-file", "", "PEM file of CAs that client certificates must chain to (optional; a client without a certificate is still accepted)")
	auth := fs.Bool("auth", false, "require SCRAM-SHA-256 authentication (users from createUser or --users)")
	usersPath := fs.String("users", "", "YAML or JSON file of users: name and password or SCRAM-SHA-256 credentials (docs/deploy.md)")
	insecure := fs.Bool("insecure-no-auth", false, "DANGEROUS: listen beyond loopback without --auth, so anyone who reaches the port can read and write everything")
	if err := e.parse(fs, args); err != nil {
		return usageError(err)
	}
	sec, err := mongodSecurity(*tlsCert, *tlsKey, *tlsCA, *usersPath)
	if err != nil {
		return err
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
		TLS:                sec.tls,
		Auth:               *auth,
		Users:              sec.users,
		InsecureNoAuth:     *insecure,
	})
	if errors.Is(err, embedded.ErrNoAuthBeyondLoopback) {
		return fmt.Errorf("%w: refusing to listen on %s without --auth; pass --insecure-no-auth to override (anyone who reaches the port could read and write everything)", errUsage, *listen)
	}
	if err != nil {
		return fmt.Errorf("start embedded server: %w", err)
	}
	if *auth && len(sec.users) == 0 {
		log.Info("authentication is on: while no user exists, a loopback client may create the first one (createUser on admin with roles [root])")
	}
	_, _ = fmt.Fprintln(e.stdout, srv.URI())
	if err := srv.Run(ctx); err != nil {
		return fmt.Errorf("embedded server: %w", err)
	}
	return nil
}

// mongodTLSUsers is what mongod's security flags load: the TLS configuration and the users
// of --users.
type mongodTLSUsers struct {
	tls   *tls.Config
	users []embedded.User
}

// mongodSecurity loads the files the security flags name; each error names its file.
func mongodSecurity(cert, key, ca, usersPath string) (mongodTLSUsers, error) {
	var sec mongodTLSUsers
	if cert != "" || key != "" || ca != "" {
		if cert == "" || key == "" {
			return sec, fmt.Errorf("%w: TLS needs both --tls-cert and --tls-key", errUsage)
		}
		c, err := embedded.LoadTLS(embedded.TLSFiles{CertFile: cert, KeyFile: key, CAFile: ca})
		if err != nil {
			return sec, fmt.Errorf("%w: %w", errUsage, err)
		}
		sec.tls = c
	}
	if usersPath != "" {
		users, err := loadUsersFile(usersPath)
		if err != nil {
			return sec, fmt.Errorf("%w: %w", errUsage, err)
		}
		sec.users = users
	}
	return sec, nil
}
