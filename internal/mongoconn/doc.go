// Package mongoconn is how rollup's commands reach a MongoDB deployment: databases opened
// with store's durable write concern (store.DurableWriteConcern), a connect-run-disconnect
// helper for the one-shot commands, and what a log or an error may show of a connection
// string (its hosts, never its user, password or options).
//
// It does not know the schema (collections, fields, indexes) or retry anything; the write
// concern itself and DistinctInto are package store's, the ground floor every layer reads.
package mongoconn
