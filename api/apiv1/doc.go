// Package apiv1 holds the JSON messages of rollup's v1 HTTP ingest API (POST /v1/counts): the
// request, the per-item response, the error body and their codes. It is shared by the server
// (package api) and the agent client (package agentclient) so the two cannot drift. It does no
// I/O and no validation; docs/openapi.yaml is the normative description.
package apiv1
