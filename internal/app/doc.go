// Package app assembles `rollup serve`: from a validated Config it starts the embedded store
// (when no MongoDB URI is given), connects with the durable write concern, builds the bulk
// writer, the ingest and read API, the dashboard, the watcher, the business metrics, the
// health endpoints and the demo, and runs them under one conc pool until the context ends.
// With a certificate and key (package certfile) the HTTP port serves TLS only.
//
// The one idea: the HTTP port answers at once and nothing waits for the store to start it;
// migrations, the watcher and the demo wait for the store with backoff while /readyz says
// what waits, and ingest answers 503 until the schema is in place (gatedSink).
//
// It does not parse the command line (cmd/rollup does, through internal/settings) and holds
// no logic of its own beyond wiring: each component's behaviour is in its package.
package app
