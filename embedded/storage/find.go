package storage

import (
	"bytes"
	"slices"

	"github.com/gameops/rollup/embedded/bsonval"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// cond is the narrowing a filter allows on one field path: a set of points (equality or $in)
// or one range (from one operator document), each as key-component bytes.
type cond struct {
	path   string
	points [][]byte // sorted, distinct; non-nil (possibly empty) for a point condition
	isPt   bool
	lo, hi []byte // range bounds on the component: [lo, hi); hi nil = end of lo's type class
	lohi   bool   // both a lower and an upper bound came from the operators
	loSet  bool   // lo came from $gt/$gte (else the class start)
}

// narrowable reports whether an equality to v can be narrowed to the index key of v: scalars
// whose equality is exactly key equality and that never match anything else (not null, which
// matches missing; not arrays, documents or regexes, which have other match semantics).
func narrowable(v any) bool {
	switch v.(type) {
	case string, int32, int64, float64, bool, bson.ObjectID, bson.DateTime, bson.Timestamp, bson.Binary:
		return true
	}
	return false
}

// collectConds gathers the top-level (and $and-nested) conditions of a filter.
func collectConds(filter bson.D, out []cond) []cond {
	for _, e := range filter {
		if len(e.Key) > 0 && e.Key[0] == '$' {
			if e.Key == "$and" {
				if arr, ok := e.Value.(bson.A); ok {
					for _, el := range arr {
						if sub, ok := el.(bson.D); ok {
							out = collectConds(sub, out)
						}
					}
				}
			}
			continue
		}
		c, ok := fieldCond(e.Key, e.Value)
		if !ok {
			continue
		}
		out = addCond(out, c)
	}
	return out
}

// addCond keeps one condition per path, preferring points over ranges (any single condition
// alone is a superset; conditions on one path are never intersected, which would be wrong
// for multikey documents).
func addCond(conds []cond, c cond) []cond {
	for i := range conds {
		if conds[i].path == c.path {
			if !conds[i].isPt && c.isPt {
				conds[i] = c
			}
			return conds
		}
	}
	return append(conds, c)
}

// eqNarrowable reports whether an equality to v (or a $in element) can be narrowed: the
// narrowable scalars, and documents (equal exactly when their index keys are equal; a
// multikey entry covers arrays containing the document).
func eqNarrowable(v any) bool {
	if _, ok := v.(bson.D); ok {
		return true
	}
	return narrowable(v)
}

func fieldCond(path string, v any) (cond, bool) {
	if d, ok := v.(bson.D); ok && (len(d) == 0 || len(d[0].Key) == 0 || d[0].Key[0] != '$') {
		// A literal document: equality.
		return cond{path: path, isPt: true, points: [][]byte{bsonval.KeyOf(v)}}, true
	}
	if narrowable(v) {
		return cond{path: path, isPt: true, points: [][]byte{bsonval.KeyOf(v)}}, true
	}
	ops, ok := v.(bson.D)
	if !ok || len(ops) == 0 || len(ops[0].Key) == 0 || ops[0].Key[0] != '$' {
		return cond{}, false
	}
	var rng cond
	haveRange := false
	for _, op := range ops {
		switch op.Key {
		case "$eq":
			if eqNarrowable(op.Value) {
				return cond{path: path, isPt: true, points: [][]byte{bsonval.KeyOf(op.Value)}}, true
			}
		case "$in":
			if c, ok := inCond(path, op.Value); ok {
				return c, true
			}
		case "$gt", "$gte", "$lt", "$lte":
			if !narrowable(op.Value) {
				continue
			}
			k := bsonval.KeyOf(op.Value)
			if haveRange && rng.lo[0] != k[0] {
				// Bounds of different type classes: keep the first class (a superset).
				continue
			}
			if !haveRange {
				rng = cond{path: path, lo: []byte{k[0]}}
				haveRange = true
			}
			// Bounds are inclusive even for $gt/$lt: a superset, robust to values whose key
			// is shared by unequal values.
			if op.Key == "$gt" || op.Key == "$gte" {
				if !rng.loSet || bytes.Compare(k, rng.lo) > 0 {
					rng.lo, rng.loSet = k, true
				}
			} else {
				h := prefixEnd(k)
				if rng.hi == nil || bytes.Compare(h, rng.hi) < 0 {
					rng.hi = h
				}
			}
			rng.lohi = rng.loSet && rng.hi != nil
		}
	}
	return rng, haveRange
}

func inCond(path string, v any) (cond, bool) {
	arr, ok := v.(bson.A)
	if !ok {
		return cond{}, false
	}
	c := cond{path: path, isPt: true, points: make([][]byte, 0, len(arr))}
	for _, el := range arr {
		if !eqNarrowable(el) {
			return cond{}, false
		}
		c.points = append(c.points, bsonval.KeyOf(el))
	}
	c.points = dedupeKeys(c.points)
	return c, true
}

// prefixEnd returns the smallest byte string greater than every string with prefix p
// (nil if none exists).
func prefixEnd(p []byte) []byte {
	out := slices.Clone(p)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i] < 0xFF {
			out[i]++
			return out[:i+1]
		}
	}
	return nil
}

// keyRange is a half-open range [lo, hi) of index entry keys; hi nil = unbounded.
type keyRange struct{ lo, hi []byte }

// plan is how Find scans: a full _id scan (ix == nil) or ranges of one index.
type plan struct {
	ix     *index
	ranges []keyRange
	dedupe bool // a document may be reached more than once
	exact  bool // every range is one full key of a unique index
	score  int
	// rangePath is the field of the range condition on the index field after the points
	// ("" without one), rangeClass the type class of its bounds.
	rangePath  string
	rangeClass byte
}

func findCond(conds []cond, path string) *cond {
	for i := range conds {
		if conds[i].path == path {
			return &conds[i]
		}
	}
	return nil
}

// planFor chooses the index that the conditions constrain the most (leading equality fields,
// then a range on the next field).
// buf is scratch space for the conditions, reused across calls.
func (c *collection) planFor(filter bson.D, buf *[]cond) plan {
	return planOver(c.indexes, filter, buf)
}

// planOver is planFor over a list of indexes (a collection's, or an IndexSet's copy of it).
// Every usable index is scored (chooseIndex) and only the chosen one's key ranges are built:
// a filter that also constrains other indexes (rollup's guarded leaf upserts reach the
// {project, timestamp} index too) does not pay for ranges it would throw away.
func planOver(indexes []*index, filter bson.D, buf *[]cond) plan {
	conds := collectConds(filter, (*buf)[:0])
	*buf = conds
	var best indexChoice
	if len(conds) == 0 {
		return plan{}
	}
	for _, ix := range indexes {
		ch, ok := chooseIndex(ix, conds)
		if !ok {
			continue
		}
		if ch.score > best.score || (ch.score == best.score && best.ix != nil && ch.ix.spec.Unique && !best.ix.spec.Unique) {
			best = ch
		}
	}
	if best.ix == nil {
		return plan{}
	}
	return best.build(conds)
}

// indexChoice is an index's plan as chooseIndex scores it, before its key ranges are built:
// its first npts key fields have point conditions, rng (nil: none) a range on the next one.
type indexChoice struct {
	plan
	npts int
	rng  *cond
}

// chooseIndex scores ix for the conditions: ok is false when they constrain none of its
// leading fields.
func chooseIndex(ix *index, conds []cond) (indexChoice, bool) {
	npts := 0
	combos := 1
	var rng *cond
	for _, e := range ix.spec.Key {
		c := findCond(conds, e.Key)
		if c == nil {
			break
		}
		if !c.isPt {
			rng = c
			break
		}
		if combos*max(len(c.points), 1) > maxPoints {
			break
		}
		combos *= max(len(c.points), 1)
		npts++
		if len(c.points) == 0 {
			break
		}
	}
	if npts == 0 && rng == nil {
		return indexChoice{}, false
	}
	ch := indexChoice{plan: plan{ix: ix, score: 2*npts + 1, dedupe: ix.multikey.Load()}, npts: npts, rng: rng}
	if rng != nil {
		ch.score++
		ch.rangePath, ch.rangeClass = rng.path, rng.lo[0]
	}
	ch.exact = ix.spec.Unique && rng == nil && npts == len(ix.spec.Key)
	return ch, true
}

// build returns the chosen plan with its key ranges.
func (ch indexChoice) build(conds []cond) plan {
	p, ix, rng := ch.plan, ch.ix, ch.rng
	pts := make([]*cond, ch.npts)
	for i := range pts {
		pts[i] = findCond(conds, ix.spec.Key[i].Key)
	}
	single := true
	n := 0
	for _, c := range pts {
		single = single && len(c.points) == 1
		if len(c.points) > 0 {
			n += len(c.points[0])
		}
	}
	if p.exact && single {
		// Fast path: one full key of a unique index.
		k := make([]byte, 0, n)
		for _, c := range pts {
			k = append(k, c.points[0]...)
		}
		p.ranges = []keyRange{{lo: k}}
		return p
	}
	// Cartesian product of the point prefixes, in key order.
	prefixes := [][]byte{nil}
	for _, c := range pts {
		next := make([][]byte, 0, len(prefixes)*len(c.points))
		for _, pre := range prefixes {
			for _, k := range c.points {
				nk := make([]byte, 0, len(pre)+len(k))
				nk = append(append(nk, pre...), k...)
				next = append(next, nk)
			}
		}
		prefixes = next
	}
	for _, pre := range prefixes {
		if rng == nil {
			p.ranges = append(p.ranges, keyRange{lo: pre, hi: prefixEnd(pre)})
			continue
		}
		lo, hi := rng.lo, rng.hi
		if hi == nil {
			hi = []byte{rng.lo[0] + 1}
		}
		if ix.multikey.Load() && rng.lohi {
			// Different array elements may satisfy each bound: keep only the lower bound.
			hi = []byte{rng.lo[0] + 1}
		}
		r := keyRange{lo: append(slices.Clip(pre), lo...), hi: append(slices.Clip(pre), hi...)}
		p.ranges = append(p.ranges, r)
	}
	return p
}

// scan calls fn for each candidate document of p until fn returns false. A yielding Reader's
// scan may release the lock part way (see scanner).
func (c *collection) scan(r *Reader, p plan, fn func(d *Doc) bool) {
	if p.ix == nil {
		s := r.scanner(c.indexes[0].tree)
		defer s.finish()
		s.ascend(nil, nil, func(e entry) bool { return fn(e.doc) })
		return
	}
	var seen map[*Doc]struct{}
	if p.dedupe {
		seen = map[*Doc]struct{}{}
	}
	visit := func(e entry) bool {
		if seen != nil {
			if _, dup := seen[e.doc]; dup {
				return true
			}
			seen[e.doc] = struct{}{}
		}
		return fn(e.doc)
	}
	if p.exact {
		// Fast path: exact unique keys, looked up under the lock.
		for _, r := range p.ranges {
			if e, ok := p.ix.tree.Get(entry{key: r.lo}); ok && !visit(e) {
				return
			}
		}
		return
	}
	s := r.scanner(p.ix.tree)
	defer s.finish()
	for _, r := range p.ranges {
		if !s.ascend(r.lo, r.hi, visit) {
			return
		}
	}
}

// orderedClass reports whether the index keys of values of type class c order exactly as
// MongoDB sorts the values (numbers are left out: unequal numbers may share a key).
func orderedClass(c byte) bool {
	switch int(c) {
	case bsonval.ClassString, bsonval.ClassObjectID, bsonval.ClassDate, bsonval.ClassTimestamp:
		return true
	}
	return false
}

// inOrderOf reports whether scanning p yields every candidate in order of path (ascending;
// descending when scanned backwards): one range of a non-multikey index whose range
// condition is on path, with bounds of a class whose keys order as its values do.
func (p plan) inOrderOf(path string) bool {
	return p.ix != nil && !p.ix.multikey.Load() && !p.exact && len(p.ranges) == 1 && p.rangePath == path &&
		orderedClass(p.rangeClass)
}

// scanDesc is scan backwards, for a plan of one range (see inOrderOf).
func (c *collection) scanDesc(r *Reader, p plan, fn func(d *Doc) bool) {
	rng := p.ranges[0]
	visit := func(e entry) bool {
		if bytes.Compare(e.key, rng.lo) < 0 {
			return false
		}
		if rng.hi != nil && bytes.Compare(e.key, rng.hi) >= 0 {
			return true // only the key equal to hi itself: outside [lo, hi)
		}
		return fn(e.doc)
	}
	s := r.scanner(p.ix.tree)
	defer s.finish()
	s.descend(rng.hi, visit)
}
