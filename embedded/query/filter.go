package query

import (
	"math"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// Filter is a compiled query filter. It is immutable and safe for concurrent use.
type Filter struct {
	root node
	// hasExpr is set when the filter holds $expr, whose evaluation can fail.
	hasExpr bool
}

// node is one compiled match expression over a whole document.
type node interface {
	match(d bson.D) bool
}

// Env is what a filter or an update may use from outside this package: the aggregation
// expression language (for $expr, which package aggregate provides) and the command's clock.
// A nil *Env is valid: $expr is then NotImplemented and the clock is read at compile time.
type Env struct {
	// Expr compiles the argument of $expr into a predicate over a whole document; nil leaves
	// $expr NotImplemented.
	Expr func(arg any) (Predicate, error)
	// Now is the date $currentDate sets; zero means the time the update is compiled.
	Now time.Time
	// ClusterTime is the timestamp $currentDate {$type: "timestamp"} sets; zero means one
	// derived from Now.
	ClusterTime bson.Timestamp
}

// Predicate is a compiled $expr: whether a document satisfies it, or the error evaluating
// it raised (which fails the whole operation, as in MongoDB).
type Predicate func(doc bson.D) (bool, error)

func (env *Env) now() time.Time {
	if env == nil || env.Now.IsZero() {
		return time.Now()
	}
	return env.Now
}

func (env *Env) clusterTime() bson.Timestamp {
	if env != nil && (env.ClusterTime.T != 0 || env.ClusterTime.I != 0) {
		return env.ClusterTime
	}
	return bson.Timestamp{T: uint32(env.now().Unix()), I: 1}
}

// CompileFilter compiles a query filter. A nil or empty filter matches every document.
// Operators outside the embedded subset fail with mongoerr code 238 NotImplemented; malformed
// filters fail with the code and message mongod reports.
func CompileFilter(filter bson.D) (*Filter, error) { return CompileFilterEnv(filter, nil) }

// CompileFilterEnv is CompileFilter with $expr compiled by env.
func CompileFilterEnv(filter bson.D, env *Env) (*Filter, error) {
	p := &parser{env: env, top: true}
	n, err := p.parseTop(filter)
	if err != nil {
		return nil, err
	}
	return &Filter{root: n, hasExpr: p.hasExpr}, nil
}

// Match reports whether doc satisfies the filter. It fails only when evaluating a $expr
// fails (for example a $divide by zero); such a failure fails the operation in MongoDB.
func (f *Filter) Match(doc bson.D) (bool, error) {
	if f == nil || f.root == nil {
		return true, nil
	}
	if !f.hasExpr {
		return f.root.match(doc), nil
	}
	return matchErr(f.root, doc)
}

// TopFields returns the top-level fields of a document that the filter reads: matching a
// document with only those fields (the first occurrence of each, whole) gives the same answer
// as matching the whole document, so a caller may decode just them. ok is false when the
// filter needs the whole document ($expr).
func (f *Filter) TopFields() (fields []string, ok bool) {
	if f == nil || f.root == nil {
		return nil, true
	}
	if f.hasExpr {
		return nil, false
	}
	ok = topFields(f.root, func(name string) {
		if !slices.Contains(fields, name) {
			fields = append(fields, name)
		}
	})
	return fields, ok
}

// topFields calls add with the first component of every path n reads; it reports false for a
// node that reads the whole document (or one it does not know).
func topFields(n node, add func(string)) bool {
	switch x := n.(type) {
	case *pathNode:
		if len(x.parts) == 0 {
			return false
		}
		add(x.parts[0])
		return true
	case andNode:
		for _, c := range x {
			if !topFields(c, add) {
				return false
			}
		}
		return true
	case orNode:
		for _, c := range x {
			if !topFields(c, add) {
				return false
			}
		}
		return true
	case notNode:
		return topFields(x.n, add)
	case constNode:
		return true
	}
	return false
}

// matchErr evaluates n like n.match, reporting $expr failures. $expr only occurs at the top
// level of a filter, possibly under $and, $or and $nor, so only those nodes are walked.
func matchErr(n node, d bson.D) (bool, error) {
	switch x := n.(type) {
	case exprNode:
		return x.p(d)
	case andNode:
		for _, c := range x {
			ok, err := matchErr(c, d)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case orNode:
		for _, c := range x {
			ok, err := matchErr(c, d)
			if err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	case notNode:
		ok, err := matchErr(x.n, d)
		return !ok && err == nil, err
	}
	return n.match(d), nil
}

// exprNode is {$expr: ...}. Its match (without error reporting) is never reached: Filter.Match
// walks it through matchErr.
type exprNode struct{ p Predicate }

func (e exprNode) match(d bson.D) bool {
	ok, err := e.p(d)
	return ok && err == nil
}

// parser carries what a filter's compilation needs beyond the filter itself.
type parser struct {
	env *Env
	// top is false inside $elemMatch and $pull conditions, where $expr is not allowed.
	top     bool
	hasExpr bool
	// exprErr, when set, is the answer to $expr (array filters refuse it this way).
	exprErr error
}

type andNode []node

func (a andNode) match(d bson.D) bool {
	for _, n := range a {
		if !n.match(d) {
			return false
		}
	}
	return true
}

type orNode []node

func (o orNode) match(d bson.D) bool {
	for _, n := range o {
		if n.match(d) {
			return true
		}
	}
	return false
}

type notNode struct{ n node }

func (n notNode) match(d bson.D) bool { return !n.n.match(d) }

type constNode bool

func (c constNode) match(bson.D) bool { return bool(c) }

// pathNode applies a predicate to the values reached by a path.
type pathNode struct {
	parts []string
	mode  walkMode
	p     pred
}

func (p *pathNode) match(d bson.D) bool { return walkDoc(d, p.parts, p.mode, p.p) }

// term is one parsed field operator: a predicate (with its array mode), possibly negated, or
// a negated conjunction ($not).
type term struct {
	p    pred
	mode walkMode
	neg  bool
	sub  []term
}

// isTopLevelOp reports the operators MongoDB accepts at the top level of a filter.
func isTopLevelOp(name string) bool {
	switch name {
	case "$and", "$or", "$nor", "$expr", "$where", "$text", "$comment", "$jsonSchema",
		"$alwaysTrue", "$alwaysFalse", "$sampleRate", "$atomic", "$isolated":
		return true
	}
	return false
}

func (p *parser) parseTop(filter bson.D) (node, error) {
	if len(filter) == 0 {
		return constNode(true), nil
	}
	nodes := make(andNode, 0, len(filter))
	for _, e := range filter {
		var n node
		var err error
		if strings.HasPrefix(e.Key, "$") {
			n, err = p.parseTopOp(e.Key, e.Value)
		} else {
			n, err = parseField(e.Key, e.Value)
		}
		if err != nil {
			return nil, err
		}
		if n != nil {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 1 {
		return nodes[0], nil
	}
	return nodes, nil
}

func (p *parser) parseTopOp(name string, v any) (node, error) {
	switch name {
	case "$and", "$or", "$nor":
		arr, ok := v.(bson.A)
		if !ok {
			return nil, mongoerr.BadValuef("%s must be an array", name)
		}
		if len(arr) == 0 {
			return nil, mongoerr.BadValuef("$and/$or/$nor must be a nonempty array")
		}
		subs := make([]node, 0, len(arr))
		for _, x := range arr {
			d, ok := x.(bson.D)
			if !ok {
				return nil, mongoerr.BadValuef("$or/$and/$nor entries need to be full objects")
			}
			n, err := p.parseTop(d)
			if err != nil {
				return nil, err
			}
			subs = append(subs, n)
		}
		switch name {
		case "$and":
			return andNode(subs), nil
		case "$or":
			return orNode(subs), nil
		}
		return notNode{orNode(subs)}, nil
	case "$comment":
		return nil, nil
	case "$expr":
		return p.parseExpr(v)
	case "$not":
		return nil, mongoerr.BadValuef("unknown top level operator: $not. If you are trying to negate an entire expression, use $nor.")
	}
	if isTopLevelOp(name) {
		return nil, mongoerr.NotImplementedf("query operator %s", name)
	}
	return nil, mongoerr.BadValuef("unknown top level operator: %s. If you have a field name that starts with a '$' symbol, consider using $getField or $setField.", name)
}

// isOperatorDoc reports whether a field's value is an operator document ({$gt: 1, ...}) rather
// than a value to compare for equality. DBRef-like documents ($ref/$id/$db) are values.
func (p *parser) parseExpr(v any) (node, error) {
	if p.exprErr != nil {
		return nil, p.exprErr
	}
	if !p.top {
		return nil, mongoerr.BadValuef("$expr can only be applied to the top-level document")
	}
	if p.env == nil || p.env.Expr == nil {
		return nil, mongoerr.NotImplementedf("query operator $expr")
	}
	pred, err := p.env.Expr(v)
	if err != nil {
		return nil, err
	}
	p.hasExpr = true
	return exprNode{pred}, nil
}

func isOperatorDoc(v any) (bson.D, bool) {
	d, ok := v.(bson.D)
	if !ok || len(d) == 0 || !strings.HasPrefix(d[0].Key, "$") {
		return nil, false
	}
	switch d[0].Key {
	case "$ref", "$id", "$db":
		return nil, false
	}
	return d, true
}

func parseField(path string, v any) (node, error) {
	parts := splitPath(path)
	ops, isOps := isOperatorDoc(v)
	if !isOps {
		t, err := equalityTerm(v)
		if err != nil {
			return nil, err
		}
		return termNode(parts, t), nil
	}
	terms, err := parseOps(path, ops)
	if err != nil {
		return nil, err
	}
	if len(terms) == 1 {
		return termNode(parts, terms[0]), nil
	}
	nodes := make(andNode, len(terms))
	for i, t := range terms {
		nodes[i] = termNode(parts, t)
	}
	return nodes, nil
}

func termNode(parts []string, t term) node {
	var n node
	if t.sub != nil {
		sub := make(andNode, len(t.sub))
		for i, s := range t.sub {
			sub[i] = termNode(parts, s)
		}
		n = sub
		if len(sub) == 1 {
			n = sub[0]
		}
	} else {
		n = &pathNode{parts: parts, mode: t.mode, p: t.p}
	}
	if t.neg {
		return notNode{n}
	}
	return n
}

// termPred turns a term into a predicate over a single value (no array traversal), as used
// by $elemMatch on values and by $pull conditions.
func termPred(t term) pred {
	var p pred
	if t.sub != nil {
		all := make(allPred, len(t.sub))
		for i, s := range t.sub {
			all[i] = termPred(s)
		}
		p = all
	} else {
		p = t.p
	}
	if t.neg {
		return notPred{p}
	}
	return p
}

type allPred []pred

func (a allPred) test(v any, missing bool) bool {
	for _, p := range a {
		if !p.test(v, missing) {
			return false
		}
	}
	return true
}

type notPred struct{ p pred }

func (n notPred) test(v any, missing bool) bool { return !n.p.test(v, missing) }

func equalityTerm(v any) (term, error) {
	switch x := v.(type) {
	case bson.Regex:
		p, err := compileRegexPred(x.Pattern, x.Options)
		if err != nil {
			return term{}, err
		}
		return term{p: p}, nil
	case bson.Undefined:
		return term{}, mongoerr.BadValuef("cannot compare to undefined")
	}
	return term{p: &cmpPred{op: opEQ, rhs: bsonval.Normalize(v)}}, nil
}

func parseOps(path string, ops bson.D) ([]term, error) {
	terms := make([]term, 0, len(ops))
	var regex, options any
	hasRegex, hasOptions := false, false
	for _, e := range ops {
		switch e.Key {
		case "$eq", "$ne", "$gt", "$gte", "$lt", "$lte":
			t, err := comparisonTerm(path, e.Key, e.Value)
			if err != nil {
				return nil, err
			}
			terms = append(terms, t)
		case "$in", "$nin":
			p, err := parseIn(e.Key, e.Value)
			if err != nil {
				return nil, err
			}
			terms = append(terms, term{p: p, neg: e.Key == "$nin"})
		case "$exists":
			terms = append(terms, term{p: existsPred{}, neg: !bsonval.Truthy(e.Value)})
		case "$not":
			t, err := parseNot(path, e.Value)
			if err != nil {
				return nil, err
			}
			terms = append(terms, t)
		case "$regex":
			regex, hasRegex = e.Value, true
		case "$options":
			options, hasOptions = e.Value, true
		case "$elemMatch":
			t, err := parseElemMatch(e.Value)
			if err != nil {
				return nil, err
			}
			terms = append(terms, t)
		case "$type":
			set, err := parseTypeSet(e.Value)
			if err != nil {
				return nil, err
			}
			terms = append(terms, term{p: typePred{set}})
		case "$size":
			t, err := parseSize(e.Value)
			if err != nil {
				return nil, err
			}
			terms = append(terms, t)
		case "$all":
			ts, err := parseAll(e.Value)
			if err != nil {
				return nil, err
			}
			terms = append(terms, ts...)
		case "$mod":
			t, err := parseMod(e.Value)
			if err != nil {
				return nil, err
			}
			terms = append(terms, t)
		case "$bitsAllSet", "$bitsAllClear", "$bitsAnySet",
			"$bitsAnyClear", "$geoWithin", "$geoIntersects", "$near", "$nearSphere", "$within",
			"$maxDistance", "$minDistance", "$expr", "$where", "$text", "$jsonSchema",
			"$_internalSchemaType", "$geometry", "$box", "$center", "$centerSphere", "$polygon":
			return nil, mongoerr.NotImplementedf("query operator %s", e.Key)
		default:
			return nil, mongoerr.BadValuef("unknown operator: %s", e.Key)
		}
	}
	if hasOptions && !hasRegex {
		return nil, mongoerr.BadValuef("$options needs a $regex")
	}
	if hasRegex {
		t, err := regexTerm(regex, options, hasOptions)
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
	}
	return terms, nil
}

func regexTerm(regex, options any, hasOptions bool) (term, error) {
	var pattern, opts string
	switch r := regex.(type) {
	case string:
		pattern = r
	case bson.Regex:
		pattern, opts = r.Pattern, r.Options
		if hasOptions && opts != "" {
			return term{}, mongoerr.BadValuef("options set in both $regex and $options")
		}
	default:
		return term{}, mongoerr.BadValuef("$regex has to be a string")
	}
	if hasOptions {
		s, ok := options.(string)
		if !ok {
			return term{}, mongoerr.BadValuef("$options has to be a string")
		}
		opts = s
	}
	p, err := compileRegexPred(pattern, opts)
	if err != nil {
		return term{}, err
	}
	return term{p: p}, nil
}

func comparisonTerm(path, op string, v any) (term, error) {
	switch x := v.(type) {
	case bson.Regex:
		switch op {
		case "$eq":
			return term{p: &cmpPred{op: opEQ, rhs: x}}, nil
		case "$ne":
			return term{}, mongoerr.BadValuef("Can't have regex as arg to $ne.")
		}
		return term{}, mongoerr.BadValuef("Can't have RegEx as arg to predicate over field '%s'.", path)
	case bson.Undefined:
		return term{}, mongoerr.BadValuef("cannot compare to undefined")
	}
	v = bsonval.Normalize(v)
	switch op {
	case "$eq":
		return term{p: &cmpPred{op: opEQ, rhs: v}}, nil
	case "$ne":
		return term{p: &cmpPred{op: opEQ, rhs: v}, neg: true}, nil
	case "$gt":
		return term{p: &cmpPred{op: opGT, rhs: v}}, nil
	case "$gte":
		return term{p: &cmpPred{op: opGTE, rhs: v}}, nil
	case "$lt":
		return term{p: &cmpPred{op: opLT, rhs: v}}, nil
	}
	return term{p: &cmpPred{op: opLTE, rhs: v}}, nil
}

func parseIn(op string, v any) (pred, error) {
	arr, ok := v.(bson.A)
	if !ok {
		return nil, mongoerr.BadValuef("%s needs an array", op)
	}
	p := &inPred{}
	for _, x := range arr {
		switch y := x.(type) {
		case bson.ObjectID:
			// An ObjectID equals only the same ObjectID (no other type compares equal to it),
			// so a set answers for them: a delete of 1,000 _ids tests each candidate once,
			// not against every one of them.
			if p.oids == nil {
				p.oids = map[bson.ObjectID]struct{}{}
			}
			p.oids[y] = struct{}{}
			continue
		case string:
			// Likewise a string equals only the same string (or a symbol of it, which stays
			// in eq): the watcher's {id: {$in: [5,000 ids]}} tests each candidate once.
			if p.strs == nil {
				p.strs = map[string]struct{}{}
			}
			p.strs[y] = struct{}{}
			continue
		case bson.Regex:
			rp, err := compileRegexPred(y.Pattern, y.Options)
			if err != nil {
				return nil, err
			}
			p.regexes = append(p.regexes, rp)
			continue
		case bson.Undefined:
			return nil, mongoerr.BadValuef("InMatchExpression equality cannot be undefined")
		case bson.D:
			if len(y) > 0 && strings.HasPrefix(y[0].Key, "$") {
				if _, isOp := isOperatorDoc(y); isOp {
					return nil, mongoerr.BadValuef("cannot nest $ under %s", op)
				}
			}
		}
		p.eq = append(p.eq, cmpPred{op: opEQ, rhs: bsonval.Normalize(x)})
	}
	return p, nil
}

func parseNot(path string, v any) (term, error) {
	switch x := v.(type) {
	case bson.Regex:
		p, err := compileRegexPred(x.Pattern, x.Options)
		if err != nil {
			return term{}, err
		}
		return term{p: p, neg: true}, nil
	case bson.D:
		if len(x) == 0 {
			return term{}, mongoerr.BadValuef("$not cannot be empty")
		}
		if !strings.HasPrefix(x[0].Key, "$") {
			return term{}, mongoerr.BadValuef("unknown operator: %s", x[0].Key)
		}
		sub, err := parseOps(path, x)
		if err != nil {
			return term{}, err
		}
		return term{sub: sub, neg: true}, nil
	}
	return term{}, mongoerr.BadValuef("$not needs a regex or a document")
}

func parseElemMatch(v any) (term, error) {
	d, ok := v.(bson.D)
	if !ok {
		return term{}, mongoerr.BadValuef("$elemMatch needs an Object")
	}
	if len(d) > 0 && strings.HasPrefix(d[0].Key, "$") && !isTopLevelOp(d[0].Key) {
		// Value form: every operator applies to one array element at a time.
		terms, err := parseOps("", d)
		if err != nil {
			return term{}, err
		}
		all := make(allPred, len(terms))
		for i, t := range terms {
			all[i] = termPred(t)
		}
		return term{p: elemMatchValue{all}, mode: modeWhole}, nil
	}
	n, err := (&parser{}).parseTop(d)
	if err != nil {
		return term{}, err
	}
	return term{p: elemMatchObject{n}, mode: modeWhole}, nil
}

type cmpOp uint8

const (
	opEQ cmpOp = iota
	opLT
	opLTE
	opGT
	opGTE
)

// cmpPred is a comparison against a constant with MongoDB's type bracketing.
type cmpPred struct {
	op  cmpOp
	rhs any
}

// canonical returns MongoDB's canonical type order with missing and undefined (0) kept
// apart from null (5) as the matcher does.
func canonical(v any, missing bool) int {
	if missing {
		return 0
	}
	switch v.(type) {
	case bson.Undefined:
		return 0
	case bson.MinKey:
		return -1
	}
	return bsonval.Class(v)
}

func (c *cmpPred) test(v any, missing bool) bool {
	ce, cr := canonical(v, missing), canonical(c.rhs, false)
	if ce != cr {
		if (ce == 0 && cr == bsonval.ClassNull) || (ce == bsonval.ClassNull && cr == 0) {
			return c.op == opEQ || c.op == opLTE || c.op == opGTE
		}
		switch c.rhs.(type) {
		case bson.MaxKey:
			return c.op == opLT || c.op == opLTE
		case bson.MinKey:
			return c.op == opGT || c.op == opGTE
		}
		return false
	}
	if ce == bsonval.ClassNumber {
		fe, _ := bsonval.ToFloat(v)
		fr, _ := bsonval.ToFloat(c.rhs)
		en, rn := math.IsNaN(fe), math.IsNaN(fr)
		if en || rn {
			both := en && rn
			switch c.op {
			case opLT, opGT:
				return false
			}
			return both
		}
	}
	r := bsonval.Compare(v, c.rhs)
	switch c.op {
	case opEQ:
		return r == 0
	case opLT:
		return r < 0
	case opLTE:
		return r <= 0
	case opGT:
		return r > 0
	}
	return r >= 0
}

type inPred struct {
	eq      []cmpPred
	oids    map[bson.ObjectID]struct{} // the ObjectIDs of the list (not in eq)
	strs    map[string]struct{}        // the strings of the list (not in eq)
	regexes []*regexPred
}

func (p *inPred) test(v any, missing bool) bool {
	if oid, ok := v.(bson.ObjectID); ok && !missing {
		// Only an ObjectID of the list can equal it, and no regex matches one.
		_, in := p.oids[oid]
		return in
	}
	if s, ok := v.(string); ok && !missing {
		// A string equals only a string of the list, byte for byte (no collation), or a
		// symbol (left in eq); a regex may still match it.
		if _, in := p.strs[s]; in {
			return true
		}
	}
	for i := range p.eq {
		if p.eq[i].test(v, missing) {
			return true
		}
	}
	for _, r := range p.regexes {
		if r.test(v, missing) {
			return true
		}
	}
	return false
}

type existsPred struct{}

func (existsPred) test(_ any, missing bool) bool { return !missing }

type elemMatchValue struct{ p pred }

func (e elemMatchValue) test(v any, _ bool) bool {
	arr, ok := v.(bson.A)
	if !ok {
		return false
	}
	for _, x := range arr {
		if e.p.test(x, false) {
			return true
		}
	}
	return false
}

type elemMatchObject struct{ n node }

func (e elemMatchObject) test(v any, _ bool) bool {
	arr, ok := v.(bson.A)
	if !ok {
		return false
	}
	for _, x := range arr {
		switch y := x.(type) {
		case bson.D:
			if e.n.match(y) {
				return true
			}
		case bson.A:
			if e.n.match(arrayAsDoc(y)) {
				return true
			}
		}
	}
	return false
}

// arrayAsDoc views an array as the document {"0": a[0], "1": a[1], ...}, as BSON stores it.
func arrayAsDoc(a bson.A) bson.D {
	d := make(bson.D, len(a))
	for i, x := range a {
		d[i] = bson.E{Key: itoa(i), Value: x}
	}
	return d
}
