// Package api is rollup's HTTP API: ingest (POST /v1/counts: authenticate the project's
// token, parse and validate the whole request, hand the leaf counts to a Sink, answer each
// item's durable outcome), the read API for dashboards (GET /v1/projects…), and the
// per-project tokens (NewToken, ListTokens, RevokeToken, RotateToken; only their sha256 is
// stored; revocation and expiry are checked on every request, lookups cached at most 4 s).
//
// The one idea: a request is all or nothing and every 200 is final — any invalid item
// rejects the whole request before anything is written, and an outcome that is not known
// (the store unavailable) is a 503 the agent can safely resend.
//
// It writes the tokens collection and reads counts, trees and tokens, but never writes
// counts itself (the Sink, package bulk, does); it does not define the schema (package
// migrations) and does not run an HTTP server (internal/app mounts Handler). The rules agents
// rely on are in docs/design/api.md, the request's path to the store in
// docs/design/ingest.md, the messages in docs/openapi.yaml.
package api
