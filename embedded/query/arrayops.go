package query

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// sizePred is {$size: n}: the value is an array of n elements (arrays inside it are not
// traversed).
type sizePred struct{ n int }

func (p sizePred) test(v any, _ bool) bool {
	a, ok := v.(bson.A)
	return ok && len(a) == p.n
}

func parseSize(v any) (term, error) {
	f, ok := bsonval.ToFloat(v)
	if !ok || !bsonval.IsNumber(v) {
		return term{}, mongoerr.BadValuef("$size needs a number")
	}
	if f != math.Trunc(f) || math.IsNaN(f) {
		return term{}, mongoerr.BadValuef("$size must be a whole number")
	}
	if f < 0 {
		return term{}, mongoerr.BadValuef("$size may not be negative")
	}
	if f > math.MaxInt32 {
		return term{p: constPred(false), mode: modeWhole}, nil
	}
	return term{p: sizePred{int(f)}, mode: modeWhole}, nil
}

// constPred accepts or refuses every value.
type constPred bool

func (c constPred) test(any, bool) bool { return bool(c) }

// parseAll is {$all: [v...]}: a conjunction of one condition per element, each an equality
// (or a regex), or all of them $elemMatch; an empty list matches nothing.
func parseAll(v any) ([]term, error) {
	arr, ok := v.(bson.A)
	if !ok {
		return nil, mongoerr.BadValuef("$all needs an array")
	}
	if len(arr) == 0 {
		return []term{{p: constPred(false), mode: modeWhole}}, nil
	}
	_, firstEM := elemMatchArg(arr[0])
	terms := make([]term, 0, len(arr))
	for _, x := range arr {
		em, isEM := elemMatchArg(x)
		if isEM != firstEM {
			return nil, mongoerr.BadValuef("$all/$elemMatch has to be consistent")
		}
		if isEM {
			t, err := parseElemMatch(em)
			if err != nil {
				return nil, err
			}
			terms = append(terms, t)
			continue
		}
		if d, ok := x.(bson.D); ok && len(d) > 0 && len(d[0].Key) > 0 && d[0].Key[0] == '$' {
			if _, isOp := isOperatorDoc(d); isOp {
				return nil, mongoerr.BadValuef("no $ expressions in $all")
			}
		}
		t, err := equalityTerm(x)
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
	}
	return terms, nil
}

// elemMatchArg returns the argument of an {$elemMatch: ...} element of $all.
func elemMatchArg(v any) (any, bool) {
	d, ok := v.(bson.D)
	if !ok || len(d) != 1 || d[0].Key != "$elemMatch" {
		return nil, false
	}
	return d[0].Value, true
}

// modPred is {$mod: [divisor, remainder]}: a number whose integer part has that remainder.
type modPred struct{ div, rem int64 }

func (p modPred) test(v any, missing bool) bool {
	if missing || !bsonval.IsNumber(v) {
		return false
	}
	switch x := v.(type) {
	case int32:
		return int64(x)%p.div == p.rem
	case int64:
		return x%p.div == p.rem
	}
	f, _ := bsonval.ToFloat(v)
	if math.IsNaN(f) || math.IsInf(f, 0) || f >= 9.2e18 || f <= -9.2e18 {
		return false
	}
	return int64(f)%p.div == p.rem
}

func parseMod(v any) (term, error) {
	arr, ok := v.(bson.A)
	switch {
	case !ok:
		return term{}, mongoerr.BadValuef("malformed mod, needs to be an array")
	case len(arr) < 2:
		return term{}, mongoerr.BadValuef("malformed mod, not enough elements")
	case len(arr) > 2:
		return term{}, mongoerr.BadValuef("malformed mod, too many elements")
	}
	var vals [2]int64
	for i, x := range arr {
		f, ok := bsonval.ToFloat(x)
		if !ok || !bsonval.IsNumber(x) {
			what := [2]string{"divisor", "remainder"}[i]
			return term{}, mongoerr.BadValuef("malformed mod, %s not a number", what)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return term{}, mongoerr.BadValuef("malformed mod, %s value is invalid", [2]string{"divisor", "remainder"}[i])
		}
		switch y := x.(type) {
		case int64:
			vals[i] = y
		default:
			vals[i] = int64(f)
		}
	}
	if vals[0] == 0 {
		return term{}, mongoerr.BadValuef("divisor cannot be 0")
	}
	return term{p: modPred{div: vals[0], rem: vals[1]}}, nil
}
