// Package query implements the document-level semantics of the embedded server's reads and
// writes: compiling and matching query filters (CompileFilter), deriving the seed document of
// an upsert from a filter (UpsertSeed), compiling and applying update documents
// (CompileUpdate, with arrayFilters and the $[] and $[id] placeholders), find projections
// (CompileProjection) and sort orders (CompileSort), all with MongoDB 7.0 semantics over
// decoded bson.D values (see package bsonval). Each also says which top-level fields it reads
// (Filter.TopFields, Sort.TopFields, Projection.ApplyRaw straight from the encoded bytes), so
// that a caller decodes no more of a stored document than that.
//
// The aggregation expression language lives in package aggregate, which depends on this one;
// an Env hands its compiler in for $expr, and the command's clock for $currentDate.
//
// Everything outside the supported subset is rejected at compile time with mongoerr code 238
// NotImplemented naming the operator, so that a query never silently returns a wrong answer.
//
// It does no I/O and knows nothing of storage, indexes, commands or the wire protocol; index
// selection and candidate lookup belong to the storage engine and the command layer.
package query
