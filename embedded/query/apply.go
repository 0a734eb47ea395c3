package query

import (
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// applier carries the state of one Update.Apply.
type applier struct {
	isInsert bool
	id       any
	hasID    bool
	desc     UpdateDescription
	// pos is what the positional $ stands for ("" when the query gave no position).
	pos     string
	filters map[string]*arrayFilter
}

// Apply applies the update to doc and returns the new document. doc is never modified; the
// result shares unchanged values with doc and with the update. isInsert selects the upsert
// insert path (doc is the UpsertSeed, $setOnInsert applies). changed is false when the result
// equals doc exactly (types included), so the write is a no-op. desc lists the top-most
// changed paths as a change-stream update event does (empty for replacements).
//
// Existing fields keep their position; new fields are appended in mongod's application order
// (field names compared bytewise, numeric names numerically), whatever their order in the
// update document.
func (u *Update) Apply(doc bson.D, isInsert bool) (out bson.D, desc UpdateDescription, changed bool, err error) {
	return u.ApplyPosition(doc, isInsert, -1)
}

// Positional reports whether the update uses the positional $, which needs the array
// position the query matched (Filter.MatchPosition).
func (u *Update) Positional() bool { return u.positional }

// ApplyPosition is Apply with pos, the array position the query matched (-1 for none), as
// what the positional $ stands for. A positional update without a position fails as in
// MongoDB ("The positional operator did not find the match needed from the query."). An
// upsert's insert with the positional $ is NotImplemented (MongoDB's manual warns against
// it: the $ would become a field name).
func (u *Update) ApplyPosition(doc bson.D, isInsert bool, pos int) (out bson.D, desc UpdateDescription, changed bool, err error) {
	if isInsert && u.positional {
		return nil, UpdateDescription{}, false, mongoerr.NotImplementedf("the positional $ operator in an upsert that inserts")
	}
	a := &applier{isInsert: isInsert, filters: u.filters}
	if pos >= 0 {
		a.pos = strconv.Itoa(pos)
	}
	a.id, a.hasID = getField(doc, "_id")
	if u.isRepl {
		out, err = a.replace(u.replacement)
		if err != nil {
			return nil, UpdateDescription{}, false, err
		}
		return out, UpdateDescription{}, !strictEqual(out, doc), nil
	}
	out, changed, err = a.applyDoc(u.root, doc, "", true)
	if err != nil {
		return nil, UpdateDescription{}, false, err
	}
	if a.hasID {
		if nid, ok := getField(out, "_id"); !ok || !strictEqual(nid, a.id) {
			path := u.idPath
			if path == "" {
				path = "_id"
			}
			return nil, UpdateDescription{}, false, mongoerr.New(mongoerr.ImmutableField,
				"Performing an update on the path '%s' would modify the immutable field '_id'", path)
		}
	}
	if isInsert {
		out = idFirst(out)
	}
	if !changed {
		out = doc
	}
	return out, a.desc, changed, nil
}

func idFirst(d bson.D) bson.D {
	for i, e := range d {
		if e.Key == "_id" {
			if i == 0 {
				return d
			}
			out := make(bson.D, 0, len(d))
			out = append(out, e)
			out = append(out, d[:i]...)
			return append(out, d[i+1:]...)
		}
	}
	return d
}

// Replace returns the document a replacement makes of doc: repl's fields with doc's _id first
// (repl may omit it; an _id in repl that is not strictly equal to doc's fails with
// ImmutableField). doc and repl are not modified.
func Replace(doc, repl bson.D) (bson.D, error) {
	a := &applier{}
	a.id, a.hasID = getField(doc, "_id")
	return a.replace(repl)
}

func (a *applier) replace(repl bson.D) (bson.D, error) {
	out := make(bson.D, 0, len(repl)+1)
	if a.hasID {
		out = append(out, bson.E{Key: "_id", Value: a.id})
	}
	for _, e := range repl {
		if e.Key == "_id" {
			if a.hasID {
				if !strictEqual(e.Value, a.id) {
					return nil, mongoerr.New(mongoerr.ImmutableField,
						"After applying the update, the (immutable) field '_id' was found to have been altered to _id: %s", formatValue(e.Value))
				}
				continue
			}
			out = append(bson.D{e}, out...)
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

func (a *applier) note(path string, v any) {
	if a.desc.UpdatedFields == nil {
		a.desc.UpdatedFields = make(bson.D, 0, 4)
	}
	a.desc.UpdatedFields = append(a.desc.UpdatedFields, bson.E{Key: path, Value: v})
}

func (a *applier) idString() string {
	if !a.hasID {
		return "{no id}"
	}
	return formatElem("_id", a.id)
}

// applyDoc applies the children of n to document d. record is false inside newly created
// subtrees, whose creation is recorded once at their root.
func (a *applier) applyDoc(n *updNode, d bson.D, prefix string, record bool) (bson.D, bool, error) {
	out := d
	copied := false
	changed := false
	children, err := a.resolve(n, prefix)
	if err != nil {
		return nil, false, err
	}
	for _, c := range children {
		path := prefix + c.name
		idx := -1
		for i := range out {
			if out[i].Key == c.name {
				idx = i
				break
			}
		}
		var old any
		if idx >= 0 {
			old = out[idx].Value
		}
		nv, act, err := a.applyNode(c, old, idx >= 0, path, record)
		if err != nil {
			return nil, false, err
		}
		if act == actNone {
			continue
		}
		if !copied {
			out = append(make(bson.D, 0, len(d)+len(n.children)), out...)
			copied = true
		}
		changed = true
		switch {
		case act == actRemove:
			out = append(out[:idx], out[idx+1:]...)
			if record {
				a.desc.RemovedFields = append(a.desc.RemovedFields, path)
			}
		case idx >= 0:
			out[idx].Value = nv
		default:
			out = append(out, bson.E{Key: c.name, Value: nv})
			if record {
				a.note(path, nv)
			}
		}
	}
	return out, changed, nil
}

type action uint8

const (
	actNone action = iota
	actSet
	actRemove
)

// applyNode computes the new value of one field (present tells whether it exists). Updates
// of existing values are recorded here; creations and removals by the caller.
func (a *applier) applyNode(c *updNode, old any, present bool, path string, record bool) (any, action, error) {
	if c.leaf != nil {
		return a.applyLeaf(c.leaf, old, present, path, record)
	}
	if c.arrayNode() {
		arr, ok := old.(bson.A)
		switch {
		case !present:
			return nil, actNone, mongoerr.BadValuef("The path '%s' must exist in the document in order to apply array updates.", path)
		case !ok:
			return nil, actNone, mongoerr.BadValuef("Cannot apply array updates to non-array element %s: %s", c.name, formatValue(old))
		}
		out, ch, err := a.applyPlaceholders(c, arr, path, record)
		if err != nil || !ch {
			return nil, actNone, err
		}
		return out, actSet, nil
	}
	if !present {
		if !c.creates(a.isInsert) {
			return nil, actNone, nil
		}
		sub, ch, err := a.applyDoc(c, bson.D{}, path+".", false)
		if err != nil || !ch {
			return nil, actNone, err
		}
		return sub, actSet, nil
	}
	switch x := old.(type) {
	case bson.D:
		sub, ch, err := a.applyDoc(c, x, path+".", record)
		if err != nil || !ch {
			return nil, actNone, err
		}
		return sub, actSet, nil
	case bson.A:
		sub, ch, err := a.applyArray(c, x, path, record)
		if err != nil || !ch {
			return nil, actNone, err
		}
		return sub, actSet, nil
	}
	if name := c.firstCreating(a.isInsert); name != "" {
		return nil, actNone, mongoerr.New(PathNotViable, "Cannot create field '%s' in element %s", name, formatElem(c.name, old))
	}
	return nil, actNone, nil
}

// applyArray applies the children of n, whose names must be array positions, to arr.
func (a *applier) applyArray(n *updNode, arr bson.A, path string, record bool) (bson.A, bool, error) {
	out := arr
	copied := false
	changed := false
	children, err := a.resolve(n, path+".")
	if err != nil {
		return nil, false, err
	}
	for _, c := range children {
		idx, ok := parseIndex(c.name)
		if !ok {
			if c.creates(a.isInsert) {
				return nil, false, mongoerr.New(PathNotViable, "Cannot create field '%s' in element %s", c.name, formatElem(lastPart(path), arr))
			}
			continue
		}
		cpath := path + "." + c.name
		present := idx < len(out)
		var old any
		if present {
			old = out[idx]
		}
		nv, act, err := a.applyNode(c, old, present, cpath, record)
		if err != nil {
			return nil, false, err
		}
		if act == actNone {
			continue
		}
		if !copied {
			out = append(make(bson.A, 0, len(arr)), out...)
			copied = true
		}
		changed = true
		switch {
		case act == actRemove:
			// $unset of an array element leaves null in its place.
			out[idx] = nil
			if record {
				a.note(cpath, nil)
			}
		case present:
			out[idx] = nv
		default:
			if idx-len(out) > maxPadding {
				return nil, false, mongoerr.BadValuef("can't backfill array to larger than %d elements", maxPadding)
			}
			for len(out) < idx {
				if record {
					a.note(path+"."+strconv.Itoa(len(out)), nil)
				}
				out = append(out, nil)
			}
			out = append(out, nv)
			if record {
				a.note(cpath, nv)
			}
		}
	}
	return out, changed, nil
}

// applyPlaceholders applies the $[] and $[id] children of n to the elements of arr they
// select (an element selected by several gets their subtrees merged, failing on overlaps as
// mongod does). Array filters see the elements as they were before the update.
func (a *applier) applyPlaceholders(n *updNode, arr bson.A, path string, record bool) (bson.A, bool, error) {
	out := arr
	copied, changed := false, false
	var sel []*updNode
	for i, elem := range arr {
		sel = sel[:0]
		for _, c := range n.children {
			id := c.name[2 : len(c.name)-1]
			if id == "" || a.filters[id].filter.root.match(bson.D{{Key: id, Value: elem}}) {
				sel = append(sel, c)
			}
		}
		if len(sel) == 0 {
			continue
		}
		idx := strconv.Itoa(i)
		cpath := path + "." + idx
		node := &updNode{name: idx, children: sel[0].children, leaf: sel[0].leaf}
		for _, c := range sel[1:] {
			merged, err := mergeNodes(node, c, cpath)
			if err != nil {
				return nil, false, err
			}
			node = merged
		}
		nv, act, err := a.applyNode(node, elem, true, cpath, record)
		if err != nil {
			return nil, false, err
		}
		if act == actNone {
			continue
		}
		if !copied {
			out = append(make(bson.A, 0, len(arr)), arr...)
			copied = true
		}
		changed = true
		if act == actRemove {
			// $unset of an array element leaves null in its place.
			out[i] = nil
			if record {
				a.note(cpath, nil)
			}
			continue
		}
		out[i] = nv
	}
	return out, changed, nil
}

// mergeNodes combines the subtrees two placeholders apply to one element (named by x),
// failing when both update the same path.
func mergeNodes(x, y *updNode, path string) (*updNode, error) {
	if x.leaf != nil || y.leaf != nil {
		return nil, mongoerr.New(mongoerr.ConflictingUpdateOps, "Update created a conflict at '%s'", path)
	}
	if len(x.children) > 0 && len(y.children) > 0 && x.arrayNode() != y.arrayNode() {
		return nil, mongoerr.New(mongoerr.ConflictingUpdateOps, "Update created a conflict at '%s'", path)
	}
	out := &updNode{name: x.name, children: append([]*updNode(nil), x.children...)}
	for _, yc := range y.children {
		xc := out.child(yc.name)
		if xc == nil {
			out.addChild(yc)
			continue
		}
		merged, err := mergeNodes(xc, yc, path+"."+yc.name)
		if err != nil {
			return nil, err
		}
		for i, c := range out.children {
			if c == xc {
				out.children[i] = merged
			}
		}
	}
	return out, nil
}

// resolve returns n's children with a positional $ child renamed to the matched position,
// in application order; a sibling of the same name is a conflict, as in MongoDB.
func (a *applier) resolve(n *updNode, prefix string) ([]*updNode, error) {
	var pc *updNode
	for _, c := range n.children {
		if c.name == "$" {
			pc = c
		}
	}
	if pc == nil {
		return n.children, nil
	}
	if a.pos == "" {
		return nil, mongoerr.BadValuef("The positional operator did not find the match needed from the query.")
	}
	out := &updNode{}
	for _, c := range n.children {
		if c == pc {
			continue
		}
		if c.name == a.pos {
			return nil, mongoerr.New(mongoerr.ConflictingUpdateOps, "Update created a conflict at '%s%s'", prefix, a.pos)
		}
		out.addChild(c)
	}
	out.addChild(&updNode{name: a.pos, children: pc.children, leaf: pc.leaf})
	return out.children, nil
}

func parseIndex(s string) (int, bool) {
	if !isAllDigits(s) || len(s) > 9 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

func lastPart(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '.' {
			return path[i+1:]
		}
	}
	return path
}

func (a *applier) applyLeaf(op *leafOp, old any, present bool, path string, record bool) (any, action, error) {
	set := func(v any) (any, action, error) {
		if present && record {
			a.note(path, v)
		}
		return v, actSet, nil
	}
	switch op.kind {
	case kSetOnInsert:
		if !a.isInsert {
			return nil, actNone, nil
		}
		fallthrough
	case kSet:
		if present && strictEqual(old, op.value) {
			return nil, actNone, nil
		}
		return set(op.value)
	case kUnset:
		if !present {
			return nil, actNone, nil
		}
		return nil, actRemove, nil
	case kInc:
		if !present {
			return set(op.value)
		}
		if _, isDec := old.(bson.Decimal128); isDec {
			return nil, actNone, mongoerr.NotImplementedf("$inc of a decimal128 field")
		}
		if !bsonval.IsNumber(old) {
			return nil, actNone, mongoerr.TypeMismatchf("Cannot apply $inc to a value of non-numeric type. %s has the field '%s' of non-numeric type %s",
				a.idString(), op.field, typeName(old))
		}
		sum, ok := addNumbers(old, op.value)
		if !ok {
			return nil, actNone, mongoerr.BadValuef("Failed to apply $inc operations to current value ((NumberLong)%d) for document %s",
				old, a.idString())
		}
		if strictEqual(sum, old) {
			return nil, actNone, nil
		}
		return set(sum)
	case kMin, kMax:
		if present {
			c := bsonval.Compare(op.value, old)
			if (op.kind == kMin && c >= 0) || (op.kind == kMax && c <= 0) {
				return nil, actNone, nil
			}
		}
		return set(op.value)
	case kPush, kAddToSet:
		return a.applyAppend(op, old, present, path, record)
	case kPull:
		if !present {
			return nil, actNone, nil
		}
		arr, ok := old.(bson.A)
		if !ok {
			return nil, actNone, mongoerr.BadValuef("Cannot apply $pull to a non-array value")
		}
		kept := make(bson.A, 0, len(arr))
		for _, e := range arr {
			if !op.pull(e) {
				kept = append(kept, e)
			}
		}
		if len(kept) == len(arr) {
			return nil, actNone, nil
		}
		return set(kept)
	}
	return nil, actNone, nil
}

func (a *applier) applyAppend(op *leafOp, old any, present bool, path string, record bool) (any, action, error) {
	var arr bson.A
	if present {
		var ok bool
		if arr, ok = old.(bson.A); !ok {
			if op.kind == kPush {
				return nil, actNone, mongoerr.BadValuef("The field '%s' must be an array but is of type %s in document %s",
					op.field, typeName(old), a.idString())
			}
			return nil, actNone, mongoerr.BadValuef("Cannot apply $addToSet to non-array field. Field named '%s' has non-array type %s",
				op.field, typeName(old))
		}
	}
	out := make(bson.A, len(arr), len(arr)+len(op.each))
	copy(out, arr)
	for _, e := range op.each {
		if op.kind == kAddToSet && containsEqual(out, e) {
			continue
		}
		out = append(out, e)
	}
	if present && len(out) == len(arr) {
		return nil, actNone, nil
	}
	if present && record {
		for i := len(arr); i < len(out); i++ {
			a.note(path+"."+strconv.Itoa(i), out[i])
		}
	}
	return out, actSet, nil
}

func containsEqual(arr bson.A, v any) bool {
	for _, x := range arr {
		if bsonval.Compare(x, v) == 0 {
			return true
		}
	}
	return false
}

// addNumbers adds two numbers as mongod's $inc does: int32+int32 widens to int64 on overflow,
// int64 overflow fails (ok false), and any double makes a double.
func addNumbers(a, b any) (any, bool) {
	x, xInt := intValue(a)
	y, yInt := intValue(b)
	if xInt && yInt {
		_, a32 := a.(int32)
		_, b32 := b.(int32)
		if a32 && b32 {
			s := x + y
			if s >= math.MinInt32 && s <= math.MaxInt32 {
				return int32(s), true
			}
			return s, true
		}
		s := x + y
		if (y > 0 && s < x) || (y < 0 && s > x) {
			return nil, false
		}
		return s, true
	}
	fa, _ := bsonval.ToFloat(a)
	fb, _ := bsonval.ToFloat(b)
	return fa + fb, true
}

func intValue(v any) (int64, bool) {
	switch x := v.(type) {
	case int32:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// StrictEqual reports BSON binary equality of two decoded values: same types, same field
// names and order, same bits (1 and 1.0 differ).
func StrictEqual(a, b any) bool { return strictEqual(a, b) }

// strictEqual is BSON binary equality of values: same types, same field names and order,
// same bits (so 1 and 1.0 differ and NaN equals NaN).
func strictEqual(a, b any) bool {
	switch x := a.(type) {
	case bson.D:
		y, ok := b.(bson.D)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Key != y[i].Key || !strictEqual(x[i].Value, y[i].Value) {
				return false
			}
		}
		return true
	case bson.A:
		y, ok := b.(bson.A)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !strictEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case bson.Binary:
		y, ok := b.(bson.Binary)
		return ok && x.Subtype == y.Subtype && string(x.Data) == string(y.Data)
	case bson.CodeWithScope:
		y, ok := b.(bson.CodeWithScope)
		return ok && x.Code == y.Code && strictEqual(x.Scope, y.Scope)
	case nil:
		return b == nil
	}
	switch b.(type) {
	case bson.D, bson.A, float64, bson.Binary, bson.CodeWithScope, nil:
		return false
	}
	return safeEq(a, b)
}

// safeEq compares two scalar values of comparable dynamic types.
func safeEq(a, b any) bool {
	switch a.(type) {
	case string, int32, int64, bool, bson.ObjectID, bson.DateTime, bson.Timestamp, bson.Regex,
		bson.Symbol, bson.JavaScript, bson.Decimal128, bson.MinKey, bson.MaxKey, bson.Undefined,
		bson.Null, bson.DBPointer, int:
		return a == b
	}
	return typeName(a) == typeName(b) && bsonval.Compare(a, b) == 0
}
