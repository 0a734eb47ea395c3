// Package api is rollup's HTTP API: ingest (POST /v1/counts: authenticate the project's
// token, parse and validate the whole request, hand the leaf counts to a Sink, answer each
// item's durable outcome), the read API for dashboards (GET /v1/projects…), and the
// per-project tokens (NewToken, ListTokens, RevokeToken, RotateToken; only their sha256 is
// stored; revocation and expiry are checked on every request, lookups cached at most 4 s).
//
// The one idea: a request is all or nothing and every 200 is final — any invalid item
// rejects the whole request before anything is written (the one per-item refusal: an id the
// tree has under another type is answered rejected, naming the tree's type, and not written),
// and an outcome that is not known (the store unavailable) is a 503 the agent can safely
// resend. The read API also answers why a total changed between two ticks (diff) and what
// rollup recorded (annotations), and times every read by route and status (Stats.Reads).
//
// It writes the tokens collection and reads counts, trees, tokens and events, but never writes
// counts itself (the Sink, package bulk, does); it does not define the schema (package
// migrations) and does not run an HTTP server (internal/app mounts Handler). The rules agents
// rely on are in docs/design/api.md, the request's path to the store in
// docs/design/ingest.md, the messages in docs/openapi.yaml.
package api
