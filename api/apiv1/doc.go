// Package apiv1 holds the JSON messages of rollup's v1 HTTP API: the ingest request and its
// per-item response (POST /v1/counts), the read API's answers (projects, tree, series, top,
// ticks), the error body and their codes. It is shared by the server
// (package api) and the agent client (package agentclient) so the two cannot drift. For the
// per-request hot path it also encodes the request and the 200 answer without reflection
// (AppendJSON) and decodes the answer (DecodeCountsResponse), with exactly encoding/json's
// results. It does no I/O and no validation; docs/openapi.yaml is the normative description.
package apiv1
