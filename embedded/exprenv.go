package embedded

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/aggregate"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/query"
)

// exprEnv returns the expression context of a command: its let option (evaluated once, as
// in MongoDB) and the values of $$NOW and $$CLUSTER_TIME, which stay fixed for the command.
func (s *Server) exprEnv(r *request) (*aggregate.Env, error) {
	var let bson.D
	if v, ok := r.arg("let"); ok && v != nil {
		d, ok := v.(bson.D)
		if !ok {
			return nil, mongoerr.TypeMismatchf("BSON field '%s.let' is the wrong type '%s', expected type 'object'", r.name, typeName(v))
		}
		let = d
	}
	return aggregate.NewEnv(let, time.Now(), s.clusterTimeFor(bson.Timestamp{}))
}

// updater is a compiled update of either kind: update operators or a replacement document
// (*query.Update), or a pipeline (*aggregate.UpdatePipeline).
type updater interface {
	Apply(doc bson.D, isInsert bool) (bson.D, query.UpdateDescription, bool, error)
	IsReplacement() bool
}

// applyMatched applies upd to d, a document filter matched, resolving the positional $ to
// the array position the filter matched.
func applyMatched(upd updater, filter *query.Filter, d bson.D) (bson.D, query.UpdateDescription, bool, error) {
	if u, ok := upd.(*query.Update); ok && u.Positional() {
		_, pos, err := filter.MatchPosition(d)
		if err != nil {
			return nil, query.UpdateDescription{}, false, err
		}
		return u.ApplyPosition(d, false, pos)
	}
	return upd.Apply(d, false)
}

// compileUpdater compiles an update statement's update (u of update, update of
// findAndModify): a document of operators, a replacement document, or a pipeline.
func compileUpdater(env *aggregate.Env, where string, u any, arrayFilters bson.A) (updater, error) {
	switch x := u.(type) {
	case bson.D:
		return query.CompileUpdateEnv(x, arrayFilters, env.QueryEnv())
	case bson.A:
		if len(arrayFilters) > 0 {
			return nil, mongoerr.FailedToParsef("arrayFilters may not be specified for pipeline-style updates")
		}
		return env.CompileUpdatePipeline(x)
	}
	return nil, mongoerr.TypeMismatchf("BSON field '%s' is the wrong type '%s', expected type 'object' or 'array'", where, typeName(u))
}

// arrayFiltersArg validates an arrayFilters option: an array (of documents, which
// compileUpdater checks).
func arrayFiltersArg(where string, v any) (bson.A, error) {
	arr, ok := v.(bson.A)
	if !ok {
		return nil, mongoerr.TypeMismatchf("BSON field '%s.arrayFilters' is the wrong type '%s', expected type 'array'", where, typeName(v))
	}
	return arr, nil
}
