package aggregate

import (
	"fmt"
	"math"

	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// The operators that define variables: $let, $map, $filter and $reduce. A variable is in
// scope only in the sub-expression its operator evaluates with it (in, cond), never in the
// operator's other arguments.

// namedArgs splits an operator's object argument into its named parameters, failing with
// notObject (code, message) when the argument is not an object and with unknown (code,
// message prefix) for a name outside names.
func namedArgs(arg any, names []string, notObjCode int32, notObjMsg string, unknownCode int32, unknownMsg string) (map[string]any, error) {
	d, ok := arg.(bson.D)
	if !ok {
		return nil, mongoerr.New(notObjCode, "%s", notObjMsg)
	}
	out := make(map[string]any, len(d))
	for _, e := range d {
		known := false
		for _, n := range names {
			known = known || n == e.Key
		}
		if !known {
			return nil, mongoerr.New(unknownCode, "%s%s", unknownMsg, e.Key)
		}
		out[e.Key] = e.Value
	}
	return out, nil
}

// required returns the named argument name, or the error (code, msg) when it is absent.
func required(a map[string]any, name string, code int32, msg string) (any, error) {
	v, ok := a[name]
	if !ok {
		return nil, mongoerr.New(code, "%s", msg)
	}
	return v, nil
}

// withVar compiles body with a new variable name in scope and returns its slot.
func (pc *parseCtx) withVar(name string, body any) (int, expr, error) {
	mark := len(pc.scope)
	slot, err := pc.define(name)
	if err != nil {
		return 0, nil, err
	}
	ex, err := pc.parseOperand(body)
	pc.scope = pc.scope[:mark]
	return slot, ex, err
}

// parseLet is ExpressionLet: {vars: {name: expr, ...}, in: expr}. The vars are evaluated in
// the outer scope, so they cannot refer to each other.
func (pc *parseCtx) parseLet(arg any) (expr, error) {
	a, err := namedArgs(arg, []string{"vars", "in"}, 16874, "$let only supports an object as its argument", 16875, "Unrecognized parameter to $let: ")
	if err != nil {
		return nil, err
	}
	varsV, err := required(a, "vars", 16876, "Missing 'vars' parameter to $let")
	if err != nil {
		return nil, err
	}
	inV, err := required(a, "in", 16877, "Missing 'in' parameter to $let")
	if err != nil {
		return nil, err
	}
	vars, ok := varsV.(bson.D)
	if !ok {
		return nil, mongoerr.TypeMismatchf("invalid parameter: expected an object (vars)")
	}
	vals := make([]expr, len(vars))
	for i, v := range vars {
		if vals[i], err = pc.parseOperand(v.Value); err != nil {
			return nil, err
		}
	}
	mark := len(pc.scope)
	slots := make([]int, len(vars))
	for i, v := range vars {
		if slots[i], err = pc.define(v.Key); err != nil {
			return nil, err
		}
	}
	in, err := pc.parseOperand(inV)
	pc.scope = pc.scope[:mark]
	if err != nil {
		return nil, err
	}
	return exprFunc(func(c *evalCtx) (any, error) {
		for i, ve := range vals {
			v, err := ve.eval(c)
			if err != nil {
				return nil, err
			}
			c.vars[slots[i]] = v
		}
		return in.eval(c)
	}), nil
}

// asName reads the optional 'as' parameter (default "this").
func asName(a map[string]any, op string) (string, error) {
	v, ok := a["as"]
	if !ok {
		return "this", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", mongoerr.TypeMismatchf("%s 'as' must be a string", op)
	}
	return s, nil
}

// iterator is what $map and $filter share: an input array expression and a body evaluated
// with a variable ('as', default "this") bound to each element in turn.
type iterator struct {
	op    string
	input expr
	slot  int
	body  expr
	// notArray is the code of the error for an input that is not an array.
	notArray int32
}

// iteratorCodes are an iterator operator's parse error codes.
type iteratorCodes struct {
	notObject, unknown, noInput, noBody, notArray int32
}

// parseIterator parses {input, as, <body>, extra...} for op, returning the other named
// arguments (extra) unparsed.
func (pc *parseCtx) parseIterator(op, body string, extra []string, arg any, codes iteratorCodes) (*iterator, map[string]any, error) {
	names := append([]string{"input", "as", body}, extra...)
	a, err := namedArgs(arg, names, codes.notObject, op+" only supports an object as its argument", codes.unknown, "Unrecognized parameter to "+op+": ")
	if err != nil {
		return nil, nil, err
	}
	inputV, err := required(a, "input", codes.noInput, fmt.Sprintf("Missing 'input' parameter to %s", op))
	if err != nil {
		return nil, nil, err
	}
	bodyV, ok := a[body]
	if !ok {
		return nil, nil, mongoerr.New(codes.noBody, "Missing '%s' parameter to %s", body, op)
	}
	name, err := asName(a, op)
	if err != nil {
		return nil, nil, err
	}
	it := &iterator{op: op, notArray: codes.notArray}
	if it.input, err = pc.parseOperand(inputV); err != nil {
		return nil, nil, err
	}
	if it.slot, it.body, err = pc.withVar(name, bodyV); err != nil {
		return nil, nil, err
	}
	return it, a, nil
}

// inputArray evaluates the input: null for a null or missing input (ok false), an error for
// any other non-array.
func (it *iterator) inputArray(c *evalCtx) (arr bson.A, ok bool, err error) {
	v, err := it.input.eval(c)
	if err != nil || nullish(v) {
		return nil, false, err
	}
	arr, ok = v.(bson.A)
	if !ok {
		return nil, false, mongoerr.New(it.notArray, "input to %s must be an array not %s", it.op, typeName(v))
	}
	return arr, true, nil
}

// each evaluates the body for element x.
func (it *iterator) each(c *evalCtx, x any) (any, error) {
	c.vars[it.slot] = x
	return it.body.eval(c)
}

// parseMap is ExpressionMap: {input, as, in}; null or missing input gives null, and a missing
// result element becomes null.
func (pc *parseCtx) parseMap(arg any) (expr, error) {
	it, _, err := pc.parseIterator("$map", "in", nil, arg, iteratorCodes{16878, 16879, 16880, 16882, 16883})
	if err != nil {
		return nil, err
	}
	return exprFunc(func(c *evalCtx) (any, error) {
		arr, ok, err := it.inputArray(c)
		if err != nil || !ok {
			return nil, err
		}
		out := make(bson.A, len(arr))
		for i, x := range arr {
			r, err := it.each(c, x)
			if err != nil {
				return nil, err
			}
			out[i] = missingToNull(r)
		}
		return out, nil
	}), nil
}

// parseFilter is ExpressionFilter: {input, as, cond, limit}; null or missing input gives null.
func (pc *parseCtx) parseFilter(arg any) (expr, error) {
	it, a, err := pc.parseIterator("$filter", "cond", []string{"limit"}, arg, iteratorCodes{28646, 28647, 28648, 28650, 28651})
	if err != nil {
		return nil, err
	}
	var limit expr
	if lv, ok := a["limit"]; ok {
		if limit, err = pc.parseOperand(lv); err != nil {
			return nil, err
		}
	}
	return exprFunc(func(c *evalCtx) (any, error) {
		arr, ok, err := it.inputArray(c)
		if err != nil || !ok {
			return nil, err
		}
		max, err := filterLimit(c, limit)
		if err != nil {
			return nil, err
		}
		out := bson.A{}
		for _, x := range arr {
			if int64(len(out)) >= max {
				break
			}
			r, err := it.each(c, x)
			if err != nil {
				return nil, err
			}
			if truthy(r) {
				out = append(out, x)
			}
		}
		return out, nil
	}), nil
}

// filterLimit evaluates $filter's limit: no limit when absent or nullish, else a positive
// 32-bit integral number.
func filterLimit(c *evalCtx, limit expr) (int64, error) {
	if limit == nil {
		return math.MaxInt64, nil
	}
	lv, err := limit.eval(c)
	if err != nil || nullish(lv) {
		return math.MaxInt64, err
	}
	n, ok := integral32(lv)
	if !ok {
		return 0, mongoerr.New(327391, "$filter: limit must be represented as a 32-bit integral value: %s", renderValue(lv))
	}
	if n < 1 {
		return 0, mongoerr.New(327392, "$filter: limit must be greater than 0: %d", n)
	}
	return int64(n), nil
}

// parseReduce is ExpressionReduce: {input, initialValue, in} with $$value and $$this; null
// or missing input gives null.
func (pc *parseCtx) parseReduce(arg any) (expr, error) {
	a, err := namedArgs(arg, []string{"input", "initialValue", "in"}, 40075, "$reduce only supports an object as its argument", 40076, "$reduce found an unknown argument: ")
	if err != nil {
		return nil, err
	}
	inputV, err := required(a, "input", 40077, "$reduce requires 'input' to be specified")
	if err != nil {
		return nil, err
	}
	initV, err := required(a, "initialValue", 40078, "$reduce requires 'initialValue' to be specified")
	if err != nil {
		return nil, err
	}
	inV, err := required(a, "in", 40079, "$reduce requires 'in' to be specified")
	if err != nil {
		return nil, err
	}
	input, err := pc.parseOperand(inputV)
	if err != nil {
		return nil, err
	}
	initial, err := pc.parseOperand(initV)
	if err != nil {
		return nil, err
	}
	mark := len(pc.scope)
	valueSlot, err := pc.define("value")
	if err != nil {
		return nil, err
	}
	thisSlot, err := pc.define("this")
	if err != nil {
		return nil, err
	}
	in, err := pc.parseOperand(inV)
	pc.scope = pc.scope[:mark]
	if err != nil {
		return nil, err
	}
	return exprFunc(func(c *evalCtx) (any, error) {
		v, err := input.eval(c)
		if err != nil || nullish(v) {
			return nil, err
		}
		arr, ok := v.(bson.A)
		if !ok {
			return nil, mongoerr.New(40080, "$reduce requires an array as its first argument, found: %s", typeName(v))
		}
		acc, err := initial.eval(c)
		if err != nil {
			return nil, err
		}
		for _, x := range arr {
			c.vars[valueSlot], c.vars[thisSlot] = acc, x
			if acc, err = in.eval(c); err != nil {
				return nil, err
			}
		}
		return acc, nil
	}), nil
}

// integral32 returns v as an int32 when it is a number with an integral value in range.
func integral32(v any) (int32, bool) {
	f, ok := toFloatOK(v)
	if !ok || f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, false
	}
	return int32(f), true
}

// toFloatOK converts int32, int64 and double to float64.
func toFloatOK(v any) (float64, bool) {
	switch x := v.(type) {
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}
