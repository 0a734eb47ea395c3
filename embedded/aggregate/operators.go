package aggregate

import (
	"math"
	"strings"

	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// parseArgs is ExpressionNary::parseArguments: an array is the argument list, anything else
// is a single argument.
func (pc *parseCtx) parseArgs(v any) ([]expr, error) {
	var raw bson.A
	switch x := v.(type) {
	case bson.A:
		raw = x
	case []any:
		raw = bson.A(x)
	default:
		raw = bson.A{v}
	}
	out := make([]expr, len(raw))
	for i, r := range raw {
		e, err := pc.parseOperand(r)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

func (pc *parseCtx) parseFixed(name string, v any, n int) ([]expr, error) {
	args, err := pc.parseArgs(v)
	if err != nil {
		return nil, err
	}
	if len(args) != n {
		return nil, mongoerr.New(16020, "Expression %s takes exactly %d arguments. %d were passed in.", name, n, len(args))
	}
	return args, nil
}

// parseOperator parses {name: arg} where name starts with '$'.
func (pc *parseCtx) parseOperator(name string, arg any) (expr, error) {
	switch name {
	case "$literal":
		return constExpr{normalizeLiteral(arg)}, nil
	case "$add":
		return pc.parseVariadic(arg, evalAdd)
	case "$multiply":
		return pc.parseVariadic(arg, evalMultiply)
	case "$concat":
		return pc.parseVariadic(arg, evalConcat)
	case "$subtract":
		return pc.parseBinary(name, arg, evalSubtract)
	case "$divide":
		return pc.parseBinary(name, arg, evalDivide)
	case "$mod":
		return pc.parseBinary(name, arg, evalMod)
	case "$cmp", "$eq", "$ne", "$gt", "$gte", "$lt", "$lte":
		return pc.parseBinary(name, arg, compareOp(name))
	case "$in":
		return pc.parseBinary(name, arg, evalIn)
	case "$size":
		return pc.parseUnary(name, arg, evalSize)
	case "$not":
		return pc.parseUnary(name, arg, func(v any) (any, error) { return !truthy(v), nil })
	case "$and", "$or":
		return pc.parseLogical(name, arg)
	case "$cond":
		return pc.parseCond(arg)
	case "$ifNull":
		return pc.parseIfNull(arg)
	case "$sum", "$avg", "$min", "$max":
		return pc.parseAccumulatorExpr(name, arg)
	case "$let":
		return pc.parseLet(arg)
	case "$map":
		return pc.parseMap(arg)
	case "$filter":
		return pc.parseFilter(arg)
	case "$reduce":
		return pc.parseReduce(arg)
	case "$getField":
		return pc.parseGetField(arg)
	case "$setField", "$unsetField":
		return pc.parseSetField(name, arg)
	case "$mergeObjects":
		return pc.parseVariadic(arg, evalMergeObjects)
	case "$concatArrays":
		return pc.parseVariadic(arg, evalConcatArrays)
	case "$arrayElemAt":
		return pc.parseBinary(name, arg, evalArrayElemAt)
	case "$isArray":
		return pc.parseUnary(name, arg, evalIsArray)
	case "$type":
		return pc.parseUnary(name, arg, evalType)
	case "$rand":
		return parseRand(arg)
	case "$switch":
		return pc.parseSwitch(arg)
	}
	if knownExpressionOperator(name) {
		return nil, mongoerr.NotImplementedf("expression operator %s", name)
	}
	return nil, mongoerr.New(mongoerr.InvalidPipelineOperator, "Unrecognized expression '%s'", name)
}

func (pc *parseCtx) parseVariadic(arg any, fn func([]any) (any, error)) (expr, error) {
	args, err := pc.parseArgs(arg)
	if err != nil {
		return nil, err
	}
	return exprFunc(func(c *evalCtx) (any, error) {
		vals := make([]any, 0, len(args))
		for _, a := range args {
			v, err := a.eval(c)
			if err != nil {
				return nil, err
			}
			vals = append(vals, v)
		}
		return fn(vals)
	}), nil
}

func (pc *parseCtx) parseBinary(name string, arg any, fn func(a, b any) (any, error)) (expr, error) {
	args, err := pc.parseFixed(name, arg, 2)
	if err != nil {
		return nil, err
	}
	return exprFunc(func(c *evalCtx) (any, error) {
		a, err := args[0].eval(c)
		if err != nil {
			return nil, err
		}
		b, err := args[1].eval(c)
		if err != nil {
			return nil, err
		}
		return fn(a, b)
	}), nil
}

func (pc *parseCtx) parseUnary(name string, arg any, fn func(a any) (any, error)) (expr, error) {
	args, err := pc.parseFixed(name, arg, 1)
	if err != nil {
		return nil, err
	}
	return exprFunc(func(c *evalCtx) (any, error) {
		a, err := args[0].eval(c)
		if err != nil {
			return nil, err
		}
		return fn(a)
	}), nil
}

// evalAdd is ExpressionAdd: numbers and at most one date; any nullish operand (in order)
// makes the result null; int32 results widen to int64 on overflow, int64 to double.
func evalAdd(vals []any) (any, error) {
	kind := kindInt
	var longTotal int64
	var doubleTotal float64
	isDate := false
	for _, v := range vals {
		if nullish(v) {
			return nil, nil
		}
		var add any
		if d, ok := v.(bson.DateTime); ok {
			if isDate {
				return nil, mongoerr.New(16612, "only one date allowed in an $add expression")
			}
			isDate = true
			add = int64(d)
		} else {
			k, ok := kindOf(v)
			if !ok {
				return nil, mongoerr.TypeMismatchf("$add only supports numeric or date types, not %s", typeName(v))
			}
			if k == kindDecimal {
				return nil, decimalUnsupported("$add")
			}
			old := kind
			kind = widest(kind, k)
			if old != kind && kind == kindDouble {
				doubleTotal = float64(longTotal)
			}
			add = v
		}
		switch kind {
		case kindInt, kindLong:
			s, over := addOverflows(longTotal, toInt64(add))
			if over {
				kind = kindDouble
				doubleTotal = float64(longTotal) + toFloat(add)
			} else {
				longTotal = s
			}
		default:
			doubleTotal += toFloat(add)
		}
	}
	if isDate {
		if kind == kindDouble {
			if !(doubleTotal >= -two63 && doubleTotal < two63) {
				return nil, mongoerr.New(15, "date overflow in $add")
			}
			return bson.DateTime(llround(doubleTotal)), nil
		}
		return bson.DateTime(longTotal), nil
	}
	switch kind {
	case kindInt:
		return intOrLong(longTotal), nil
	case kindLong:
		return longTotal, nil
	}
	return doubleTotal, nil
}

// evalMultiply is ExpressionMultiply, with the same widening rules as $add.
func evalMultiply(vals []any) (any, error) {
	kind := kindInt
	longProd := int64(1)
	doubleProd := 1.0
	for _, v := range vals {
		if nullish(v) {
			return nil, nil
		}
		k, ok := kindOf(v)
		if !ok {
			return nil, mongoerr.TypeMismatchf("$multiply only supports numeric types, not %s", typeName(v))
		}
		if k == kindDecimal {
			return nil, decimalUnsupported("$multiply")
		}
		old := kind
		kind = widest(kind, k)
		if old != kind && kind == kindDouble {
			doubleProd = float64(longProd)
		}
		switch kind {
		case kindInt, kindLong:
			p, over := mulOverflows(longProd, toInt64(v))
			if over {
				kind = kindDouble
				doubleProd = float64(longProd) * toFloat(v)
			} else {
				longProd = p
			}
		default:
			doubleProd *= toFloat(v)
		}
	}
	switch kind {
	case kindInt:
		return intOrLong(longProd), nil
	case kindLong:
		return longProd, nil
	}
	return doubleProd, nil
}

func evalConcat(vals []any) (any, error) {
	var b strings.Builder
	for _, v := range vals {
		if nullish(v) {
			return nil, nil
		}
		s, ok := v.(string)
		if !ok {
			return nil, mongoerr.New(16702, "$concat only supports strings, not %s", typeName(v))
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// evalSubtract is ExpressionSubtract::apply.
func evalSubtract(a, b any) (any, error) {
	ka, okA := kindOf(a)
	kb, okB := kindOf(b)
	if okA && okB {
		switch widest(ka, kb) {
		case kindDecimal:
			return nil, decimalUnsupported("$subtract")
		case kindDouble:
			return toFloat(a) - toFloat(b), nil
		case kindLong:
			r, over := subOverflows(toInt64(a), toInt64(b))
			if over {
				return toFloat(a) - toFloat(b), nil
			}
			return r, nil
		default:
			return intOrLong(toInt64(a) - toInt64(b)), nil
		}
	}
	if nullish(a) || nullish(b) {
		return nil, nil
	}
	if da, ok := a.(bson.DateTime); ok {
		switch y := b.(type) {
		case bson.DateTime:
			return int64(da) - int64(y), nil
		case int32, int64, float64:
			return bson.DateTime(int64(da) - toInt64(y)), nil
		case bson.Decimal128:
			return nil, decimalUnsupported("$subtract")
		}
		return nil, mongoerr.TypeMismatchf("can't $subtract %s from Date", typeName(b))
	}
	return nil, mongoerr.TypeMismatchf("can't $subtract %s from %s", typeName(b), typeName(a))
}

// evalDivide is ExpressionDivide::apply: the result is always a double.
func evalDivide(a, b any) (any, error) {
	return evalDivision("$divide", a, b, func(_, _ numKind, den float64) any { return toFloat(a) / den })
}

// evalMod is ExpressionMod::apply.
func evalMod(a, b any) (any, error) {
	return evalDivision("$mod", a, b, func(ka, kb numKind, right float64) any {
		rightIntegral := kb != kindDouble || (right <= math.MaxInt32 && right >= math.MinInt32 && right == math.Trunc(right))
		if ka == kindDouble || !rightIntegral {
			return math.Mod(toFloat(a), right)
		}
		l, r := toInt64(a), toInt64(b)
		if ka == kindLong || kb == kindLong {
			if r == -1 {
				return int64(0)
			}
			return l % r
		}
		if r == -1 {
			return int32(0)
		}
		return int32(int32(l) % int32(r))
	})
}

// evalDivision is the operand handling $divide and $mod share: two numbers, not Decimal128,
// and a non-zero divisor, whose kinds and value (as a double) it hands to fn; otherwise null
// when either is nullish, else a type mismatch.
func evalDivision(op string, a, b any, fn func(ka, kb numKind, den float64) any) (any, error) {
	ka, okA := kindOf(a)
	kb, okB := kindOf(b)
	if okA && okB {
		if ka == kindDecimal || kb == kindDecimal {
			return nil, decimalUnsupported(op)
		}
		den := toFloat(b)
		if den == 0 {
			return nil, mongoerr.BadValuef("can't %s by zero", op)
		}
		return fn(ka, kb, den), nil
	}
	if nullish(a) || nullish(b) {
		return nil, nil
	}
	return nil, mongoerr.TypeMismatchf("%s only supports numeric types, not %s and %s", op, typeName(a), typeName(b))
}

func compareOp(name string) func(a, b any) (any, error) {
	return func(a, b any) (any, error) {
		c := compareValues(a, b)
		switch name {
		case "$cmp":
			return int32(c), nil
		case "$eq":
			return c == 0, nil
		case "$ne":
			return c != 0, nil
		case "$gt":
			return c > 0, nil
		case "$gte":
			return c >= 0, nil
		case "$lt":
			return c < 0, nil
		}
		return c <= 0, nil
	}
}

func evalIn(v, list any) (any, error) {
	arr, ok := list.(bson.A)
	if !ok {
		return nil, mongoerr.New(40081, "$in requires an array as a second argument, found: %s", typeName(list))
	}
	for _, e := range arr {
		if compareValues(v, e) == 0 {
			return true, nil
		}
	}
	return false, nil
}

func evalSize(v any) (any, error) {
	arr, ok := v.(bson.A)
	if !ok {
		return nil, mongoerr.New(17124, "The argument to $size must be an array. Type of argument: %s", typeName(v))
	}
	return intOrLong(int64(len(arr))), nil
}

func (pc *parseCtx) parseLogical(name string, arg any) (expr, error) {
	args, err := pc.parseArgs(arg)
	if err != nil {
		return nil, err
	}
	isAnd := name == "$and"
	return exprFunc(func(c *evalCtx) (any, error) {
		for _, a := range args {
			v, err := a.eval(c)
			if err != nil {
				return nil, err
			}
			if truthy(v) != isAnd {
				return !isAnd, nil
			}
		}
		return isAnd, nil
	}), nil
}

func (pc *parseCtx) parseCond(arg any) (expr, error) {
	var ifE, thenE, elseE expr
	if d, ok := arg.(bson.D); ok {
		for _, e := range d {
			ex, err := pc.parseOperand(e.Value)
			if err != nil {
				return nil, err
			}
			switch e.Key {
			case "if":
				ifE = ex
			case "then":
				thenE = ex
			case "else":
				elseE = ex
			default:
				return nil, mongoerr.New(17083, "Unrecognized parameter to $cond: %s", e.Key)
			}
		}
		switch {
		case ifE == nil:
			return nil, mongoerr.New(17080, "Missing 'if' parameter to $cond")
		case thenE == nil:
			return nil, mongoerr.New(17081, "Missing 'then' parameter to $cond")
		case elseE == nil:
			return nil, mongoerr.New(17082, "Missing 'else' parameter to $cond")
		}
	} else {
		args, err := pc.parseFixed("$cond", arg, 3)
		if err != nil {
			return nil, err
		}
		ifE, thenE, elseE = args[0], args[1], args[2]
	}
	return exprFunc(func(c *evalCtx) (any, error) {
		cond, err := ifE.eval(c)
		if err != nil {
			return nil, err
		}
		if truthy(cond) {
			return thenE.eval(c)
		}
		return elseE.eval(c)
	}), nil
}

func (pc *parseCtx) parseIfNull(arg any) (expr, error) {
	args, err := pc.parseArgs(arg)
	if err != nil {
		return nil, err
	}
	if len(args) < 2 {
		return nil, mongoerr.New(1257300, "$ifNull needs at least two arguments, had: %d", len(args))
	}
	return exprFunc(func(c *evalCtx) (any, error) {
		for i, a := range args {
			v, err := a.eval(c)
			if err != nil {
				return nil, err
			}
			if !nullish(v) || i == len(args)-1 {
				return v, nil
			}
		}
		return missingValue{}, nil
	}), nil
}

// parseAccumulatorExpr is ExpressionFromAccumulator for $sum $avg $min $max: one argument that
// evaluates to an array is accumulated element by element, otherwise every argument is.
func (pc *parseCtx) parseAccumulatorExpr(name string, arg any) (expr, error) {
	args, err := pc.parseArgs(arg)
	if err != nil {
		return nil, err
	}
	return exprFunc(func(c *evalCtx) (any, error) {
		acc := newAccumulator(name)
		if len(args) == 1 {
			v, err := args[0].eval(c)
			if err != nil {
				return nil, err
			}
			if arr, ok := v.(bson.A); ok {
				for _, e := range arr {
					acc.process(e)
				}
			} else {
				acc.process(v)
			}
			return acc.value()
		}
		for _, a := range args {
			v, err := a.eval(c)
			if err != nil {
				return nil, err
			}
			acc.process(v)
		}
		return acc.value()
	}), nil
}

// knownExpressionOperator lists MongoDB 7.0's expression operators, so that the ones outside
// the subset get NotImplemented while names MongoDB itself rejects get its own error.
func knownExpressionOperator(name string) bool {
	switch name {
	case "$abs", "$acos", "$acosh", "$allElementsTrue", "$anyElementTrue", "$arrayToObject",
		"$asin", "$asinh", "$atan", "$atan2", "$atanh", "$binarySize", "$bitAnd", "$bitNot",
		"$bitOr", "$bitXor", "$bsonSize", "$ceil", "$convert", "$cos", "$cosh", "$dateAdd",
		"$dateDiff", "$dateFromParts", "$dateFromString", "$dateSubtract", "$dateToParts",
		"$dateToString", "$dateTrunc", "$dayOfMonth", "$dayOfWeek", "$dayOfYear",
		"$degreesToRadians", "$exp", "$first", "$firstN", "$floor", "$function", "$hour",
		"$indexOfArray", "$indexOfBytes", "$indexOfCP", "$isNumber", "$isoDayOfWeek", "$isoWeek",
		"$isoWeekYear", "$last", "$lastN", "$ln", "$log", "$log10", "$ltrim", "$maxN", "$median",
		"$meta", "$millisecond", "$minN", "$minute", "$month", "$objectToArray", "$percentile",
		"$pow", "$radiansToDegrees", "$range", "$regexFind", "$regexFindAll", "$regexMatch",
		"$replaceAll", "$replaceOne", "$reverseArray", "$round", "$rtrim", "$sampleRate", "$second",
		"$setDifference", "$setEquals", "$setIntersection", "$setIsSubset", "$setUnion", "$sin",
		"$sinh", "$slice", "$sortArray", "$split", "$sqrt", "$stdDevPop", "$stdDevSamp",
		"$strcasecmp", "$strLenBytes", "$strLenCP", "$substr", "$substrBytes", "$substrCP", "$tan",
		"$tanh", "$toBool", "$toDate", "$toDecimal", "$toDouble", "$toHashedIndexKey", "$toInt",
		"$toLong", "$toLower", "$toObjectId", "$toString", "$toUpper", "$trim", "$trunc",
		"$tsIncrement", "$tsSecond", "$week", "$year", "$zip":
		return true
	}
	return false
}
