// Package aggregate is the aggregation pipeline of the embedded MongoDB-compatible server: it
// compiles a pipeline ([]bson.D) into stages and runs it over the documents a caller yields,
// with MongoDB 7.0 semantics for the subset rollup needs.
//
// It owns the stages $match, $group, $sort, $project, $addFields/$set, $unset, $limit, $skip,
// $count and $unwind; the aggregation expression language (field paths with array fan-out,
// $$ROOT/$$CURRENT, literals, object and array expressions, and the operators $add $subtract
// $multiply $divide $mod $concat $cond $ifNull $cmp $eq $ne $gt $gte $lt $lte $and $or $not $in
// $size $literal and $sum $avg $min $max over arrays); and the $group accumulators $sum $avg
// $min $max $first $last $push $addToSet $count. Every other stage, expression operator,
// accumulator or variable that exists in MongoDB is rejected with NotImplemented (238) naming
// it; names MongoDB does not know get MongoDB's own parse errors.
//
// It does not read storage, choose indexes or handle $changeStream (the caller does, using
// LeadingMatch to pick an index), and it does not match queries or compare sort keys itself:
// $match and $sort use package query so that their semantics agree with find. Output documents
// may share embedded documents and arrays with the input documents; treat both as read-only.
package aggregate
