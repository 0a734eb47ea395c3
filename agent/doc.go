// Package agent is the ready-made agent of 'rollup agent': it reads one project's leaf counts
// from local sources (a Prometheus text exposition, the JSON output of a command, a JSON file
// the game server rewrites), writes every tick's counts to an on-disk spool before sending
// them, and sends the spool oldest first through api/agentclient, with each tick's original
// observed_at, so a resend is always stale and never double counts.
//
// The one idea: the spool is the truth. A tick is sampled, fsync'd to the spool (file and
// directory), and only then sent; it leaves the spool when the server's 200 says every item is
// final, when it falls out of the API's late-data window (dropped, counted, logged by tick), or
// when the spool is full (the oldest goes first, counted). While rollup answers 503, 429 or
// nothing, ticks pile up and are sent when it returns; a restart resumes from the spool, and a
// torn or corrupt spool file is found by its checksum and skipped, never sent.
//
// It owns the agent's YAML configuration (File), its sources, the spool, the sender and the
// agent's own counters (Stats, exposed by Collector). It does not decide what the server
// accepts (the API does: docs/design/api.md) and does not write to the store. Design and
// operation: docs/agent.md.
package agent
