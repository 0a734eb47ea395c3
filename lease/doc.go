// Package lease decides which instance runs what: leases with fencing terms (one lease per
// watcher partition, stored in the leases collection) and the instance id a process holds
// while it runs (the instances collection, kept alive by a heartbeat).
//
// The one idea: a lease's term only grows, across every partition, and a holder's writes
// carry it; a stored document with a newer term refuses them (TermGuard), so a holder that
// wakes up after its lease expired cannot overwrite its successor's work — it gets an error
// wrapping ErrFenced instead. Time only decides when a standby may take over, never whether
// a write is safe.
//
// It does not run anything under a lease (package watcher starts and stops partitions) and
// does not choose partitions.
package lease
