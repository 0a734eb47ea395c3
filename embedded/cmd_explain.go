package embedded

import (
	"context"
	"os"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

// explainable are the commands explain describes; any other answers 238.
var explainable = []string{"find", "aggregate"}

// cmdExplain answers explain for find and aggregate at verbosity queryPlanner: the plan the
// server runs, naming the index it scans (IXSCAN with indexName) or COLLSCAN. The verbosities
// that execute the query (executionStats, allPlansExecution, the default) answer 238.
func cmdExplain(_ context.Context, s *Server, r *request) (result, error) {
	inner, ok := r.body[0].Value.(bson.D)
	if !ok || len(inner) == 0 {
		return result{}, mongoerr.TypeMismatchf("BSON field 'explain.explain' is the wrong type '%s', expected type 'object'", typeName(r.body[0].Value))
	}
	verbosity := "allPlansExecution"
	if v, ok := r.arg("verbosity"); ok {
		if verbosity, ok = v.(string); !ok {
			return result{}, mongoerr.TypeMismatchf("BSON field 'explain.verbosity' is the wrong type '%s', expected type 'string'", typeName(v))
		}
	}
	switch verbosity {
	case "queryPlanner":
	case "executionStats", "allPlansExecution":
		return result{}, mongoerr.NotImplementedf("explain verbosity '%s' (only 'queryPlanner' is served)", verbosity)
	default:
		return result{}, mongoerr.BadValuef("Enumeration value '%s' for field 'explain.verbosity' is not a valid value.", verbosity)
	}
	name := inner[0].Key
	spec, ok := s.commands()[name]
	if !ok || !slices.Contains(explainable, name) {
		return result{}, mongoerr.NotImplementedf("explain of command '%s'", name)
	}
	body := make(bson.D, 0, len(inner)+1)
	for _, e := range inner {
		if e.Key != "$db" {
			body = append(body, e)
		}
	}
	ir, err := s.parseRequest(r.conn, name, append(body, bson.E{Key: "$db", Value: r.db}), spec)
	if err != nil {
		return result{}, err
	}
	var f bson.D
	if name == "find" {
		f, err = s.explainFind(ir)
	} else {
		f, err = s.explainAggregate(ir)
	}
	if err != nil {
		return result{}, err
	}
	host, _ := os.Hostname()
	f = append(bson.D{{Key: "explainVersion", Value: "1"}}, f...)
	return result{fields: append(f,
		bson.E{Key: "command", Value: inner},
		bson.E{Key: "serverInfo", Value: bson.D{{Key: "host", Value: host}, {Key: "version", Value: serverVersion}, {Key: "gitVersion", Value: "rollup-embedded"}}},
	)}, nil
}

func (s *Server) explainFind(r *request) (bson.D, error) {
	coll, err := collArg(r)
	if err != nil {
		return nil, err
	}
	a, err := s.parseFind(r)
	if err != nil {
		return nil, err
	}
	sortDoc, _ := r.arg("sort")
	q := s.queryPlan(r.db, coll, a.q, asDoc(sortDoc), a.hint)
	if a.skip > 0 {
		q.stage = bson.D{{Key: "stage", Value: "SKIP"}, {Key: "skipAmount", Value: a.skip}, {Key: "inputStage", Value: q.stage}}
	}
	if a.limit > 0 {
		q.stage = bson.D{{Key: "stage", Value: "LIMIT"}, {Key: "limitAmount", Value: a.limit}, {Key: "inputStage", Value: q.stage}}
	}
	return bson.D{{Key: "queryPlanner", Value: q.doc()}}, nil
}

func (s *Server) explainAggregate(r *request) (bson.D, error) {
	coll, err := collArg(r)
	if err != nil {
		return nil, err
	}
	pv, _ := r.arg("pipeline")
	arr, ok := pv.(bson.A)
	if !ok {
		return nil, mongoerr.TypeMismatchf("BSON field 'aggregate.pipeline' is the wrong type '%s', expected type 'array'", typeName(pv))
	}
	stages := make([]bson.D, len(arr))
	for i, v := range arr {
		if stages[i], ok = v.(bson.D); !ok || len(stages[i]) == 0 {
			return nil, mongoerr.TypeMismatchf("Each element of the 'pipeline' array must be an object")
		}
	}
	if len(stages) > 0 && stages[0][0].Key == "$changeStream" {
		return nil, mongoerr.NotImplementedf("explain of a $changeStream")
	}
	env, err := s.exprEnv(r)
	if err != nil {
		return nil, err
	}
	p, err := env.Compile(stages)
	if err != nil {
		return nil, err
	}
	hintV, _ := r.arg("hint")
	hint, _, err := s.resolveHint(r.db, coll, hintV)
	if err != nil {
		return nil, err
	}
	q := s.queryPlan(r.db, coll, p.LeadingMatch(), nil, hint)
	rest := stages
	if p.LeadingMatch() != nil {
		rest = stages[1:] // the leading $match is the query's filter
	}
	if len(rest) == 0 {
		return bson.D{{Key: "queryPlanner", Value: q.doc()}}, nil
	}
	out := bson.A{bson.D{{Key: "$cursor", Value: bson.D{{Key: "queryPlanner", Value: q.doc()}}}}}
	for _, st := range rest {
		out = append(out, st)
	}
	return bson.D{{Key: "stages", Value: out}}, nil
}

// queryPlan is the queryPlanner section of an explain: the namespace, the filter and the
// winning plan (the only one: the server considers no other).
type queryPlan struct {
	ns     string
	filter bson.D
	stage  bson.D
}

func (q queryPlan) doc() bson.D {
	filter := q.filter
	if filter == nil {
		filter = bson.D{}
	}
	return bson.D{
		{Key: "namespace", Value: q.ns},
		{Key: "indexFilterSet", Value: false},
		{Key: "parsedQuery", Value: filter},
		{Key: "winningPlan", Value: q.stage},
		{Key: "rejectedPlans", Value: bson.A{}},
	}
}

// queryPlan describes how the server reads filter over db.coll, sorted by sortDoc: the index
// it scans (the hinted one, else the one storage's planner picks: IXSCAN under FETCH) or a
// collection scan (COLLSCAN), and a SORT stage unless the index yields the order.
func (s *Server) queryPlan(db, coll string, filter, sortDoc bson.D, hint *storage.IndexSpec) queryPlan {
	sortPath := ""
	if len(sortDoc) == 1 {
		sortPath = sortDoc[0].Key
	}
	var info storage.PlanInfo
	s.engine.Read(func(rd *storage.Reader) { info = rd.Plan(db, coll, filter, sortPath) })
	ix := info.Index
	if hint != nil {
		ix = hint
	}
	var stage bson.D
	switch {
	case !info.Exists:
		stage = bson.D{{Key: "stage", Value: "EOF"}}
	case ix != nil:
		direction := "forward"
		if info.InOrder && hint == nil && len(sortDoc) == 1 {
			if d, ok := bsonval.ToFloat(sortDoc[0].Value); ok && d < 0 {
				direction = "backward"
			}
		}
		stage = bson.D{{Key: "stage", Value: "IXSCAN"}, {Key: "keyPattern", Value: ix.Key}, {Key: "indexName", Value: ix.Name},
			{Key: "isUnique", Value: ix.Unique}, {Key: "direction", Value: direction}}
		fetch := bson.D{{Key: "stage", Value: "FETCH"}}
		if len(filter) > 0 {
			fetch = append(fetch, bson.E{Key: "filter", Value: filter})
		}
		stage = append(fetch, bson.E{Key: "inputStage", Value: stage})
	default:
		stage = bson.D{{Key: "stage", Value: "COLLSCAN"}}
		if len(filter) > 0 {
			stage = append(stage, bson.E{Key: "filter", Value: filter})
		}
		stage = append(stage, bson.E{Key: "direction", Value: "forward"})
	}
	sorted := info.InOrder && hint == nil
	if len(sortDoc) > 0 && !sorted && info.Exists {
		stage = bson.D{{Key: "stage", Value: "SORT"}, {Key: "sortPattern", Value: sortDoc}, {Key: "inputStage", Value: stage}}
	}
	return queryPlan{ns: db + "." + coll, filter: filter, stage: stage}
}
