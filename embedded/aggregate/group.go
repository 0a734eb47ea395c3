package aggregate

import (
	"strings"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// accumulator is the running state of one $group accumulator (or of a $sum/$avg/$min/$max
// expression over an array).
type accumulator interface {
	// process feeds one value (possibly missingValue) and returns the bytes of memory it added.
	process(v any) int64
	// value returns the result; missing results are reported as null by $group.
	value() (any, error)
}

// accState is the fixed memory charged per accumulator, as MongoDB charges sizeof(*this).
const accState = 48

func newAccumulator(op string) accumulator {
	switch op {
	case "$sum":
		return &sumAcc{}
	case "$count":
		return &countAcc{}
	case "$avg":
		return &avgAcc{}
	case "$min":
		return &minMaxAcc{sense: 1}
	case "$max":
		return &minMaxAcc{sense: -1}
	case "$first":
		return &firstAcc{}
	case "$last":
		return &lastAcc{}
	case "$push":
		return &pushAcc{list: bson.A{}}
	case "$addToSet":
		return &addToSetAcc{list: bson.A{}, seen: map[string]struct{}{}}
	}
	return nil
}

// sumAcc is AccumulatorSum: non-numbers are ignored; the result has the widest input type
// (int32 when only int32s were summed and the total fits), int totals that overflow int64
// become double.
type sumAcc struct {
	kind    numKind
	total   ddSum
	decimal bool
}

func (a *sumAcc) process(v any) int64 {
	k, ok := kindOf(v)
	if !ok {
		return 0
	}
	a.kind = widest(a.kind, k)
	switch x := v.(type) {
	case int32:
		a.total.addDouble(float64(x))
	case int64:
		a.total.addLong(x)
	case float64:
		a.total.addDouble(x)
	default:
		a.decimal = true
	}
	return 0
}

func (a *sumAcc) value() (any, error) {
	if a.decimal {
		return nil, decimalUnsupported("$sum")
	}
	switch a.kind {
	case kindInt:
		if a.total.fitsLong() {
			return intOrLong(a.total.long()), nil
		}
	case kindLong:
		if a.total.fitsLong() {
			return a.total.long(), nil
		}
	}
	return a.total.double(), nil
}

// countAcc is {$count: {}}: $sum of 1 for every document.
type countAcc struct{ n int64 }

func (a *countAcc) process(any) int64 { a.n++; return 0 }

func (a *countAcc) value() (any, error) { return intOrLong(a.n), nil }

// avgAcc is AccumulatorAvg: the mean of the numeric inputs as a double, null when none.
type avgAcc struct {
	total   ddSum
	count   int64
	decimal bool
}

func (a *avgAcc) process(v any) int64 {
	switch x := v.(type) {
	case int32:
		a.total.addDouble(float64(x))
	case int64:
		a.total.addLong(x)
	case float64:
		a.total.addDouble(x)
	case bson.Decimal128:
		a.decimal = true
	default:
		return 0
	}
	a.count++
	return 0
}

func (a *avgAcc) value() (any, error) {
	if a.decimal {
		return nil, decimalUnsupported("$avg")
	}
	if a.count == 0 {
		return nil, nil
	}
	return a.total.double() / float64(a.count), nil
}

// minMaxAcc is AccumulatorMinMax: nullish inputs are ignored, the first of equal values
// wins, and the result is null when nothing was kept.
type minMaxAcc struct {
	sense int
	val   any
	set   bool
}

func (a *minMaxAcc) process(v any) int64 {
	if nullish(v) {
		return 0
	}
	if !a.set || compareValues(a.val, v)*a.sense > 0 {
		var delta int64
		if a.set {
			delta = -approxSize(a.val)
		}
		a.val, a.set = v, true
		return delta + approxSize(v)
	}
	return 0
}

func (a *minMaxAcc) value() (any, error) {
	if !a.set {
		return nil, nil
	}
	return a.val, nil
}

// firstAcc keeps the first value seen, even a missing one (reported as null).
type firstAcc struct {
	val any
	set bool
}

func (a *firstAcc) process(v any) int64 {
	if a.set {
		return 0
	}
	a.val, a.set = v, true
	return approxSize(v)
}

func (a *firstAcc) value() (any, error) { return missingToNull(a.val), nil }

// lastAcc keeps the last value seen, even a missing one (reported as null).
type lastAcc struct{ val any }

func (a *lastAcc) process(v any) int64 {
	delta := approxSize(v)
	if a.val != nil {
		delta -= approxSize(a.val)
	}
	a.val = v
	return delta
}

func (a *lastAcc) value() (any, error) { return missingToNull(a.val), nil }

// pushAcc collects every non-missing value in input order.
type pushAcc struct{ list bson.A }

func (a *pushAcc) process(v any) int64 {
	if isMissing(v) {
		return 0
	}
	a.list = append(a.list, v)
	return approxSize(v) + 16
}

func (a *pushAcc) value() (any, error) { return a.list, nil }

// addToSetAcc collects distinct non-missing values (equal as MongoDB compares them) in order
// of first appearance; MongoDB leaves the order unspecified.
type addToSetAcc struct {
	list bson.A
	seen map[string]struct{}
}

func (a *addToSetAcc) process(v any) int64 {
	if isMissing(v) {
		return 0
	}
	k := bsonval.KeyOf(v)
	if _, dup := a.seen[string(k)]; dup {
		return 0
	}
	a.seen[string(k)] = struct{}{}
	a.list = append(a.list, v)
	return approxSize(v) + int64(len(k)) + 32
}

func (a *addToSetAcc) value() (any, error) { return a.list, nil }

// groupStage is a compiled $group.
type groupStage struct {
	// idFields is set when _id is a document of expressions ({_id: {a: "$a", b: "$b"}}).
	idFields []string
	idExprs  []expr
	outNames []string
	accOps   []string
	accArgs  []expr
}

func (pc *parseCtx) parseGroup(spec any) (*groupStage, error) {
	d, ok := spec.(bson.D)
	if !ok {
		return nil, mongoerr.New(15947, "a group's fields must be specified in an object")
	}
	g := &groupStage{}
	haveID := false
	for _, e := range d {
		if e.Key == "_id" {
			if haveID {
				return nil, mongoerr.New(15948, "a group's _id may only be specified once")
			}
			haveID = true
			if err := g.parseID(pc, e.Value); err != nil {
				return nil, err
			}
			continue
		}
		if err := g.parseAccumulator(pc, e.Key, e.Value); err != nil {
			return nil, err
		}
	}
	if !haveID {
		return nil, mongoerr.New(15955, "a group specification must include an _id")
	}
	return g, nil
}

// parseID is DocumentSourceGroup::parseIdExpression.
func (g *groupStage) parseID(pc *parseCtx, v any) error {
	d, ok := v.(bson.D)
	if !ok || len(d) == 0 || strings.HasPrefix(d[0].Key, "$") {
		if ok && len(d) == 0 {
			g.idExprs = []expr{constExpr{bson.D{}}}
			return nil
		}
		ex, err := pc.parseOperand(v)
		if err != nil {
			return err
		}
		g.idExprs = []expr{ex}
		return nil
	}
	g.idFields = []string{}
	for _, e := range d {
		switch e.Value.(type) {
		case bool, int, int32, int64, float64, bson.Decimal128:
			return mongoerr.New(17390, "$group does not support inclusion-style expressions")
		}
		ex, err := pc.parseOperand(e.Value)
		if err != nil {
			return err
		}
		g.idFields = append(g.idFields, e.Key)
		g.idExprs = append(g.idExprs, ex)
	}
	return nil
}

// parseAccumulator is AccumulationStatement::parseAccumulationStatement.
func (g *groupStage) parseAccumulator(pc *parseCtx, field string, v any) error {
	spec, ok := v.(bson.D)
	if !ok || len(spec) == 0 || !strings.HasPrefix(spec[0].Key, "$") {
		return mongoerr.New(40234, "The field '%s' must be an accumulator object", field)
	}
	if strings.Contains(field, ".") {
		return mongoerr.New(40235, "The field name '%s' cannot contain '.'", field)
	}
	if strings.HasPrefix(field, "$") {
		return mongoerr.New(40236, "The field name '%s' cannot be an operator name", field)
	}
	if len(spec) != 1 {
		return mongoerr.New(40238, "The field '%s' must specify one accumulator", field)
	}
	op, arg := spec[0].Key, spec[0].Value
	switch op {
	case "$sum", "$avg", "$min", "$max", "$first", "$last", "$push", "$addToSet":
	case "$count":
		if d, ok := arg.(bson.D); !ok || len(d) != 0 {
			return mongoerr.TypeMismatchf("$count takes no arguments, i.e. $count:{}")
		}
		g.outNames = append(g.outNames, field)
		g.accOps = append(g.accOps, op)
		g.accArgs = append(g.accArgs, constExpr{int32(1)})
		return nil
	case "$accumulator", "$bottom", "$bottomN", "$firstN", "$lastN", "$maxN", "$median",
		"$mergeObjects", "$minN", "$percentile", "$stdDevPop", "$stdDevSamp", "$top", "$topN":
		return mongoerr.NotImplementedf("$group accumulator %s", op)
	default:
		return mongoerr.New(15952, "unknown group operator '%s'", op)
	}
	switch arg.(type) {
	case bson.A, []any:
		return mongoerr.New(40237, "The %s accumulator is a unary operator", op)
	}
	ex, err := pc.parseOperand(arg)
	if err != nil {
		return err
	}
	g.outNames = append(g.outNames, field)
	g.accOps = append(g.accOps, op)
	g.accArgs = append(g.accArgs, ex)
	return nil
}

// groupState is one group: its _id value (or per-field values) and accumulators.
type groupState struct {
	id   any
	accs []accumulator
}

type groupRunner struct {
	rc    *runContext
	g     *groupStage
	next  processor
	mem   *memBudget
	index map[string]int
	list  []*groupState
	key   []byte
}

func (g *groupStage) start(rc *runContext, next processor) processor {
	return &groupRunner{rc: rc, g: g, next: next, mem: rc.budget("$group"), index: map[string]int{}}
}

// computeID is DocumentSourceGroup::computeId: a single expression's missing result groups
// as null; the fields of a multi-field _id document keep missing values (omitted on output).
func (r *groupRunner) computeID(doc bson.D) (any, error) {
	g := r.g
	if len(g.idExprs) == 1 {
		v, err := g.idExprs[0].eval(r.rc.evalOn(doc))
		if err != nil {
			return nil, err
		}
		v = missingToNull(v)
		r.key = bsonval.AppendKey(r.key[:0], v)
		return v, nil
	}
	r.key = r.key[:0]
	ids := make([]any, len(g.idExprs))
	for i, e := range g.idExprs {
		v, err := e.eval(r.rc.evalOn(doc))
		if err != nil {
			return nil, err
		}
		ids[i] = v
		if isMissing(v) {
			r.key = append(r.key, 0)
			continue
		}
		r.key = append(r.key, 1)
		r.key = bsonval.AppendKey(r.key, v)
	}
	return ids, nil
}

func (r *groupRunner) push(doc bson.D) (bool, error) {
	id, err := r.computeID(doc)
	if err != nil {
		return false, err
	}
	var gs *groupState
	if i, ok := r.index[string(r.key)]; ok {
		gs = r.list[i]
	} else {
		gs = &groupState{id: id, accs: make([]accumulator, len(r.g.accOps))}
		for i, op := range r.g.accOps {
			gs.accs[i] = newAccumulator(op)
		}
		r.index[string(r.key)] = len(r.list)
		r.list = append(r.list, gs)
		if err := r.mem.add(2*int64(len(r.key)) + approxSize(id) + int64(len(gs.accs))*accState + 64); err != nil {
			return false, err
		}
	}
	var grown int64
	for i, a := range r.g.accArgs {
		v, err := a.eval(r.rc.evalOn(doc))
		if err != nil {
			return false, err
		}
		grown += gs.accs[i].process(v)
	}
	if grown != 0 {
		if err := r.mem.add(grown); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (r *groupRunner) finish() error {
	g := r.g
	for _, gs := range r.list {
		out := make(bson.D, 0, 1+len(gs.accs))
		out = append(out, bson.E{Key: "_id", Value: g.expandID(gs.id)})
		for i, a := range gs.accs {
			v, err := a.value()
			if err != nil {
				return err
			}
			out = append(out, bson.E{Key: g.outNames[i], Value: v})
		}
		more, err := r.next.push(out)
		if err != nil {
			return err
		}
		if !more {
			break
		}
	}
	r.list, r.index = nil, nil
	return r.next.finish()
}

// expandID is DocumentSourceGroup::expandId.
func (g *groupStage) expandID(id any) any {
	if g.idFields == nil {
		return id
	}
	if len(g.idFields) == 1 {
		return bson.D{{Key: g.idFields[0], Value: id}}
	}
	vals := id.([]any)
	out := make(bson.D, 0, len(vals))
	for i, v := range vals {
		if !isMissing(v) {
			out = append(out, bson.E{Key: g.idFields[i], Value: v})
		}
	}
	return out
}
