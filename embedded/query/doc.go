// Package query implements the document-level semantics of the embedded server's reads and
// writes: compiling and matching query filters (CompileFilter), deriving the seed document of
// an upsert from a filter (UpsertSeed), compiling and applying update documents
// (CompileUpdate), find projections (CompileProjection) and sort orders (CompileSort), all with
// MongoDB 7.0 semantics over decoded bson.D values (see package bsonval).
//
// Everything outside the supported subset is rejected at compile time with mongoerr code 238
// NotImplemented naming the operator, so that a query never silently returns a wrong answer.
//
// It does no I/O and knows nothing of storage, indexes, commands or the wire protocol; index
// selection and candidate lookup belong to the storage engine and the command layer.
package query
