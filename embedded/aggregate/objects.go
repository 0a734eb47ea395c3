package aggregate

import (
	"math/rand/v2"
	"strings"

	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Operators on documents and arrays, on types, and $switch and $rand.

// fieldNameArg compiles the 'field' parameter of $getField, $setField and $unsetField: MongoDB
// 7.0 requires an expression that evaluates to a constant string (a literal, or $literal for
// names that start with '$').
func (pc *parseCtx) fieldNameArg(op string, v any, nonConstCode, notStringCode int32) (string, error) {
	ex, err := pc.parseOperand(v)
	if err != nil {
		return "", err
	}
	cst, ok := ex.(constExpr)
	if !ok {
		return "", mongoerr.New(nonConstCode, "%s requires 'field' to evaluate to a constant, but got a non-constant argument", op)
	}
	s, ok := cst.v.(string)
	if !ok {
		return "", mongoerr.New(notStringCode, "%s requires 'field' to evaluate to type String, but got %s", op, typeName(cst.v))
	}
	return s, nil
}

// parseGetField is ExpressionGetField: {field, input} (input defaults to $$CURRENT) or a
// field name string alone. It reads a field by its exact name, dots and dollars included.
func (pc *parseCtx) parseGetField(arg any) (expr, error) {
	var fieldV, inputV any = arg, "$$CURRENT"
	if d, ok := arg.(bson.D); ok && (len(d) == 0 || !strings.HasPrefix(d[0].Key, "$")) {
		a, err := namedArgs(d, []string{"field", "input"}, 0, "", 3041701, "$getField found an unknown argument: ")
		if err != nil {
			return nil, err
		}
		f, ok := a["field"]
		if !ok {
			return nil, mongoerr.New(3041702, "$getField requires 'field' to be specified")
		}
		fieldV = f
		if in, ok := a["input"]; ok {
			inputV = in
		}
	}
	field, err := pc.fieldNameArg("$getField", fieldV, 5654601, 5654602)
	if err != nil {
		return nil, err
	}
	input, err := pc.parseOperand(inputV)
	if err != nil {
		return nil, err
	}
	return exprFunc(func(c *evalCtx) (any, error) {
		v, err := input.eval(c)
		if err != nil {
			return nil, err
		}
		if nullish(v) {
			if isMissing(v) {
				return missingValue{}, nil
			}
			return nil, nil
		}
		d, ok := v.(bson.D)
		if !ok {
			return nil, mongoerr.New(3041705, "$getField requires 'input' to evaluate to type Object, but got %s", typeName(v))
		}
		if fv, ok := getField(d, field); ok {
			return fv, nil
		}
		return missingValue{}, nil
	}), nil
}

// parseSetField is ExpressionSetField: {field, input, value}; a value of $$REMOVE removes the
// field. An unset (remove) keeps the other fields in order; a set replaces the value in place
// or appends the field.
func (pc *parseCtx) parseSetField(op string, arg any) (expr, error) {
	names := []string{"field", "input", "value"}
	if op == "$unsetField" {
		names = names[:2]
	}
	a, err := namedArgs(arg, names, 4161100, op+" only supports an object as its argument", 4161101, op+" found an unknown argument: ")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, ok := a[n]; !ok {
			return nil, mongoerr.New(4161102, "%s requires '%s' to be specified", op, n)
		}
	}
	field, err := pc.fieldNameArg(op, a["field"], 4161106, 4161107)
	if err != nil {
		return nil, err
	}
	input, err := pc.parseOperand(a["input"])
	if err != nil {
		return nil, err
	}
	var value expr = constExpr{missingValue{}}
	if op == "$setField" {
		if value, err = pc.parseOperand(a["value"]); err != nil {
			return nil, err
		}
	}
	return exprFunc(func(c *evalCtx) (any, error) {
		in, err := input.eval(c)
		if err != nil {
			return nil, err
		}
		if nullish(in) {
			return nil, nil
		}
		d, ok := in.(bson.D)
		if !ok {
			return nil, mongoerr.New(4161105, "%s requires 'input' to evaluate to type Object", op)
		}
		v, err := value.eval(c)
		if err != nil {
			return nil, err
		}
		out := make(bson.D, 0, len(d)+1)
		found := false
		for _, e := range d {
			if e.Key != field {
				out = append(out, e)
				continue
			}
			found = true
			if !isMissing(v) {
				out = append(out, bson.E{Key: field, Value: v})
			}
		}
		if !found && !isMissing(v) {
			out = append(out, bson.E{Key: field, Value: v})
		}
		return out, nil
	}), nil
}

// evalMergeObjects is ExpressionMergeObjects: later documents' fields override earlier ones
// (keeping the first position); null and missing operands are skipped.
func evalMergeObjects(vals []any) (any, error) {
	out := bson.D{}
	for _, v := range vals {
		if nullish(v) {
			continue
		}
		d, ok := v.(bson.D)
		if !ok {
			return nil, mongoerr.New(40400, "$mergeObjects requires object inputs, but input %s is of type %s", renderValue(v), typeName(v))
		}
		for _, e := range d {
			out = setOwnedField(out, e.Key, e.Value)
		}
	}
	return out, nil
}

// evalConcatArrays is ExpressionConcatArrays: any null or missing operand gives null.
func evalConcatArrays(vals []any) (any, error) {
	out := bson.A{}
	for _, v := range vals {
		if nullish(v) {
			return nil, nil
		}
		arr, ok := v.(bson.A)
		if !ok {
			return nil, mongoerr.New(28664, "$concatArrays only supports arrays, not %s", typeName(v))
		}
		out = append(out, arr...)
	}
	return out, nil
}

// evalArrayElemAt is ExpressionArrayElemAt: negative positions count from the end; a position
// out of range gives missing.
func evalArrayElemAt(a, i any) (any, error) {
	if nullish(a) || nullish(i) {
		return nil, nil
	}
	arr, ok := a.(bson.A)
	if !ok {
		return nil, mongoerr.New(28689, "$arrayElemAt's first argument must be an array, but is %s", typeName(a))
	}
	if _, ok := toFloatOK(i); !ok {
		return nil, mongoerr.New(28690, "$arrayElemAt's second argument must be a numeric value, but is %s", typeName(i))
	}
	n, ok := integral32(i)
	if !ok {
		return nil, mongoerr.New(28691, "$arrayElemAt's second argument must be representable as a 32-bit integer: %s", renderValue(i))
	}
	idx := int(n)
	if idx < 0 {
		idx += len(arr)
	}
	if idx < 0 || idx >= len(arr) {
		return missingValue{}, nil
	}
	return arr[idx], nil
}

func evalIsArray(v any) (any, error) {
	_, ok := v.(bson.A)
	return ok, nil
}

// evalType is ExpressionType: the type alias of the value, "missing" for a missing one.
func evalType(v any) (any, error) { return typeName(v), nil }

// parseRand is ExpressionRandom: {$rand: {}}, a double in [0, 1).
func parseRand(arg any) (expr, error) {
	if d, ok := arg.(bson.D); !ok || len(d) != 0 {
		return nil, mongoerr.New(3040500, "$rand not allowed with arguments")
	}
	return exprFunc(func(*evalCtx) (any, error) { return rand.Float64(), nil }), nil
}

// parseSwitch is ExpressionSwitch: the then of the first branch whose case is true, else
// default; no match and no default is an error at evaluation.
func (pc *parseCtx) parseSwitch(arg any) (expr, error) {
	d, ok := arg.(bson.D)
	if !ok {
		return nil, mongoerr.New(40060, "$switch requires an object as an argument, found: %s", typeName(normalizeLiteral(arg)))
	}
	type branch struct{ cas, then expr }
	var branches []branch
	var def expr
	for _, e := range d {
		switch e.Key {
		case "branches":
			arr, ok := e.Value.(bson.A)
			if !ok {
				return nil, mongoerr.New(40061, "$switch expected an array for 'branches', found: %s", typeName(normalizeLiteral(e.Value)))
			}
			for _, b := range arr {
				bd, ok := b.(bson.D)
				if !ok {
					return nil, mongoerr.New(40062, "$switch expected each branch to be an object, found: %s", typeName(normalizeLiteral(b)))
				}
				var br branch
				for _, f := range bd {
					ex, err := pc.parseOperand(f.Value)
					if err != nil {
						return nil, err
					}
					switch f.Key {
					case "case":
						br.cas = ex
					case "then":
						br.then = ex
					default:
						return nil, mongoerr.New(40063, "$switch found an unknown argument to a branch: %s", f.Key)
					}
				}
				if br.cas == nil {
					return nil, mongoerr.New(40064, "$switch requires each branch have a 'case' expression")
				}
				if br.then == nil {
					return nil, mongoerr.New(40065, "$switch requires each branch have a 'then' expression.")
				}
				branches = append(branches, br)
			}
		case "default":
			ex, err := pc.parseOperand(e.Value)
			if err != nil {
				return nil, err
			}
			def = ex
		default:
			return nil, mongoerr.New(40067, "$switch found an unknown argument: %s", e.Key)
		}
	}
	if len(branches) == 0 {
		return nil, mongoerr.New(40068, "$switch requires at least one branch.")
	}
	return exprFunc(func(c *evalCtx) (any, error) {
		for _, b := range branches {
			v, err := b.cas.eval(c)
			if err != nil {
				return nil, err
			}
			if truthy(v) {
				return b.then.eval(c)
			}
		}
		if def == nil {
			return nil, mongoerr.New(40066, "$switch could not find a matching branch for an input, and no default was specified.")
		}
		return def.eval(c)
	}), nil
}
