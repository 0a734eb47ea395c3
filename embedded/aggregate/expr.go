package aggregate

import (
	"strings"

	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// expr is a compiled aggregation expression, evaluated against the current document ($$ROOT
// and $$CURRENT are always the document being processed) and the user variables in scope.
type expr interface {
	eval(c *evalCtx) (any, error)
}

// constExpr is a literal.
type constExpr struct{ v any }

func (c constExpr) eval(*evalCtx) (any, error) { return c.v, nil }

// exprFunc adapts a closure to expr.
type exprFunc func(c *evalCtx) (any, error)

func (f exprFunc) eval(c *evalCtx) (any, error) { return f(c) }

// pathExpr is "$a.b" or "$$ROOT.a.b" ($$ROOT with an empty path is the whole document).
type pathExpr struct{ path []string }

func (p pathExpr) eval(c *evalCtx) (any, error) {
	if len(p.path) == 0 {
		return c.root, nil
	}
	return evalPath(c.root, p.path), nil
}

// evalPath is ExpressionFieldPath::evaluatePath: it descends through documents and fans out
// over arrays, collecting the values found in array elements (missing ones are skipped;
// nested arrays yield nested arrays). Numeric components do not index arrays.
func evalPath(d bson.D, path []string) any {
	v, ok := getField(d, path[0])
	if !ok {
		return missingValue{}
	}
	if len(path) == 1 {
		return v
	}
	switch x := v.(type) {
	case bson.D:
		return evalPath(x, path[1:])
	case bson.A:
		return evalPathArray(x, path[1:])
	}
	return missingValue{}
}

func evalPathArray(a bson.A, path []string) bson.A {
	out := bson.A{}
	for _, e := range a {
		switch x := e.(type) {
		case bson.D:
			if v := evalPath(x, path); !isMissing(v) {
				out = append(out, v)
			}
		case bson.A:
			out = append(out, evalPathArray(x, path))
		}
	}
	return out
}

func getField(d bson.D, key string) (any, bool) {
	for i := range d {
		if d[i].Key == key {
			return d[i].Value, true
		}
	}
	return nil, false
}

// objectExpr is a document of expressions; fields that evaluate to missing are omitted.
type objectExpr struct {
	keys  []string
	exprs []expr
}

func (o objectExpr) eval(c *evalCtx) (any, error) {
	out := make(bson.D, 0, len(o.keys))
	for i, e := range o.exprs {
		v, err := e.eval(c)
		if err != nil {
			return nil, err
		}
		if !isMissing(v) {
			out = append(out, bson.E{Key: o.keys[i], Value: v})
		}
	}
	return out, nil
}

// arrayExpr is an array of expressions; missing elements become null.
type arrayExpr []expr

func (a arrayExpr) eval(c *evalCtx) (any, error) {
	out := make(bson.A, len(a))
	for i, e := range a {
		v, err := e.eval(c)
		if err != nil {
			return nil, err
		}
		out[i] = missingToNull(v)
	}
	return out, nil
}

// parseOperand is Expression::parseOperand: "$path" strings are field paths or variables,
// documents are operator or object expressions, arrays are array expressions, anything else
// is a literal.
func (pc *parseCtx) parseOperand(v any) (expr, error) {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, "$") {
			return pc.parseFieldPathExpr(x)
		}
	case bson.D:
		return pc.parseObjectExpr(x)
	case bson.A:
		return pc.parseArrayExpr(x)
	case []any:
		return pc.parseArrayExpr(bson.A(x))
	case bson.M:
		return nil, mongoerr.BadValuef("expression documents must be ordered (bson.D), got bson.M")
	}
	return constExpr{normalizeLiteral(v)}, nil
}

func (pc *parseCtx) parseArrayExpr(a bson.A) (expr, error) {
	out := make(arrayExpr, len(a))
	allConst := true
	for i, e := range a {
		ex, err := pc.parseOperand(e)
		if err != nil {
			return nil, err
		}
		out[i] = ex
		if _, ok := ex.(constExpr); !ok {
			allConst = false
		}
	}
	if allConst {
		v, _ := out.eval(&evalCtx{})
		return constExpr{v}, nil
	}
	return out, nil
}

// parseObjectExpr parses a document in expression position: {$op: args} or {field: expr...}.
func (pc *parseCtx) parseObjectExpr(d bson.D) (expr, error) {
	if len(d) > 0 && strings.HasPrefix(d[0].Key, "$") {
		if len(d) != 1 {
			return nil, mongoerr.New(15983, "An object representing an expression must have exactly one field: %s", renderValue(d))
		}
		return pc.parseOperator(d[0].Key, d[0].Value)
	}
	o := objectExpr{}
	seen := make(map[string]bool, len(d))
	allConst := true
	for _, e := range d {
		if err := validateFieldName(e.Key); err != nil {
			return nil, err
		}
		if seen[e.Key] {
			return nil, mongoerr.New(16406, "duplicate field name specified in object literal: %s", renderValue(d))
		}
		seen[e.Key] = true
		ex, err := pc.parseOperand(e.Value)
		if err != nil {
			return nil, err
		}
		if _, ok := ex.(constExpr); !ok {
			allConst = false
		}
		o.keys = append(o.keys, e.Key)
		o.exprs = append(o.exprs, ex)
	}
	if allConst {
		v, _ := o.eval(&evalCtx{})
		return constExpr{v}, nil
	}
	return o, nil
}

// validateFieldName checks one field name of an object expression or projection.
func validateFieldName(name string) error {
	switch {
	case name == "":
		return mongoerr.New(15998, "FieldPath field names may not be empty strings.")
	case name[0] == '$':
		return mongoerr.New(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
	case strings.Contains(name, "\x00"):
		return mongoerr.New(16411, "FieldPath field names may not contain '\\0'.")
	case strings.Contains(name, "."):
		return mongoerr.New(16412, "FieldPath field names may not contain '.'.")
	}
	return nil
}

// parseFieldPath splits and validates a dotted path (without its '$'), as FieldPath does.
func parseFieldPath(p string) ([]string, error) {
	if p == "" {
		return nil, mongoerr.New(40352, "FieldPath cannot be constructed with empty string")
	}
	if strings.HasSuffix(p, ".") {
		return nil, mongoerr.New(40353, "FieldPath must not end with a '.'.")
	}
	parts := strings.Split(p, ".")
	for _, part := range parts {
		if part == "" {
			return nil, mongoerr.New(15998, "FieldPath field names may not be empty strings.")
		}
		if part[0] == '$' {
			return nil, mongoerr.New(16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
		if strings.Contains(part, "\x00") {
			return nil, mongoerr.New(16411, "FieldPath field names may not contain '\\0'.")
		}
	}
	return parts, nil
}

// parseFieldPathExpr parses "$a.b" and variable references "$$name[.a.b]".
func (pc *parseCtx) parseFieldPathExpr(s string) (expr, error) {
	if len(s) < 2 {
		return nil, mongoerr.New(16872, "'$' by itself is not a valid FieldPath")
	}
	if s[1] != '$' {
		if pc.noFields {
			return nil, letFieldAccess()
		}
		path, err := parseFieldPath(s[1:])
		if err != nil {
			return nil, err
		}
		return pathExpr{path}, nil
	}
	name, rest, dotted := strings.Cut(s[2:], ".")
	if name == "" {
		return nil, mongoerr.FailedToParsef("empty variable names are not allowed")
	}
	var path []string
	if dotted {
		var err error
		if path, err = parseFieldPath(rest); err != nil {
			return nil, err
		}
	}
	return pc.variableRef(name, path)
}
