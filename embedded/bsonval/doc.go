// Package bsonval is the embedded server's view of BSON values: a fast decoder from raw BSON to
// bson.D (and back; DecodeFields decodes only some top-level fields, SelectFields copies them
// without decoding, EachElement walks the raw elements), MongoDB's comparison order across
// types, dotted-path lookup, and an order-preserving byte encoding of values for index keys.
//
// Decoded values always have one of these Go types: float64, string, bson.D, bson.A,
// bson.Binary, bson.Undefined, bson.ObjectID, bool, bson.DateTime, nil (null), bson.Regex,
// bson.DBPointer, bson.JavaScript, bson.Symbol, bson.CodeWithScope, int32, bson.Timestamp,
// int64, bson.Decimal128, bson.MinKey, bson.MaxKey. Compare and AppendKey also accept Go int
// (treated as int64) so tests can write literals.
//
// It does not match queries or apply updates: that is package query.
package bsonval
