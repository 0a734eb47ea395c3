package aggregate

import (
	"strings"

	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// expr is a compiled aggregation expression, evaluated against the current document ($$ROOT
// and $$CURRENT are always the document being processed: the subset has no $let or $map).
type expr interface {
	eval(root bson.D) (any, error)
}

// constExpr is a literal.
type constExpr struct{ v any }

func (c constExpr) eval(bson.D) (any, error) { return c.v, nil }

// exprFunc adapts a closure to expr.
type exprFunc func(root bson.D) (any, error)

func (f exprFunc) eval(root bson.D) (any, error) { return f(root) }

// pathExpr is "$a.b" or "$$ROOT.a.b" ($$ROOT with an empty path is the whole document).
type pathExpr struct{ path []string }

func (p pathExpr) eval(root bson.D) (any, error) {
	if len(p.path) == 0 {
		return root, nil
	}
	return evalPath(root, p.path), nil
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

func (o objectExpr) eval(root bson.D) (any, error) {
	out := make(bson.D, 0, len(o.keys))
	for i, e := range o.exprs {
		v, err := e.eval(root)
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

func (a arrayExpr) eval(root bson.D) (any, error) {
	out := make(bson.A, len(a))
	for i, e := range a {
		v, err := e.eval(root)
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
func parseOperand(v any) (expr, error) {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, "$") {
			return parseFieldPathExpr(x)
		}
	case bson.D:
		return parseObjectExpr(x)
	case bson.A:
		return parseArrayExpr(x)
	case []any:
		return parseArrayExpr(bson.A(x))
	case bson.M:
		return nil, mongoerr.BadValuef("expression documents must be ordered (bson.D), got bson.M")
	}
	return constExpr{normalizeLiteral(v)}, nil
}

func parseArrayExpr(a bson.A) (expr, error) {
	out := make(arrayExpr, len(a))
	allConst := true
	for i, e := range a {
		ex, err := parseOperand(e)
		if err != nil {
			return nil, err
		}
		out[i] = ex
		if _, ok := ex.(constExpr); !ok {
			allConst = false
		}
	}
	if allConst {
		v, _ := out.eval(nil)
		return constExpr{v}, nil
	}
	return out, nil
}

// parseObjectExpr parses a document in expression position: {$op: args} or {field: expr...}.
func parseObjectExpr(d bson.D) (expr, error) {
	if len(d) > 0 && strings.HasPrefix(d[0].Key, "$") {
		if len(d) != 1 {
			return nil, mongoerr.New(15983, "An object representing an expression must have exactly one field: %s", renderValue(d))
		}
		return parseOperator(d[0].Key, d[0].Value)
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
		ex, err := parseOperand(e.Value)
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
		v, _ := o.eval(nil)
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

// parseFieldPathExpr parses "$a.b", "$$ROOT[.a.b]" and "$$CURRENT[.a.b]".
func parseFieldPathExpr(s string) (expr, error) {
	if len(s) < 2 {
		return nil, mongoerr.New(16872, "'$' by itself is not a valid FieldPath")
	}
	if s[1] != '$' {
		path, err := parseFieldPath(s[1:])
		if err != nil {
			return nil, err
		}
		return pathExpr{path}, nil
	}
	name, rest, dotted := strings.Cut(s[2:], ".")
	if err := checkVariable(name); err != nil {
		return nil, err
	}
	if !dotted {
		return pathExpr{}, nil
	}
	path, err := parseFieldPath(rest)
	if err != nil {
		return nil, err
	}
	return pathExpr{path}, nil
}

// checkVariable accepts ROOT and CURRENT and rejects every other variable reference.
func checkVariable(name string) error {
	switch name {
	case "ROOT", "CURRENT":
		return nil
	case "":
		return mongoerr.FailedToParsef("empty variable names are not allowed")
	case "REMOVE", "NOW", "CLUSTER_TIME", "DESCEND", "PRUNE", "KEEP", "SEARCH_META",
		"SEARCH_SCORE", "USER_ROLES", "SEARCH_SCORE_DETAILS":
		return mongoerr.NotImplementedf("variable $$%s", name)
	}
	c := name[0]
	if (c >= 'a' && c <= 'z') || c >= 0x80 {
		for i := 1; i < len(name); i++ {
			if c := name[i]; !isVarChar(c) {
				return mongoerr.FailedToParsef("'%s' contains an invalid character for a variable name: '%c'", name, name[i])
			}
		}
		return mongoerr.New(17276, "Use of undefined variable: %s", name)
	}
	return mongoerr.FailedToParsef("'%s' starts with an invalid character for a user variable name", name)
}

func isVarChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}
