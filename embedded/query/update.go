package query

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// Codes of update errors that mongoerr does not name.
const (
	// EmptyFieldName is mongod's code for an empty update path component.
	EmptyFieldName int32 = 56
	// PathNotViable is mongod's code for an update path that would change a field's type.
	PathNotViable int32 = 28
)

// maxPadding is mongod's cap on the nulls added when setting past the end of an array.
const maxPadding = 1500000

// Update is a compiled update document: either update operators or a replacement document.
// It is immutable and safe for concurrent use.
type Update struct {
	replacement bson.D
	isRepl      bool
	// positional is set when a path uses the positional $ (ApplyPosition resolves it).
	positional bool
	root       *updNode
	idPath     string // first update path that touches _id, for the ImmutableField message
	// filters are the statement's arrayFilters by identifier ($[id] path components).
	filters map[string]*arrayFilter
}

// arrayFilter is one compiled entry of an update's arrayFilters: elements e of an array for
// which {id: e} matches filter are updated through $[id].
type arrayFilter struct {
	id     string
	filter *Filter
	used   bool
}

// UpdateDescription describes a change as a change-stream update event does: the dotted
// paths set (with their new values), the dotted paths removed and the arrays truncated (only
// pipeline-style updates truncate; an update operator reports the whole array set).
// DottedPaths holds, for the paths above that pass through a field name containing a dot,
// their components (array indices as int32): only the update knows where such a path splits.
type UpdateDescription struct {
	UpdatedFields   bson.D
	RemovedFields   []string
	TruncatedArrays []TruncatedArray
	DottedPaths     bson.D
	// Replacement reports a change mongod logs as a full replacement, which change streams
	// show as a replace event (a pipeline-style update whose delta is not smaller than the
	// new document).
	Replacement bool
}

// TruncatedArray is an array an update shortened to NewSize elements.
type TruncatedArray struct {
	Field   string
	NewSize int32
}

type opKind uint8

const (
	kSet opKind = iota
	kSetOnInsert
	kUnset
	kInc
	kMin
	kMax
	kPush
	kAddToSet
	kPull
)

var opKinds = map[string]opKind{
	"$set": kSet, "$setOnInsert": kSetOnInsert, "$unset": kUnset, "$inc": kInc, "$min": kMin,
	"$max": kMax, "$push": kPush, "$addToSet": kAddToSet, "$pull": kPull,
}

// leafOp is one operator applied to one path.
type leafOp struct {
	kind  opKind
	name  string // operator name, e.g. "$inc"
	path  string
	value any
	each  bson.A              // $push / $addToSet elements
	pull  func(elem any) bool // $pull condition
	field string              // last path component
}

// updNode is a node of the update tree: its children are kept in mongod's application order
// (numeric names numerically, others bytewise). The children of one node are either all
// field names (an object node) or all array placeholders $[] and $[id] (an array node,
// applied to every element of an array, or to those its array filter matches).
type updNode struct {
	name     string
	children []*updNode
	leaf     *leafOp
}

// isArrayPlaceholder reports the all-positional $[] and filtered $[id] path components.
func isArrayPlaceholder(name string) bool {
	return strings.HasPrefix(name, "$[") && strings.HasSuffix(name, "]")
}

// arrayNode reports whether n's children are array placeholders.
func (n *updNode) arrayNode() bool {
	return len(n.children) > 0 && isArrayPlaceholder(n.children[0].name)
}

// lessField is mongod's cmpPathsAndArrayIndexes: numeric field names in numeric order, all
// others lexicographically.
func lessField(a, b string) bool {
	if len(a) != len(b) && isAllDigits(a) && isAllDigits(b) {
		return len(a) < len(b)
	}
	return a < b
}

// CompileUpdate compiles an update: an operator document ($set, $setOnInsert, $unset, $inc,
// $min, $max, $push, $addToSet, $pull, $currentDate) or a replacement document (no
// $-prefixed keys). An empty document is, as for mongod, a replacement by an empty document.
func CompileUpdate(update bson.D) (*Update, error) { return CompileUpdateEnv(update, nil, nil) }

// CompileUpdateEnv is CompileUpdate for a statement with arrayFilters (nil for none), which
// the update's $[id] path components use, and with env's clock for $currentDate.
func CompileUpdateEnv(update bson.D, arrayFilters bson.A, env *Env) (*Update, error) {
	if len(update) == 0 || !strings.HasPrefix(update[0].Key, "$") {
		if len(arrayFilters) > 0 {
			return nil, mongoerr.FailedToParsef("arrayFilters may not be specified for replacement-style updates")
		}
		return compileReplacement(update)
	}
	filters, err := compileArrayFilters(arrayFilters)
	if err != nil {
		return nil, err
	}
	u := &Update{root: &updNode{}, filters: filters}
	for _, e := range update {
		kind, known := opKinds[e.Key]
		if e.Key == "$currentDate" {
			kind, known = kSet, true
		}
		if !known {
			switch e.Key {
			case "$rename", "$mul", "$pop", "$pullAll", "$bit":
				return nil, mongoerr.NotImplementedf("update operator %s", e.Key)
			}
			return nil, mongoerr.FailedToParsef("Unknown modifier: %s. Expected a valid update modifier or pipeline-style update specified as an array", e.Key)
		}
		fields, ok := e.Value.(bson.D)
		if !ok {
			return nil, mongoerr.FailedToParsef("Modifiers operate on fields but we found type %s instead. For example: {$mod: {<field>: ...}} not %s",
				typeName(e.Value), formatElem(e.Key, e.Value))
		}
		for _, f := range fields {
			parts := splitPath(f.Key)
			v := f.Value
			if e.Key == "$currentDate" {
				if v, err = currentDateValue(f.Key, v, env); err != nil {
					return nil, err
				}
			}
			op, err := compileLeaf(kind, e.Key, f.Key, parts, v)
			if err != nil {
				return nil, err
			}
			if err := u.root.insert(parts, op, filters); err != nil {
				return nil, err
			}
			if u.idPath == "" && (f.Key == "_id" || strings.HasPrefix(f.Key, "_id.")) {
				u.idPath = f.Key
			}
			if slices.Contains(parts, "$") {
				u.positional = true
			}
		}
	}
	for _, af := range filters {
		if !af.used {
			return nil, mongoerr.FailedToParsef("The array filter for identifier '%s' was not used in the update %s", af.id, formatValue(update))
		}
	}
	return u, nil
}

// currentDateValue is the value $currentDate sets: true (or false) and {$type: "date"} set
// env's date, {$type: "timestamp"} its cluster time.
func currentDateValue(path string, v any, env *Env) (any, error) {
	switch x := v.(type) {
	case bool:
		return bson.NewDateTimeFromTime(env.now()), nil
	case bson.D:
		if len(x) != 1 || x[0].Key != "$type" {
			return nil, mongoerr.BadValuef("The only valid field of the option is '$type': {$currentDate: {field : {$type: 'date/timestamp'}}}")
		}
		switch x[0].Value {
		case "date":
			return bson.NewDateTimeFromTime(env.now()), nil
		case "timestamp":
			return env.clusterTime(), nil
		}
		return nil, mongoerr.BadValuef("The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}")
	}
	return nil, mongoerr.BadValuef("%s is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({$type: 'timestamp/date'}).", typeName(v))
}

// compileArrayFilters compiles a statement's arrayFilters. Each is a filter whose top-level
// paths all start with the same identifier (a lowercase letter, then letters and digits).
func compileArrayFilters(arr bson.A) (map[string]*arrayFilter, error) {
	if len(arr) == 0 {
		return nil, nil
	}
	out := make(map[string]*arrayFilter, len(arr))
	for _, v := range arr {
		d, ok := v.(bson.D)
		if !ok {
			return nil, mongoerr.TypeMismatchf("BSON field 'arrayFilters' must be an array of objects, found %s", typeName(v))
		}
		id, err := arrayFilterID(d)
		if err != nil {
			return nil, err
		}
		if _, dup := out[id]; dup {
			return nil, mongoerr.FailedToParsef("Found multiple array filters with the same top-level field name %s", id)
		}
		p := &parser{exprErr: mongoerr.New(224, "$expr is not allowed in the context of an array filter")}
		n, err := p.parseTop(d)
		if err != nil {
			return nil, err
		}
		out[id] = &arrayFilter{id: id, filter: &Filter{root: n}}
	}
	return out, nil
}

// arrayFilterID returns the identifier an array filter's top-level paths share.
func arrayFilterID(d bson.D) (string, error) {
	id := ""
	var collect func(d bson.D) error
	collect = func(d bson.D) error {
		for _, e := range d {
			switch e.Key {
			case "$and", "$or", "$nor":
				arr, _ := e.Value.(bson.A)
				for _, x := range arr {
					if sub, ok := x.(bson.D); ok {
						if err := collect(sub); err != nil {
							return err
						}
					}
				}
				continue
			}
			if strings.HasPrefix(e.Key, "$") {
				continue
			}
			first, _, _ := strings.Cut(e.Key, ".")
			switch {
			case id == "":
				id = first
			case id != first:
				return mongoerr.FailedToParsef("Error parsing array filter :: caused by :: Expected a single top-level field name, found '%s' and '%s'", id, first)
			}
		}
		return nil
	}
	if err := collect(d); err != nil {
		return "", err
	}
	if id == "" {
		return "", mongoerr.FailedToParsef("Cannot use an expression without a top-level field name in arrayFilters")
	}
	if !validArrayFilterID(id) {
		return "", mongoerr.BadValuef("Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found '%s'", id)
	}
	return id, nil
}

func validArrayFilterID(id string) bool {
	if id == "" || id[0] < 'a' || id[0] > 'z' {
		return false
	}
	for i := 1; i < len(id); i++ {
		if !isAlnum(id[i]) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func compileReplacement(update bson.D) (*Update, error) {
	for _, e := range update {
		if strings.HasPrefix(e.Key, "$") {
			return nil, mongoerr.New(mongoerr.DollarPrefixedFieldName,
				"The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.", e.Key, e.Key)
		}
	}
	return &Update{isRepl: true, replacement: deepNormalize(update).(bson.D)}, nil
}

// IsReplacement reports whether the update is a replacement document.
func (u *Update) IsReplacement() bool { return u.isRepl }

func validatePath(path string, parts []string) error {
	if path == "" {
		return mongoerr.New(EmptyFieldName, "An empty update path is not valid.")
	}
	seen := false
	for i, part := range parts {
		switch {
		case part == "":
			return mongoerr.New(EmptyFieldName, "The update path '%s' contains an empty field name, which is not allowed.", path)
		case part == "$":
			if i == 0 {
				return mongoerr.BadValuef("Cannot have positional (i.e. '$') element in the first position in path '%s'", path)
			}
			if seen {
				return mongoerr.BadValuef("Too many positional (i.e. '$') elements found in path '%s'", path)
			}
			seen = true
		case isArrayPlaceholder(part):
		case strings.HasPrefix(part, "$"):
			return mongoerr.New(mongoerr.DollarPrefixedFieldName, "The dollar ($) prefixed field '%s' in '%s' is not valid for storage.", part, path)
		}
	}
	return nil
}

func compileLeaf(kind opKind, name, path string, parts []string, v any) (*leafOp, error) {
	if err := validatePath(path, parts); err != nil {
		return nil, err
	}
	op := &leafOp{kind: kind, name: name, path: path, value: deepNormalize(v), field: parts[len(parts)-1]}
	switch kind {
	case kInc:
		switch op.value.(type) {
		case int32, int64, float64:
		case bson.Decimal128:
			return nil, mongoerr.NotImplementedf("$inc with a decimal128 value")
		default:
			return nil, mongoerr.TypeMismatchf("Cannot increment with non-numeric argument: %s", formatElem(path, op.value))
		}
	case kPush:
		return op, compilePush(op)
	case kAddToSet:
		return op, compileAddToSet(op)
	case kPull:
		return op, compilePull(op)
	}
	return op, nil
}

func compilePush(op *leafOp) error {
	d, ok := op.value.(bson.D)
	if !ok {
		op.each = bson.A{op.value}
		return nil
	}
	if _, hasEach := bsonval.Get(d, "$each"); !hasEach {
		op.each = bson.A{op.value}
		return nil
	}
	for _, e := range d {
		switch e.Key {
		case "$each":
			arr, ok := e.Value.(bson.A)
			if !ok {
				return mongoerr.BadValuef("The argument to $each in $push must be an array but it was of type: %s", typeName(e.Value))
			}
			op.each = arr
		case "$slice", "$sort", "$position":
			return mongoerr.NotImplementedf("$push modifier %s", e.Key)
		default:
			return mongoerr.BadValuef("Unrecognized clause in $push: %s", e.Key)
		}
	}
	return nil
}

func compileAddToSet(op *leafOp) error {
	d, ok := op.value.(bson.D)
	if !ok || len(d) == 0 || d[0].Key != "$each" {
		op.each = bson.A{op.value}
		return nil
	}
	if len(d) > 1 {
		return mongoerr.BadValuef("Found unexpected fields after $each in $addToSet: %s", formatValue(d))
	}
	arr, ok := d[0].Value.(bson.A)
	if !ok {
		return mongoerr.BadValuef("The argument to $each in $addToSet must be an array but it was of type %s", typeName(d[0].Value))
	}
	op.each = arr
	return nil
}

func compilePull(op *leafOp) error {
	switch x := op.value.(type) {
	case bson.Regex:
		return mongoerr.NotImplementedf("$pull with a regular expression")
	case bson.D:
		if ops, isOps := isOperatorDoc(x); isOps && !isTopLevelOp(ops[0].Key) {
			// Conditions on the element itself: match {"": elem} against {"": cond}.
			n, err := parseField("", x)
			if err != nil {
				return err
			}
			op.pull = func(elem any) bool { return n.match(bson.D{{Key: "", Value: elem}}) }
			return nil
		}
		n, err := (&parser{}).parseTop(x)
		if err != nil {
			return err
		}
		op.pull = func(elem any) bool {
			d, ok := elem.(bson.D)
			return ok && n.match(d)
		}
		return nil
	}
	v := op.value
	op.pull = func(elem any) bool { return bsonval.Compare(elem, v) == 0 }
	return nil
}

// insert adds a leaf at parts, failing as mongod does when two paths overlap, when a node
// would hold both field names and array placeholders, or when $[id] has no array filter.
func (n *updNode) insert(parts []string, leaf *leafOp, filters map[string]*arrayFilter) error {
	cur := n
	for i, part := range parts {
		child := cur.child(part)
		switch {
		case child == nil:
			child = &updNode{name: part}
			if isArrayPlaceholder(part) {
				if i == 0 {
					return mongoerr.BadValuef("Cannot have array filter identifier (i.e. '$[<id>]') element in the first position in path '%s'", leaf.path)
				}
				if id := part[2 : len(part)-1]; id != "" {
					af := filters[id]
					if af == nil {
						return mongoerr.BadValuef("No array filter found for identifier '%s' in path '%s'", id, leaf.path)
					}
					af.used = true
				}
			}
			if len(cur.children) > 0 && isArrayPlaceholder(part) != cur.arrayNode() {
				return mongoerr.New(mongoerr.ConflictingUpdateOps, "Updating the path '%s' would create a conflict at '%s'",
					leaf.path, strings.Join(parts[:i], "."))
			}
			cur.addChild(child)
		case child.leaf != nil || i == len(parts)-1:
			return mongoerr.New(mongoerr.ConflictingUpdateOps, "Updating the path '%s' would create a conflict at '%s'",
				leaf.path, strings.Join(parts[:i+1], "."))
		}
		cur = child
	}
	cur.leaf = leaf
	return nil
}

func (n *updNode) child(name string) *updNode {
	for _, c := range n.children {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (n *updNode) addChild(c *updNode) {
	i := len(n.children)
	for i > 0 && lessField(c.name, n.children[i-1].name) {
		i--
	}
	n.children = append(n.children, nil)
	copy(n.children[i+1:], n.children[i:])
	n.children[i] = c
}

// creates reports whether applying the subtree to a missing field would create something.
func (n *updNode) creates(isInsert bool) bool {
	if n.leaf != nil {
		switch n.leaf.kind {
		case kUnset, kPull:
			return false
		case kSetOnInsert:
			return isInsert
		}
		return true
	}
	for _, c := range n.children {
		if c.creates(isInsert) {
			return true
		}
	}
	return false
}

// firstCreating returns the name of the first child that would create a field.
func (n *updNode) firstCreating(isInsert bool) string {
	for _, c := range n.children {
		if c.creates(isInsert) {
			return c.name
		}
	}
	return ""
}

// deepNormalize copies a value, converting Go ints and []any to decoded BSON types.
func deepNormalize(v any) any {
	switch x := v.(type) {
	case bson.D:
		out := make(bson.D, len(x))
		for i, e := range x {
			out[i] = bson.E{Key: e.Key, Value: deepNormalize(e.Value)}
		}
		return out
	case bson.A:
		out := make(bson.A, len(x))
		for i, e := range x {
			out[i] = deepNormalize(e)
		}
		return out
	case []any:
		return deepNormalize(bson.A(x))
	case bson.Binary:
		return bson.Binary{Subtype: x.Subtype, Data: append([]byte(nil), x.Data...)}
	}
	return bsonval.Normalize(v)
}
