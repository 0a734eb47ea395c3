package aggregate

import (
	"errors"
	"strings"

	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// projKind is what a projection tree does with the fields it does not name.
type projKind int

const (
	projUndecided projKind = iota
	// projInclusion keeps only the named fields (plus computed ones): $project {a: 1}.
	projInclusion
	// projExclusion drops the named fields: $project {a: 0} and $unset.
	projExclusion
	// projAddFields keeps every field and sets the computed ones: $addFields and $set.
	projAddFields
)

// projNode is one level of a projection (MongoDB's ProjectionNode).
type projNode struct {
	// leaves are fields included (true) or excluded (false) whole.
	leaves   map[string]bool
	children map[string]*projNode
	exprs    map[string]expr
	// order lists children and computed fields in order of first appearance; computed fields
	// are set in this order.
	order []string
	// computed reports whether the subtree holds computed fields.
	computed bool
}

func newProjNode() *projNode {
	return &projNode{leaves: map[string]bool{}, children: map[string]*projNode{}, exprs: map[string]expr{}}
}

func (n *projNode) has(name string) bool {
	if _, ok := n.leaves[name]; ok {
		return true
	}
	if _, ok := n.exprs[name]; ok {
		return true
	}
	_, ok := n.children[name]
	return ok
}

func (n *projNode) child(name string) *projNode {
	if c, ok := n.children[name]; ok {
		return c
	}
	c := newProjNode()
	n.children[name] = c
	n.order = append(n.order, name)
	return c
}

// markComputed sets computed on every node and returns the root's value.
func (n *projNode) markComputed() bool {
	n.computed = len(n.exprs) > 0
	for _, c := range n.children {
		if c.markComputed() {
			n.computed = true
		}
	}
	return n.computed
}

// projectStage is a compiled $project, $addFields/$set or $unset.
type projectStage struct {
	kind projKind
	root *projNode
}

// projParser builds a projection tree.
type projParser struct {
	pc        *parseCtx
	kind      projKind
	addFields bool
}

// wrapStageErr prefixes a parse error as mongod does for projection-like stages.
func wrapStageErr(stageName string, err error) error {
	var me *mongoerr.Error
	if errors.As(err, &me) {
		return &mongoerr.Error{Code: me.Code, Msg: "Invalid " + stageName + " :: caused by :: " + me.Msg}
	}
	return err
}

func (pc *parseCtx) parseProject(arg any) (stage, error) {
	d, ok := arg.(bson.D)
	if !ok {
		return nil, mongoerr.New(15969, "$project specification must be an object")
	}
	st, err := pc.buildProject(d)
	if err != nil {
		return nil, wrapStageErr("$project", err)
	}
	return st, nil
}

func (pc *parseCtx) buildProject(d bson.D) (*projectStage, error) {
	if len(d) == 0 {
		return nil, mongoerr.New(51272, "projection specification must have at least one field")
	}
	p := &projParser{pc: pc}
	root := newProjNode()
	idSet, idInclude := false, true
	for _, e := range d {
		if e.Key == "_id" && isInclusionValue(e.Value) {
			idSet, idInclude = true, truthy(normalizeLiteral(e.Value))
			continue
		}
		if err := p.add(root, e.Key, e.Key, e.Value); err != nil {
			return nil, err
		}
	}
	kind := p.kind
	if kind == projUndecided {
		kind = projInclusion
		if idSet && !idInclude {
			kind = projExclusion
		}
	}
	if !root.has("_id") {
		switch {
		case kind == projInclusion && idInclude:
			root.leaves["_id"] = true
		case kind == projExclusion && !idInclude:
			root.leaves["_id"] = false
		}
	}
	root.markComputed()
	return &projectStage{kind: kind, root: root}, nil
}

// isInclusionValue reports values that $project reads as include/exclude flags.
func isInclusionValue(v any) bool {
	switch v.(type) {
	case bool, int, int32, int64, float64, bson.Decimal128:
		return true
	}
	return false
}

// setKind records the projection type implied by one field, rejecting mixtures as MongoDB.
func (p *projParser) setKind(k projKind, path string) error {
	if p.addFields {
		return nil
	}
	switch {
	case k == projAddFields:
		if p.kind == projExclusion {
			return mongoerr.New(31252, "Cannot use expression other than $meta in exclusion projection")
		}
		p.kind = projInclusion
	case p.kind == projUndecided:
		p.kind = k
	case p.kind != k && k == projExclusion:
		return mongoerr.New(31254, "Cannot do exclusion on field %s in inclusion projection", path)
	case p.kind != k:
		return mongoerr.New(31253, "Cannot do inclusion on field %s in exclusion projection", path)
	}
	return nil
}

// add adds the spec field key (possibly dotted) with value v under node; full is the path
// from the root, for messages.
func (p *projParser) add(node *projNode, full, key string, v any) error {
	parts, err := parseFieldPath(key)
	if err != nil {
		return err
	}
	for i, part := range parts[:len(parts)-1] {
		if _, leaf := node.leaves[part]; leaf || node.exprs[part] != nil {
			return mongoerr.New(31249, "Path collision at %s remaining portion %s", full, strings.Join(parts[i+1:], "."))
		}
		node = node.child(part)
	}
	last := parts[len(parts)-1]
	d, isDoc := v.(bson.D)
	nested := isDoc && len(d) > 0 && !strings.HasPrefix(d[0].Key, "$")
	if nested {
		if _, leaf := node.leaves[last]; leaf || node.exprs[last] != nil {
			return mongoerr.New(31250, "Path collision at %s", full)
		}
		c := node.child(last)
		for _, e := range d {
			if strings.Contains(e.Key, ".") {
				return mongoerr.New(40183, "cannot use dotted field name '%s' in a sub object: %s", e.Key, renderValue(d))
			}
			if err := p.add(c, full+"."+e.Key, e.Key, e.Value); err != nil {
				return err
			}
		}
		return nil
	}
	if node.has(last) {
		return mongoerr.New(31250, "Path collision at %s", full)
	}
	if !p.addFields && isInclusionValue(v) {
		include := truthy(normalizeLiteral(v))
		k := projExclusion
		if include {
			k = projInclusion
		}
		if err := p.setKind(k, full); err != nil {
			return err
		}
		node.leaves[last] = include
		return nil
	}
	if !p.addFields && isDoc && len(d) == 0 {
		return mongoerr.New(51270, "An empty sub-projection is not a valid value. Found empty object at path")
	}
	if err := p.setKind(projAddFields, full); err != nil {
		return err
	}
	ex, err := p.pc.parseOperand(v)
	if err != nil {
		return err
	}
	node.exprs[last] = ex
	node.order = append(node.order, last)
	return nil
}

func (pc *parseCtx) parseAddFields(name string, arg any) (stage, error) {
	d, ok := arg.(bson.D)
	if !ok {
		return nil, mongoerr.New(40272, "%s specification stage must be an object, got %s", name, typeName(normalizeLiteral(arg)))
	}
	p := &projParser{pc: pc, addFields: true}
	root := newProjNode()
	for _, e := range d {
		if err := p.add(root, e.Key, e.Key, e.Value); err != nil {
			return nil, wrapStageErr(name, err)
		}
	}
	root.markComputed()
	return &projectStage{kind: projAddFields, root: root}, nil
}

func (pc *parseCtx) parseUnset(arg any) (stage, error) {
	var paths []string
	switch x := arg.(type) {
	case string:
		paths = []string{x}
	case bson.A:
		if len(x) == 0 {
			return nil, mongoerr.New(31119, "$unset specification must be a string or an array with at least one field")
		}
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, mongoerr.New(31120, "$unset specification must be a string or an array containing only string values")
			}
			paths = append(paths, s)
		}
	default:
		return nil, mongoerr.New(31002, "$unset specification must be a string or an array")
	}
	p := &projParser{pc: pc}
	root := newProjNode()
	for _, s := range paths {
		if err := p.add(root, s, s, int32(0)); err != nil {
			return nil, wrapStageErr("$unset", err)
		}
	}
	return &projectStage{kind: projExclusion, root: root}, nil
}

func (s *projectStage) start(rc *runContext, next processor) processor {
	return &mapRunner{rc: rc, s: s, next: next}
}

// apply returns the projected document ec.root; the document is not modified.
func (s *projectStage) apply(ec *evalCtx) (bson.D, error) {
	doc := ec.root
	n := s.root
	switch s.kind {
	case projExclusion:
		return n.applyExclusion(doc), nil
	case projInclusion:
		out := n.applyInclusion(doc)
		if !n.computed {
			return out, nil
		}
		return n.applyExpressions(ec, out)
	}
	out := make(bson.D, len(doc), len(doc)+len(n.order))
	copy(out, doc)
	return n.applyExpressions(ec, out)
}

// applyInclusion keeps the included fields of d in d's order (ProjectionNode::applyProjections).
func (n *projNode) applyInclusion(d bson.D) bson.D {
	out := make(bson.D, 0, len(n.leaves)+len(n.children))
	for _, e := range d {
		if inc, ok := n.leaves[e.Key]; ok {
			if inc {
				out = append(out, e)
			}
			continue
		}
		if c, ok := n.children[e.Key]; ok {
			if v := c.inclusionValue(e.Value); !isMissing(v) {
				out = append(out, bson.E{Key: e.Key, Value: v})
			}
		}
	}
	return out
}

// inclusionValue applies a sub-projection to a value: documents are projected, arrays
// element by element (dropping non-documents), other values are dropped.
func (n *projNode) inclusionValue(v any) any {
	switch x := v.(type) {
	case bson.D:
		return n.applyInclusion(x)
	case bson.A:
		out := bson.A{}
		for _, e := range x {
			if r := n.inclusionValue(e); !isMissing(r) {
				out = append(out, r)
			}
		}
		return out
	}
	return missingValue{}
}

// applyExclusion drops the excluded fields of d.
func (n *projNode) applyExclusion(d bson.D) bson.D {
	out := make(bson.D, 0, len(d))
	for _, e := range d {
		if inc, ok := n.leaves[e.Key]; ok && !inc {
			continue
		}
		if c, ok := n.children[e.Key]; ok {
			out = append(out, bson.E{Key: e.Key, Value: c.exclusionValue(e.Value)})
			continue
		}
		out = append(out, e)
	}
	return out
}

func (n *projNode) exclusionValue(v any) any {
	switch x := v.(type) {
	case bson.D:
		return n.applyExclusion(x)
	case bson.A:
		out := make(bson.A, len(x))
		for i, e := range x {
			out[i] = n.exclusionValue(e)
		}
		return out
	}
	return v
}

// applyExpressions sets the computed fields of this level on out (which the caller owns),
// evaluating expressions in ec (ProjectionNode::applyExpressions).
func (n *projNode) applyExpressions(ec *evalCtx, out bson.D) (bson.D, error) {
	for _, f := range n.order {
		var v any
		if c, ok := n.children[f]; ok {
			if !c.computed {
				continue
			}
			cur, ok := getField(out, f)
			if !ok {
				cur = missingValue{}
			}
			r, err := c.expressionsValue(ec, cur)
			if err != nil {
				return nil, err
			}
			v = r
		} else {
			r, err := n.exprs[f].eval(ec)
			if err != nil {
				return nil, err
			}
			v = r
		}
		out = setOwnedField(out, f, v)
	}
	return out, nil
}

// expressionsValue is ProjectionNode::applyExpressionsToValue: computed fields are added to
// documents and to every element of arrays; any other value is replaced by a document of the
// computed fields.
func (n *projNode) expressionsValue(ec *evalCtx, v any) (any, error) {
	switch x := v.(type) {
	case bson.D:
		cp := make(bson.D, len(x), len(x)+len(n.order))
		copy(cp, x)
		return n.applyExpressions(ec, cp)
	case bson.A:
		out := make(bson.A, 0, len(x))
		for _, e := range x {
			r, err := n.expressionsValue(ec, e)
			if err != nil {
				return nil, err
			}
			if !isMissing(r) {
				out = append(out, r)
			}
		}
		return out, nil
	}
	return n.applyExpressions(ec, bson.D{})
}

// setOwnedField sets key in d in place (appending when absent); a missing value removes it.
func setOwnedField(d bson.D, key string, v any) bson.D {
	for i := range d {
		if d[i].Key == key {
			if isMissing(v) {
				return append(d[:i], d[i+1:]...)
			}
			d[i].Value = v
			return d
		}
	}
	if isMissing(v) {
		return d
	}
	return append(d, bson.E{Key: key, Value: v})
}
