// Package agentclient is the Go client agents use to send their counts to rollup's ingest API
// (POST /v1/counts), plus the setup an agent needs around it (ReadTokenFile, WaitForAPI).
//
// The one idea: retries are safe by construction — a submission carries absolute values, one
// submission id and one observed_at (its version) that every retry reuses, so the server
// applies it at most once in effect and answers "stale" for what an earlier attempt wrote. It
// retries network errors, 408, 429 and 5xx (honouring Retry-After) with capped exponential backoff
// and full jitter, a bounded number of times, and never another 4xx; StartJitter spreads a
// fleet's sends after each tick.
//
// It does not sample counts, schedule ticks or persist anything; it depends only on the
// standard library, zap and the messages of package apiv1.
package agentclient
