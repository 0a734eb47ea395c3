package aggregate

import (
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/query"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// UpdatePipeline is a compiled pipeline-style update (an update given as an array of
// stages): each matched document is run through the stages and replaced by the result,
// keeping its _id. It is immutable and safe for concurrent use.
type UpdatePipeline struct {
	stages []docStage
	nslots int
}

// CompileUpdatePipeline compiles a pipeline-style update. MongoDB allows only $addFields/$set,
// $project, $unset, $replaceRoot/$replaceWith and $fill in it ($fill is NotImplemented here);
// any other stage fails with InvalidOptions, as in mongod.
func (e *Env) CompileUpdatePipeline(stages bson.A) (*UpdatePipeline, error) {
	pc := &parseCtx{env: e}
	u := &UpdatePipeline{}
	for _, sv := range stages {
		spec, ok := sv.(bson.D)
		if !ok {
			return nil, mongoerr.FailedToParsef("Each element of the 'pipeline' array must be an object")
		}
		if len(spec) != 1 {
			return nil, mongoerr.New(40323, "A pipeline stage specification object must contain exactly one field.")
		}
		name, arg := spec[0].Key, spec[0].Value
		switch name {
		case "$addFields", "$set", "$project", "$unset", "$replaceRoot", "$replaceWith":
		case "$fill":
			return nil, mongoerr.NotImplementedf("aggregation stage %s", name)
		default:
			return nil, mongoerr.New(mongoerr.InvalidOptions, "%s is not allowed to be used within an update", name)
		}
		st, err := pc.parseStage(name, arg)
		if err != nil {
			return nil, err
		}
		u.stages = append(u.stages, st.(docStage))
	}
	u.nslots = pc.nslots
	return u, nil
}

// IsReplacement reports false: a pipeline update is not a replacement-style update (it may be
// multi, and an upsert starts from the filter's equalities).
func (u *UpdatePipeline) IsReplacement() bool { return false }

// Apply runs the pipeline over doc and returns the new document, with doc's _id first (an
// output without _id keeps doc's; a different one fails with ImmutableField). desc is the
// difference as a change-stream update event reports it (query.DiffDocs), or Replacement when
// mongod would log the change as a full replacement; changed is false when the result is
// exactly doc. isInsert is the upsert insert path (doc is the filter's seed). doc is never
// modified.
func (u *UpdatePipeline) Apply(doc bson.D, isInsert bool) (out bson.D, desc query.UpdateDescription, changed bool, err error) {
	ec := &evalCtx{root: doc, vars: make([]any, u.nslots)}
	cur := doc
	for _, st := range u.stages {
		ec.root = cur
		if cur, err = st.apply(ec); err != nil {
			return nil, desc, false, err
		}
	}
	if out, err = query.Replace(doc, cur); err != nil {
		return nil, desc, false, err
	}
	if isInsert {
		return out, desc, true, nil
	}
	if query.StrictEqual(doc, out) {
		return doc, desc, false, nil
	}
	desc, ok := query.DiffDocs(doc, out)
	desc.Replacement = !ok
	return out, desc, true, nil
}
