// Package embedded is rollup's embedded MongoDB-compatible server. It is a Go module of its
// own (github.com/gameops/rollup/embedded) and imports nothing of rollup: it speaks the
// MongoDB wire protocol over TCP for the subset of commands rollup uses, so the product, its
// tests and its demos talk to it through the official Go driver exactly as to a replica set.
//
// This package is the server and its commands: Server (Config, New, Run), the command
// dispatch (commands.go), the option table every command is checked against before it runs
// (options.go) and one file per command (cmd_<name>.go; serverStatus, getCmdLineOpts and
// replSetGetStatus in cmd_serverstatus.go), with the state a mongod
// keeps per connection and session (cursors, retryable-write results per statement), change
// streams, the TTL monitor and, with EnableTestCommands, the fail points failCommand,
// onPrimaryTransactionalWrite and failGetMoreAfterCursorCheckout. The layers it builds on are
// packages: clientconn (connections), wire (messages), storage (documents, indexes,
// durability, oplog), query and aggregate (MongoDB's semantics), bsonval, mongoerr and cpulist
// (the CPU lists hostInfo counts, which rollup-bench reads too);
// blackpipe and embeddedtest are for tests. Anything outside the subset answers 238
// NotImplemented naming it, never a silent wrong answer.
//
// With Config.TLS its listener speaks TLS only (tls.go loads the PEM files); with Config.Auth
// clients authenticate with SCRAM-SHA-256 (auth.go: saslStart, saslContinue, hello's
// speculativeAuthenticate) as users of createUser, stored in admin.system.users as SCRAM keys,
// or of Config.Users (users.go, cmd_users.go). Every user has all privileges: roles are not
// enforced, so createUser takes root only. Without Auth, New refuses to listen beyond
// loopback unless Config.InsecureNoAuth.
//
// It does not do authorization by role, x509 or SCRAM-SHA-1 authentication, compression,
// transactions or sharding.
package embedded
