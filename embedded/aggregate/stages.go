package aggregate

import (
	"math"
	"sort"
	"strings"

	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/query"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// docStage is a stage that maps each document to one document: $project, $addFields/$set,
// $unset, $replaceRoot/$replaceWith — the stages an update pipeline may hold.
type docStage interface {
	apply(ec *evalCtx) (bson.D, error)
}

// mapRunner runs a docStage.
type mapRunner struct {
	rc   *runContext
	s    docStage
	next processor
}

func (r *mapRunner) push(doc bson.D) (bool, error) {
	out, err := r.s.apply(r.rc.evalOn(doc))
	if err != nil {
		return false, err
	}
	return r.next.push(out)
}

func (r *mapRunner) finish() error { return r.next.finish() }

// ---- $match ----

type matchStage struct {
	filter bson.D
	f      *query.Filter
}

func (pc *parseCtx) parseMatch(arg any) (stage, error) {
	d, ok := arg.(bson.D)
	if !ok {
		return nil, mongoerr.New(15959, "the match filter must be an expression in an object")
	}
	f, err := pc.env.CompileFilter(d)
	if err != nil {
		return nil, err
	}
	return &matchStage{filter: d, f: f}, nil
}

func (m *matchStage) start(_ *runContext, next processor) processor {
	return &matchRunner{f: m.f, next: next}
}

type matchRunner struct {
	f    *query.Filter
	next processor
}

func (r *matchRunner) push(doc bson.D) (bool, error) {
	ok, err := r.f.Match(doc)
	if err != nil || !ok {
		return err == nil, err
	}
	return r.next.push(doc)
}

func (r *matchRunner) finish() error { return r.next.finish() }

// ---- $sort ----

type sortStage struct {
	s *query.Sort
	// limit > 0 when a $limit directly follows: only the first limit documents are kept.
	limit int64
}

func (pc *parseCtx) parseSort(arg any) (stage, error) {
	d, ok := arg.(bson.D)
	if !ok {
		return nil, mongoerr.New(15973, "the $sort key specification must be an object")
	}
	if len(d) == 0 {
		return nil, mongoerr.New(15976, "$sort stage must have at least one sort key")
	}
	s, err := query.CompileSort(d)
	if err != nil {
		return nil, err
	}
	return &sortStage{s: s}, nil
}

// fuseSortLimit lets a $sort keep only as many documents as the $limit right after it needs
// (MongoDB's top-k sort), which bounds its memory.
func fuseSortLimit(stages []stage) []stage {
	for i := 0; i+1 < len(stages); i++ {
		s, ok := stages[i].(*sortStage)
		if !ok {
			continue
		}
		if l, ok := stages[i+1].(*limitStage); ok {
			fused := *s
			fused.limit = l.n
			stages[i] = &fused
		}
	}
	return stages
}

type sortItem struct {
	doc  bson.D
	size int64
}

type sortRunner struct {
	st   *sortStage
	next processor
	mem  *memBudget
	buf  []sortItem
}

func (s *sortStage) start(rc *runContext, next processor) processor {
	return &sortRunner{st: s, next: next, mem: rc.budget("$sort")}
}

func (r *sortRunner) sortBuf() {
	cmp := r.st.s.Compare
	sort.SliceStable(r.buf, func(i, j int) bool { return cmp(r.buf[i].doc, r.buf[j].doc) < 0 })
}

func (r *sortRunner) push(doc bson.D) (bool, error) {
	size := approxSize(doc)
	r.buf = append(r.buf, sortItem{doc: doc, size: size})
	r.mem.used += size
	if k := r.st.limit; k > 0 && int64(len(r.buf)) >= max(2*k, 16) {
		r.truncate()
	}
	if err := r.mem.add(0); err != nil {
		return false, err
	}
	return true, nil
}

// truncate keeps the first limit documents in sort order. Stability is preserved because the
// kept prefix stays ahead of later arrivals.
func (r *sortRunner) truncate() {
	r.sortBuf()
	k := int(r.st.limit)
	if len(r.buf) <= k {
		return
	}
	var freed int64
	for _, it := range r.buf[k:] {
		freed += it.size
	}
	clear(r.buf[k:])
	r.buf = r.buf[:k]
	r.mem.used -= freed
}

func (r *sortRunner) finish() error {
	if r.st.limit > 0 {
		r.truncate()
	} else {
		r.sortBuf()
	}
	buf := r.buf
	r.buf = nil
	for _, it := range buf {
		more, err := r.next.push(it.doc)
		if err != nil {
			return err
		}
		if !more {
			break
		}
	}
	return r.next.finish()
}

// ---- $limit and $skip ----

// parseIntegerArg is BSONElement::parseIntegerElementToNonNegativeLong, reporting failures as
// "invalid argument to <stage> stage: <reason>" with the given code.
func parseIntegerArg(stageName string, code int32, arg any) (int64, error) {
	bad := func(reason string) error {
		return mongoerr.New(code, "invalid argument to %s stage: %s%s: %s", stageName, reason, stageName, renderValue(normalizeLiteral(arg)))
	}
	var n int64
	switch x := arg.(type) {
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	case float64:
		if math.IsNaN(x) {
			return 0, bad("Expected an integer, but found NaN in: ")
		}
		if x >= two63 || x < -two63 {
			return 0, bad("Cannot represent as a 64-bit integer: ")
		}
		if x != math.Trunc(x) {
			return 0, bad("Expected an integer: ")
		}
		n = int64(x)
	case bson.Decimal128:
		return 0, mongoerr.NotImplementedf("Decimal128 argument to %s", stageName)
	default:
		return 0, bad("Expected a number in: ")
	}
	if n < 0 {
		return 0, bad("Expected a non-negative number in: ")
	}
	return n, nil
}

type limitStage struct{ n int64 }

func (pc *parseCtx) parseLimit(arg any) (stage, error) {
	n, err := parseIntegerArg("$limit", 5107201, arg)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, mongoerr.New(15958, "the limit must be positive")
	}
	return &limitStage{n: n}, nil
}

func (l *limitStage) start(_ *runContext, next processor) processor {
	return &limitRunner{left: l.n, next: next}
}

type limitRunner struct {
	left int64
	next processor
}

func (r *limitRunner) push(doc bson.D) (bool, error) {
	if r.left <= 0 {
		return false, nil
	}
	r.left--
	more, err := r.next.push(doc)
	return more && r.left > 0, err
}

func (r *limitRunner) finish() error { return r.next.finish() }

type skipStage struct{ n int64 }

func (pc *parseCtx) parseSkip(arg any) (stage, error) {
	n, err := parseIntegerArg("$skip", 5107200, arg)
	if err != nil {
		return nil, err
	}
	return &skipStage{n: n}, nil
}

func (s *skipStage) start(_ *runContext, next processor) processor {
	return &skipRunner{left: s.n, next: next}
}

type skipRunner struct {
	left int64
	next processor
}

func (r *skipRunner) push(doc bson.D) (bool, error) {
	if r.left > 0 {
		r.left--
		return true, nil
	}
	return r.next.push(doc)
}

func (r *skipRunner) finish() error { return r.next.finish() }

// ---- $count ----

// countStage is $count: name, i.e. {$group: {_id: null, name: {$sum: 1}}} then
// {$project: {_id: 0}}; no input produces no output.
type countStage struct{ field string }

func (pc *parseCtx) parseCount(arg any) (stage, error) {
	s, ok := arg.(string)
	switch {
	case !ok:
		return nil, mongoerr.New(40156, "the count field must be a non-empty string")
	case s == "":
		return nil, mongoerr.New(40157, "the count field must be a non-empty string")
	case s[0] == '$':
		return nil, mongoerr.New(40158, "the count field cannot be a $-prefixed path")
	case strings.Contains(s, "\x00"):
		return nil, mongoerr.New(40159, "the count field cannot contain a null byte")
	case strings.Contains(s, "."):
		return nil, mongoerr.New(40160, "the count field cannot contain '.'")
	}
	return &countStage{field: s}, nil
}

func (c *countStage) start(_ *runContext, next processor) processor {
	return &countRunner{field: c.field, next: next}
}

type countRunner struct {
	field string
	n     int64
	next  processor
}

func (r *countRunner) push(bson.D) (bool, error) {
	r.n++
	return true, nil
}

func (r *countRunner) finish() error {
	if r.n > 0 {
		if _, err := r.next.push(bson.D{{Key: r.field, Value: intOrLong(r.n)}}); err != nil {
			return err
		}
	}
	return r.next.finish()
}

// ---- $unwind ----

type unwindStage struct {
	path      []string
	preserve  bool
	indexPath []string
}

func (pc *parseCtx) parseUnwind(arg any) (stage, error) {
	var pathStr string
	u := &unwindStage{}
	switch x := arg.(type) {
	case string:
		pathStr = x
	case bson.D:
		for _, e := range x {
			switch e.Key {
			case "path":
				s, ok := e.Value.(string)
				if !ok {
					return nil, mongoerr.New(28808, "expected a string as the path for $unwind stage, got %s", typeName(normalizeLiteral(e.Value)))
				}
				pathStr = s
			case "preserveNullAndEmptyArrays":
				b, ok := e.Value.(bool)
				if !ok {
					return nil, mongoerr.New(28809, "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, got %s", typeName(normalizeLiteral(e.Value)))
				}
				u.preserve = b
			case "includeArrayIndex":
				s, ok := e.Value.(string)
				if !ok || s == "" {
					return nil, mongoerr.New(28810, "expected a non-empty string for the includeArrayIndex  option to $unwind stage, got %s", typeName(normalizeLiteral(e.Value)))
				}
				if s[0] == '$' {
					return nil, mongoerr.New(28822, "includeArrayIndex option to $unwind stage should not be prefixed with a '$': %s", s)
				}
				p, err := parseFieldPath(s)
				if err != nil {
					return nil, err
				}
				u.indexPath = p
			default:
				return nil, mongoerr.New(28811, "unrecognized option to $unwind stage: %s", e.Key)
			}
		}
	default:
		return nil, mongoerr.New(15981, "expected either a string or an object as specification for $unwind stage, got %s", typeName(normalizeLiteral(arg)))
	}
	if pathStr == "" {
		return nil, mongoerr.New(28812, "no path specified to $unwind stage")
	}
	if pathStr[0] != '$' {
		return nil, mongoerr.New(28818, "path option to $unwind stage should be prefixed with a '$': %s", pathStr)
	}
	p, err := parseFieldPath(pathStr[1:])
	if err != nil {
		return nil, err
	}
	u.path = p
	return u, nil
}

func (u *unwindStage) start(_ *runContext, next processor) processor {
	return &unwindRunner{u: u, next: next}
}

type unwindRunner struct {
	u    *unwindStage
	next processor
}

// push is DocumentSourceUnwind::Unwinder: each element of an array replaces the array in its
// own copy of the document; a missing, null or empty array drops the document unless
// preserveNullAndEmptyArrays (an empty array's field is then removed); any other value passes
// through. includeArrayIndex gets the long index, or null when nothing was unwound.
func (r *unwindRunner) push(doc bson.D) (bool, error) {
	u := r.u
	v, _ := nestedDocField(doc, u.path)
	arr, isArr := v.(bson.A)
	switch {
	case isArr && len(arr) > 0:
		for i, e := range arr {
			out := setNested(doc, u.path, e)
			if u.indexPath != nil {
				out = setNested(out, u.indexPath, int64(i))
			}
			more, err := r.next.push(out)
			if err != nil || !more {
				return more, err
			}
		}
		return true, nil
	case isArr:
		if !u.preserve {
			return true, nil
		}
		doc = removeNested(doc, u.path)
	case nullish(v):
		if !u.preserve {
			return true, nil
		}
	}
	if u.indexPath != nil {
		doc = setNested(doc, u.indexPath, nil)
	}
	return r.next.push(doc)
}

func (r *unwindRunner) finish() error { return r.next.finish() }

// nestedDocField follows path through embedded documents only (Document::getNestedField):
// an array along the way yields missing.
func nestedDocField(d bson.D, path []string) (any, bool) {
	for i, p := range path {
		v, ok := getField(d, p)
		if !ok {
			return missingValue{}, false
		}
		if i == len(path)-1 {
			return v, true
		}
		sub, ok := v.(bson.D)
		if !ok {
			return missingValue{}, false
		}
		d = sub
	}
	return missingValue{}, false
}

// setNested returns a copy of d with path set to v, copying only the documents along the
// path. Existing fields keep their position, new ones are appended, and non-document values
// along the path are replaced by documents (MutableDocument::setNestedField).
func setNested(d bson.D, path []string, v any) bson.D {
	out := make(bson.D, len(d), len(d)+1)
	copy(out, d)
	for i := range out {
		if out[i].Key == path[0] {
			if len(path) == 1 {
				out[i].Value = v
			} else {
				sub, _ := out[i].Value.(bson.D)
				out[i].Value = setNested(sub, path[1:], v)
			}
			return out
		}
	}
	if len(path) == 1 {
		return append(out, bson.E{Key: path[0], Value: v})
	}
	return append(out, bson.E{Key: path[0], Value: setNested(nil, path[1:], v)})
}

// removeNested returns d without the field at path (through documents only), copying only
// the documents along the path; d itself is returned when the field does not exist.
func removeNested(d bson.D, path []string) bson.D {
	for i := range d {
		if d[i].Key != path[0] {
			continue
		}
		if len(path) == 1 {
			out := make(bson.D, 0, len(d)-1)
			out = append(out, d[:i]...)
			return append(out, d[i+1:]...)
		}
		sub, ok := d[i].Value.(bson.D)
		if !ok {
			return d
		}
		out := make(bson.D, len(d))
		copy(out, d)
		out[i].Value = removeNested(sub, path[1:])
		return out
	}
	return d
}

// ---- $replaceRoot and $replaceWith ----

// replaceRootStage is $replaceRoot {newRoot: expr} or its alias $replaceWith: expr.
type replaceRootStage struct {
	newRoot expr
	what    string // how errors name the expression
}

func (pc *parseCtx) parseReplaceRoot(name string, arg any) (stage, error) {
	spec := arg
	if name == "$replaceRoot" {
		d, ok := arg.(bson.D)
		if !ok {
			return nil, mongoerr.New(40229, "expected an object as specification for $replaceRoot stage, got %s", typeName(normalizeLiteral(arg)))
		}
		found := false
		for _, e := range d {
			if e.Key != "newRoot" {
				return nil, mongoerr.New(40415, "BSON field '$replaceRoot.%s' is an unknown field.", e.Key)
			}
			spec, found = e.Value, true
		}
		if !found {
			return nil, mongoerr.New(40414, "BSON field '$replaceRoot.newRoot' is missing but a required field")
		}
	}
	ex, err := pc.parseOperand(spec)
	if err != nil {
		return nil, err
	}
	what := "'replacement document'"
	if name == "$replaceRoot" {
		what = "'newRoot' expression"
	}
	return &replaceRootStage{newRoot: ex, what: what}, nil
}

func (s *replaceRootStage) start(rc *runContext, next processor) processor {
	return &mapRunner{rc: rc, s: s, next: next}
}

// apply evaluates the new root, which must be a document.
func (s *replaceRootStage) apply(ec *evalCtx) (bson.D, error) {
	v, err := s.newRoot.eval(ec)
	if err != nil {
		return nil, err
	}
	d, ok := v.(bson.D)
	if !ok {
		return nil, mongoerr.New(40228, "%s must evaluate to an object, but resulting value was: %s. Type of resulting value: '%s'. Input document: %s",
			s.what, renderValue(v), typeName(v), renderValue(ec.root))
	}
	return d, nil
}
