// Package aggregate is the aggregation pipeline and expression language of the embedded
// MongoDB-compatible server: it compiles a pipeline ([]bson.D) into stages and runs it over
// the documents a caller yields, with MongoDB 7.0 semantics for the subset rollup and common
// application code need.
//
// It owns the stages $match, $group, $sort, $project, $addFields/$set, $unset, $limit, $skip,
// $count, $unwind and $replaceRoot/$replaceWith; the aggregation expression language (field
// paths with array fan-out, literals, object and array expressions, the variables $$ROOT,
// $$CURRENT, $$REMOVE, $$NOW, $$CLUSTER_TIME and user variables, and the operators $add
// $subtract $multiply $divide $mod $concat $cond $ifNull $switch $cmp $eq $ne $gt $gte $lt $lte
// $and $or $not $in $size $literal $let $map $filter $reduce $getField $setField $unsetField
// $mergeObjects $concatArrays $arrayElemAt $isArray $type $rand and $sum $avg $min $max over
// arrays); and the $group accumulators $sum $avg $min $max $first $last $push $addToSet
// $count. Every other stage, expression operator, accumulator or variable that exists in
// MongoDB is rejected with NotImplemented (238) naming it; names MongoDB does not know get
// MongoDB's own parse errors.
//
// An Env holds what one command's expressions share: its let variables and the values of
// $$NOW and $$CLUSTER_TIME. Through it the package also provides the expression side of
// package query: $expr in filters (Env.CompileFilter) and pipeline-style updates
// (Env.CompileUpdatePipeline).
//
// It does not read storage, choose indexes or handle $changeStream (the caller does, using
// LeadingMatch to pick an index), and it does not match queries or compare sort keys itself:
// $match and $sort use package query so that their semantics agree with find. Output documents
// may share embedded documents and arrays with the input documents; treat both as read-only.
package aggregate
