package aggregate

import (
	"strings"

	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// MaxMemoryBytes is the memory a blocking stage ($group, $sort) may use without allowDiskUse:
// MongoDB's internalDocumentSourceGroupMaxMemoryBytes and
// internalQueryMaxBlockingSortMemoryUsageBytes, both 100 MB.
const MaxMemoryBytes = 100 * 1024 * 1024

// Pipeline is a compiled aggregation pipeline. Compiled stages are immutable, so one Pipeline
// may Run concurrently; SetAllowDiskUse must not race with Run.
type Pipeline struct {
	stages       []stage
	output       *Output  // a final $out or $merge
	documents    []bson.D // a leading $documents: the pipeline's input
	nslots       int      // user-variable slots the pipeline's expressions use
	leadingMatch bson.D
	allowDiskUse bool
	maxMemory    int64
}

// stage is one compiled stage; start returns a fresh processor for one Run feeding next.
type stage interface {
	start(rc *runContext, next processor) processor
}

// processor consumes documents pushed by the previous stage.
type processor interface {
	// push handles one document; false asks the caller to stop pushing (the stage needs no
	// more input, e.g. $limit is satisfied).
	push(doc bson.D) (bool, error)
	// finish signals the end of input; blocking stages emit their output here.
	finish() error
}

// runContext holds per-Run settings and the evaluation context every stage of the Run
// shares (stages run one document at a time, so one context serves all of them).
type runContext struct {
	allowDiskUse bool
	maxMemory    int64
	ectx         *evalCtx
}

// evalOn returns the Run's evaluation context with doc as $$ROOT.
func (rc *runContext) evalOn(doc bson.D) *evalCtx {
	rc.ectx.root = doc
	return rc.ectx
}

// memBudget tracks the memory one blocking stage holds.
type memBudget struct {
	used, limit int64
	enforce     bool
	stage       string
}

func (rc *runContext) budget(stage string) *memBudget {
	return &memBudget{limit: rc.maxMemory, enforce: !rc.allowDiskUse, stage: stage}
}

func (m *memBudget) add(n int64) error {
	m.used += n
	if !m.enforce || m.used <= m.limit {
		return nil
	}
	if m.stage == "$group" {
		return mongoerr.New(292, "Exceeded memory limit for $group, but didn't allow external sort. Pass allowDiskUse:true to opt in.")
	}
	return mongoerr.New(292, "Sort exceeded memory limit of %d bytes, but did not opt in to external sorting.", m.limit)
}

// Compile parses and validates an aggregation pipeline (without a leading $changeStream,
// which the caller handles) in a command without let variables, with $$NOW read now. Errors
// are *mongoerr.Error with MongoDB's codes; stages, operators and accumulators outside the
// embedded subset are NotImplemented (238).
func Compile(pipeline []bson.D) (*Pipeline, error) { return defaultEnv().Compile(pipeline) }

func compile(pc *parseCtx, pipeline []bson.D) (*Pipeline, error) {
	p := &Pipeline{maxMemory: MaxMemoryBytes}
	for i, spec := range pipeline {
		if len(spec) != 1 {
			return nil, mongoerr.New(40323, "A pipeline stage specification object must contain exactly one field.")
		}
		name, arg := spec[0].Key, spec[0].Value
		if name == "$documents" {
			if i != 0 {
				return nil, mongoerr.New(40602, "$documents is only valid as the first stage in a pipeline.")
			}
			docs, err := pc.parseDocuments(arg)
			if err != nil {
				return nil, err
			}
			p.documents = docs
			continue
		}
		if name == "$out" || name == "$merge" {
			out, err := parseOutput(name, arg, i == len(pipeline)-1)
			if err != nil {
				return nil, err
			}
			p.output = out
			continue
		}
		st, err := pc.parseStage(name, arg)
		if err != nil {
			return nil, err
		}
		if m, ok := st.(*matchStage); ok && i == 0 {
			p.leadingMatch = m.filter
		}
		p.stages = append(p.stages, st)
	}
	p.stages = fuseSortLimit(p.stages)
	p.nslots = pc.nslots
	return p, nil
}

func (pc *parseCtx) parseStage(name string, arg any) (stage, error) {
	switch name {
	case "$match":
		return pc.parseMatch(arg)
	case "$group":
		return pc.parseGroup(arg)
	case "$sort":
		return pc.parseSort(arg)
	case "$project":
		return pc.parseProject(arg)
	case "$addFields", "$set":
		return pc.parseAddFields(name, arg)
	case "$unset":
		return pc.parseUnset(arg)
	case "$limit":
		return pc.parseLimit(arg)
	case "$skip":
		return pc.parseSkip(arg)
	case "$count":
		return pc.parseCount(arg)
	case "$unwind":
		return pc.parseUnwind(arg)
	case "$replaceRoot", "$replaceWith":
		return pc.parseReplaceRoot(name, arg)
	case "$changeStream":
		return nil, mongoerr.New(40602, "$changeStream is only valid as the first stage in a pipeline.")
	}
	if knownStage(name) {
		return nil, mongoerr.NotImplementedf("aggregation stage %s", name)
	}
	return nil, mongoerr.New(40324, "Unrecognized pipeline stage name: '%s'", name)
}

// knownStage lists MongoDB 7.0's aggregation stages outside the subset.
func knownStage(name string) bool {
	switch name {
	case "$bucket", "$bucketAuto", "$changeStreamSplitLargeEvent", "$collStats", "$currentOp",
		"$densify", "$facet", "$fill", "$geoNear", "$graphLookup", "$indexStats",
		"$listLocalSessions", "$listSampledQueries", "$listSearchIndexes", "$listSessions",
		"$lookup", "$planCacheStats", "$redact", "$sample", "$search",
		"$searchMeta", "$setWindowFields",
		"$shardedDataDistribution", "$sortByCount", "$unionWith", "$vectorSearch":
		return true
	}
	return strings.HasPrefix(name, "$_internal")
}

// Documents returns the documents of a leading $documents stage (the input of a
// database-level aggregate), or nil when the pipeline has none.
func (p *Pipeline) Documents() []bson.D { return p.documents }

// parseDocuments evaluates $documents: an expression, evaluated once without an input
// document, that gives an array of documents.
func (pc *parseCtx) parseDocuments(arg any) ([]bson.D, error) {
	outer := pc.noFields
	pc.noFields = true
	ex, err := pc.parseOperand(arg)
	pc.noFields = outer
	if err != nil {
		return nil, err
	}
	v, err := ex.eval(pc.newEvalCtx(nil))
	if err != nil {
		return nil, err
	}
	arr, ok := v.(bson.A)
	if !ok {
		return nil, mongoerr.New(5858203, "error during $documents evaluation: expected an array of objects, got %s", typeName(v))
	}
	docs := make([]bson.D, len(arr))
	for i, x := range arr {
		d, ok := x.(bson.D)
		if !ok {
			return nil, mongoerr.New(5858203, "error during $documents evaluation: expected an array of objects, got an element of type %s", typeName(x))
		}
		docs[i] = d
	}
	return docs, nil
}

// LeadingMatch returns the filter of the pipeline's first stage when it is a $match (nil
// otherwise), so the caller can use an index to produce a superset of the matching documents.
// Run still applies the $match exactly.
func (p *Pipeline) LeadingMatch() bson.D { return p.leadingMatch }

// SetAllowDiskUse sets the aggregate command's allowDiskUse. When false, $group and $sort
// fail with QueryExceededMemoryLimitNoDiskUseAllowed (292) once they hold more than
// MaxMemoryBytes; when true they carry on in memory. Note that MongoDB 7.0 treats an absent
// allowDiskUse as true (allowDiskUseByDefault), so callers should pass true unless the command
// says allowDiskUse: false.
func (p *Pipeline) SetAllowDiskUse(allow bool) { p.allowDiskUse = allow }

// Run feeds the documents src yields through the pipeline and returns the output documents.
// src must stop when yield returns false. Input documents are not modified.
func (p *Pipeline) Run(src func(yield func(bson.D) bool)) ([]bson.D, error) {
	rc := &runContext{allowDiskUse: p.allowDiskUse, maxMemory: p.maxMemory, ectx: &evalCtx{vars: make([]any, p.nslots)}}
	out := &collector{}
	var head processor = out
	for i := len(p.stages) - 1; i >= 0; i-- {
		head = p.stages[i].start(rc, head)
	}
	var runErr error
	stopped := false
	src(func(d bson.D) bool {
		if stopped {
			return false
		}
		more, err := head.push(d)
		if err != nil {
			runErr = err
		}
		if err != nil || !more {
			stopped = true
			return false
		}
		return true
	})
	if runErr != nil {
		return nil, runErr
	}
	if err := head.finish(); err != nil {
		return nil, err
	}
	return out.docs, nil
}

// collector is the end of the chain.
type collector struct{ docs []bson.D }

func (c *collector) push(doc bson.D) (bool, error) {
	c.docs = append(c.docs, doc)
	return true, nil
}

func (c *collector) finish() error {
	if c.docs == nil {
		c.docs = []bson.D{}
	}
	return nil
}
