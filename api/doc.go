// Package api is rollup's HTTP API. POST /v1/counts (ingest) authenticates an agent's bearer
// token against its project, decodes and validates the whole request (rejecting it entirely,
// writing nothing, when any part is invalid — including, when Config.Trees is set, counts of
// another project's nodes (403) or of an interior node of the project's tree (400)), hands the
// leaf counts to a Sink (the bulk writer) and answers each item's durable outcome. During a
// known store outage (StoreGate) it answers 503 at once, with the writer's Retry-After. The
// read API (GET /v1/projects…, read*.go) serves rolled-up trees, series, top-N children and
// ticks to dashboards, only ever from documents of the token's project. It also creates and
// lists the per-project tokens, ingest or read-only (only their sha256 is stored).
//
// Decisions agents rely on (docs/openapi.yaml is the normative description):
//   - Check order: a missing, malformed or unknown token is 401 before the body is read, so an
//     unauthenticated caller learns nothing about projects (during a known store outage any
//     well-formed Authorization gets the 503 first: nothing could be checked or written). With
//     a valid token, a request
//     naming any other project is 403 whether that project exists or not; 404 is only for a
//     valid token whose own project has been deleted. Then the body: 415 for a Content-Type
//     that is not JSON or a Content-Encoding that is not gzip (body.go), 408 when it has not
//     arrived within BodyReadTimeout, 413 over MaxBodyBytes (received or decompressed) or
//     MaxItems, 400 malformed JSON or invalid fields/items, 422 timestamps outside the window.
//   - Counts are written in decimal digits only (-0, 1.0 and 1e2 are refused); a name that
//     breaks the id rule is reported by its first offending character, at its position
//     counted in characters.
//   - All or nothing: a request with any invalid item is rejected as a whole (every invalid
//     field is listed with its item index) and nothing reaches the Sink.
//   - Timestamps must already be aligned to the tick (tree.AlignTick); an unaligned timestamp
//     is rejected with the aligned value in the message, never silently moved to another key.
//   - The version of every write is observed_at in unix nanoseconds. When observed_at is
//     omitted the receive time is used, so a resend gets a newer version and could overwrite a
//     value sent in between; agents should always send observed_at (agentclient does).
//   - Every answer but a 200 has the JSON error body (apiv1.ErrorResponse), also a path no
//     endpoint has (404 not_found) and a method its endpoint does not take (405, with Allow).
//   - 200 means every item is final: applied, stale (a same-or-newer version is stored) or
//     rejected (a permanent store error, or the key holds another project's count or a
//     parent's total). If the store is unavailable or any item's outcome is unknown, the
//     answer is 503 with Retry-After and resending the same request is safe.
//
// It does not write to MongoDB itself (the Sink does), does not define the schema (package
// migrations) and does not run an HTTP server (cmd/rollup's serve does).
package api
