// Package mongoconn is how rollup's processes reach a MongoDB deployment: the durable write
// concern every rollup write uses (Durable: w "majority", j true), databases opened with it,
// a connect-run-disconnect helper for the one-shot commands, DistinctInto (a distinct that
// reports its error: the driver's Decode hides it), and what a log or an error may
// show of a connection string (its hosts, never its user, password or options).
//
// The one idea: an acknowledged write is one that survives a failover and a crash, so there
// is exactly one way to build the write concern.
//
// It does not know the schema (collections, fields, indexes) or retry anything.
package mongoconn
