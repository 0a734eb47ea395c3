// Package migrations holds the versioned, idempotent schema steps of rollup's database and the
// lock that keeps two instances from migrating at once.
package migrations
