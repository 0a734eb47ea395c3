package aggregate

import (
	"time"

	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/query"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Env is the context one command's expressions share: its let variables and the values of
// the system variables $$NOW and $$CLUSTER_TIME, which MongoDB fixes once per command. One
// Env compiles every pipeline, filter ($expr) and update of its command.
type Env struct {
	now         time.Time
	clusterTime bson.Timestamp
	let         map[string]any
	qenv        *query.Env
}

// NewEnv builds the Env of a command: now and clusterTime are $$NOW and $$CLUSTER_TIME, and
// let (nil for none) is the command's let option, whose values are expressions evaluated
// once, here, before any document is read (so they may not use field paths, as in MongoDB).
func NewEnv(let bson.D, now time.Time, clusterTime bson.Timestamp) (*Env, error) {
	e := &Env{now: now, clusterTime: clusterTime}
	e.qenv = &query.Env{Expr: e.compileExprPredicate, Now: now, ClusterTime: clusterTime}
	if len(let) == 0 {
		return e, nil
	}
	e.let = make(map[string]any, len(let))
	for _, f := range let {
		if err := checkVariableName(f.Key); err != nil {
			return nil, err
		}
		pc := &parseCtx{env: e, noFields: true}
		ex, err := pc.parseOperand(f.Value)
		if err != nil {
			return nil, err
		}
		v, err := ex.eval(pc.newEvalCtx(nil))
		if err != nil {
			return nil, err
		}
		e.let[f.Key] = v
	}
	return e, nil
}

// defaultEnv is the Env of a command without let: the clock is read now.
func defaultEnv() *Env {
	now := time.Now()
	e, _ := NewEnv(nil, now, bson.Timestamp{T: uint32(now.Unix()), I: 1}) // no let: cannot fail
	return e
}

// Compile parses and validates an aggregation pipeline in this Env (see the package-level
// Compile).
func (e *Env) Compile(pipeline []bson.D) (*Pipeline, error) {
	return compile(&parseCtx{env: e}, pipeline)
}

// QueryEnv is the query.Env of this command: $expr compiled with this Env's variables, and
// its clock for $currentDate.
func (e *Env) QueryEnv() *query.Env { return e.qenv }

// CompileFilter compiles a query filter in which $expr may use this Env's variables.
func (e *Env) CompileFilter(filter bson.D) (*query.Filter, error) {
	return query.CompileFilterEnv(filter, e.QueryEnv())
}

// compileExprPredicate compiles the argument of $expr: a document matches when the
// expression's value is true under MongoDB's coercion to bool.
func (e *Env) compileExprPredicate(arg any) (query.Predicate, error) {
	pc := &parseCtx{env: e}
	ex, err := pc.parseOperand(arg)
	if err != nil {
		return nil, err
	}
	n := pc.nslots
	return func(doc bson.D) (bool, error) {
		v, err := ex.eval(&evalCtx{root: doc, vars: make([]any, n)})
		if err != nil {
			return false, err
		}
		return truthy(v), nil
	}, nil
}

// parseCtx is the state of one compilation: the Env, the user variables in scope ($let, $map,
// $filter, $reduce) and the number of variable slots allocated.
type parseCtx struct {
	env    *Env
	scope  []varDef // innermost last
	nslots int
	// noFields is set while compiling a command's let values: no document exists yet.
	noFields bool
}

// varDef is a user variable in scope and the slot that holds its value while it is defined.
type varDef struct {
	name string
	slot int
}

// define brings a new variable into scope and returns its slot; the caller pops the scope
// with pc.scope = pc.scope[:mark] once the variable's body is compiled.
func (pc *parseCtx) define(name string) (int, error) {
	if name == "CURRENT" {
		return 0, mongoerr.NotImplementedf("rebinding the variable $$CURRENT")
	}
	if err := checkVariableName(name); err != nil {
		return 0, err
	}
	slot := pc.nslots
	pc.nslots++
	pc.scope = append(pc.scope, varDef{name: name, slot: slot})
	return slot, nil
}

func (pc *parseCtx) newEvalCtx(root bson.D) *evalCtx {
	return &evalCtx{root: root, vars: make([]any, pc.nslots)}
}

// evalCtx is what an expression sees while it is evaluated: the document ($$ROOT and
// $$CURRENT) and the values of user variables by slot. Evaluation is sequential, so a
// variable's slot holds the value of its innermost live definition.
type evalCtx struct {
	root bson.D
	vars []any
}

// varExpr reads a user variable, then a path inside its value.
type varExpr struct {
	slot int
	path []string
}

func (v varExpr) eval(c *evalCtx) (any, error) {
	return pathInValue(c.vars[v.slot], v.path), nil
}

// pathInValue follows a field path inside a value as "$$var.a.b" does: through documents,
// fanning out over arrays; an empty path is the value itself.
func pathInValue(v any, path []string) any {
	if len(path) == 0 {
		return v
	}
	switch x := v.(type) {
	case bson.D:
		return evalPath(x, path)
	case bson.A:
		return evalPathArray(x, path)
	}
	return missingValue{}
}

// variableRef compiles a "$$name[.path]" reference.
func (pc *parseCtx) variableRef(name string, path []string) (expr, error) {
	for i := len(pc.scope) - 1; i >= 0; i-- {
		if pc.scope[i].name == name {
			return varExpr{slot: pc.scope[i].slot, path: path}, nil
		}
	}
	switch name {
	case "ROOT", "CURRENT":
		if pc.noFields {
			return nil, letFieldAccess()
		}
		return pathExpr{path}, nil
	case "REMOVE":
		return constExpr{missingValue{}}, nil
	case "NOW":
		return constExpr{pathInValue(bson.NewDateTimeFromTime(pc.env.now), path)}, nil
	case "CLUSTER_TIME":
		return constExpr{pathInValue(pc.env.clusterTime, path)}, nil
	case "DESCEND", "PRUNE", "KEEP", "SEARCH_META", "SEARCH_SCORE", "USER_ROLES",
		"SEARCH_SCORE_DETAILS":
		return nil, mongoerr.NotImplementedf("variable $$%s", name)
	}
	if v, ok := pc.env.let[name]; ok {
		return constExpr{pathInValue(v, path)}, nil
	}
	if err := checkVariableRead(name); err != nil {
		return nil, err
	}
	return nil, mongoerr.New(17276, "Use of undefined variable: %s", name)
}

func letFieldAccess() error {
	return mongoerr.New(4890500, "Command let Expression tried to access a field, but this is not allowed because command let expressions run before the query examines any documents.")
}

// checkVariableRead is Variables::validateNameForUserRead.
func checkVariableRead(name string) error {
	if name == "" {
		return mongoerr.FailedToParsef("empty variable names are not allowed")
	}
	c := name[0]
	if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && c < 0x80 {
		return mongoerr.FailedToParsef("'%s' starts with an invalid character for a user variable name", name)
	}
	for i := 1; i < len(name); i++ {
		if !isVarChar(name[i]) {
			return mongoerr.FailedToParsef("'%s' contains an invalid character for a variable name: '%c'", name, name[i])
		}
	}
	return nil
}

// checkVariableName is Variables::validateNameForUserWrite: user variables start with a
// lowercase letter (or a non-ASCII byte).
func checkVariableName(name string) error {
	if name == "" {
		return mongoerr.FailedToParsef("empty variable names are not allowed")
	}
	c := name[0]
	if (c < 'a' || c > 'z') && c < 0x80 {
		return mongoerr.FailedToParsef("'%s' starts with an invalid character for a user variable name", name)
	}
	for i := 1; i < len(name); i++ {
		if !isVarChar(name[i]) {
			return mongoerr.FailedToParsef("'%s' contains an invalid character for a variable name: '%c'", name, name[i])
		}
	}
	return nil
}

func isVarChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}
