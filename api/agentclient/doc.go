// Package agentclient is the Go client agents use to send their counts to rollup's ingest API
// (POST /v1/counts). Its retries are safe by construction: a submission carries absolute
// values, one submission id and one observed_at (the version) that every retry reuses, so
// the server applies it at most once in effect and answers "stale" for what an earlier
// attempt already wrote. It retries network errors, 408 and 5xx (honouring Retry-After) with
// exponential backoff and full jitter, a bounded number of times, and never retries another
// 4xx.
// StartJitter spreads a fleet's sends over a window after each tick.
//
// It does not sample counts, schedule ticks or persist anything; it depends only on the
// standard library, zap and the message types of package apiv1.
package agentclient
