package query

import (
	"sort"
	"strconv"
	"strings"

	"github.com/gameops/rollup/embedded/bsonval"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// DiffDocs describes how after differs from before the way mongod describes a pipeline-style
// update (one computed as a whole document): it computes the $v:2 delta mongod logs for it
// (document_diff_calculator.cpp) and reads that delta as the change-stream diff parser does.
// Fields are compared in order: a field changed in place is set, or diffed when both values
// are documents or both arrays (an array that shrank is a truncatedArrays entry, its changed
// elements "path.index"); a field that moved is removed and re-added (set). A nested diff no
// smaller than its new value is reported as the whole value. ok is false when the delta is
// not smaller than after: mongod then logs a full replacement, which change streams show as
// a replace event.
func DiffDocs(before, after bson.D) (desc UpdateDescription, ok bool) {
	root := diffDoc(before, after, deltaMetadataSize)
	if root == nil {
		return UpdateDescription{}, false
	}
	var p diffPath
	root.describe(&desc, &p)
	return desc, true
}

// deltaMetadataSize is what mongod adds to a delta's size for the "$v" and "diff" fields of
// the oplog entry before comparing it with the post-image (kSizeOfDeltaOplogEntryMetadata).
const deltaMetadataSize = 15

// docDelta is a document node of a $v:2 delta: 'u' updates, 'i' inserts, 'd' deletes and
// 's<field>' sub-diffs. size is the node's BSON size, tracked as mongod tracks it.
type docDelta struct {
	size    int
	updates []bson.E
	inserts []bson.E
	deletes []string
	subs    []subDelta
}

// arrDelta is an array node: 'l' the new length when the array shrank, 'u<i>' element
// updates and 's<i>' element sub-diffs, by ascending index.
type arrDelta struct {
	size   int
	resize int // -1: not truncated
	elems  []subDelta
}

// subDelta is one child of a node: a value set (doc and arr nil) or a sub-diff.
type subDelta struct {
	key   string // field name (document parent)
	idx   int    // element index (array parent)
	value any
	doc   *docDelta
	arr   *arrDelta
}

// Sizes as mongod's ApproxBSONSizeTracker counts them (exact for these node kinds): an
// empty document, an empty array diff ({a: true}), a section wrapper ({u: {}}), 'l' with an
// int32.
const (
	emptyDocDeltaSize = 5
	emptyArrDeltaSize = 9
	sectionSize       = 8
	resizeSize        = 7
)

func (n *docDelta) addUpdate(key string, v any) {
	if len(n.updates) == 0 {
		n.size += sectionSize
	}
	n.size += len(key) + 2 + bsonval.ValueSize(v)
	n.updates = append(n.updates, bson.E{Key: key, Value: v})
}

func (n *docDelta) addInsert(key string, v any) {
	if len(n.inserts) == 0 {
		n.size += sectionSize
	}
	n.size += len(key) + 2 + bsonval.ValueSize(v)
	n.inserts = append(n.inserts, bson.E{Key: key, Value: v})
}

func (n *docDelta) addDelete(key string) {
	if len(n.deletes) == 0 {
		n.size += sectionSize
	}
	n.size += len(key) + 2 + 1
	n.deletes = append(n.deletes, key)
}

// addChanged records a field present in both images with a different value.
func (n *docDelta) addChanged(key string, pre, post any) {
	sub := subDiff(pre, post)
	switch {
	case sub.doc != nil:
		n.size += len(key) + 2 + sub.doc.size + 1
	case sub.arr != nil:
		n.size += len(key) + 2 + sub.arr.size + 1
	default:
		n.addUpdate(key, post)
		return
	}
	sub.key = key
	n.subs = append(n.subs, sub)
}

func (n *arrDelta) addUpdate(i int, v any) {
	n.size += 1 + digits(i) + 2 + bsonval.ValueSize(v)
	n.elems = append(n.elems, subDelta{idx: i, value: v})
}

func (n *arrDelta) addChanged(i int, pre, post any) {
	sub := subDiff(pre, post)
	switch {
	case sub.doc != nil:
		n.size += 1 + digits(i) + 2 + sub.doc.size
	case sub.arr != nil:
		n.size += 1 + digits(i) + 2 + sub.arr.size
	default:
		n.addUpdate(i, post)
		return
	}
	sub.idx = i
	n.elems = append(n.elems, sub)
}

// subDiff diffs two values that differ: both documents or both arrays give a sub-diff (when
// it is smaller than post), anything else none.
func subDiff(pre, post any) subDelta {
	if pd, ok := pre.(bson.D); ok {
		if qd, ok := post.(bson.D); ok {
			return subDelta{doc: diffDoc(pd, qd, 0)}
		}
		return subDelta{}
	}
	if pa, ok := asArray(pre); ok {
		if qa, ok := asArray(post); ok {
			return subDelta{arr: diffArray(pa, qa)}
		}
	}
	return subDelta{}
}

func asArray(v any) (bson.A, bool) {
	switch x := v.(type) {
	case bson.A:
		return x, true
	case []any:
		return bson.A(x), true
	}
	return nil, false
}

// diffDoc is mongod's computeDocDiff: nil when the delta is not smaller than post (padding
// counted in).
func diffDoc(pre, post bson.D, padding int) *docDelta {
	postSize := bsonval.DocSize(post)
	n := &docDelta{size: emptyDocDeltaSize + padding}
	var moved map[string]bool
	i, j := 0, 0
	for i < len(pre) && j < len(post) {
		if postSize < n.size {
			return nil
		}
		p, q := pre[i], post[j]
		if p.Key != q.Key {
			// Removed, or moved: a moved field is inserted again below.
			if moved == nil {
				moved = make(map[string]bool)
			}
			moved[p.Key] = true
			i++
			continue
		}
		if !strictEqual(p.Value, q.Value) {
			n.addChanged(p.Key, p.Value, q.Value)
		}
		i++
		j++
	}
	for ; i < len(pre); i++ {
		n.addDelete(pre[i].Key)
	}
	for ; j < len(post); j++ {
		n.addInsert(post[j].Key, post[j].Value)
		delete(moved, post[j].Key)
	}
	if len(moved) > 0 {
		keys := make([]string, 0, len(moved))
		for k := range moved {
			keys = append(keys, k)
		}
		sort.Strings(keys) // mongod keeps them in a std::set
		for _, k := range keys {
			n.addDelete(k)
		}
	}
	if postSize > n.size {
		return n
	}
	return nil
}

// diffArray is mongod's computeArrayDiff: elements compared by position, the rest of a longer
// post appended as updates, a shorter post a resize.
func diffArray(pre, post bson.A) *arrDelta {
	postSize := bsonval.ValueSize(post)
	n := &arrDelta{size: emptyArrDeltaSize, resize: -1}
	k := 0
	for ; k < len(pre) && k < len(post); k++ {
		if postSize < n.size {
			return nil
		}
		if !strictEqual(pre[k], post[k]) {
			n.addChanged(k, pre[k], post[k])
		}
	}
	for ; k < len(post); k++ {
		n.addUpdate(k, post[k])
	}
	if len(pre) > len(post) {
		n.resize = len(post)
		n.size += resizeSize
	}
	if postSize > n.size {
		return n
	}
	return nil
}

// diffPath is the path of the node being described: its components, and whether each is an
// array index.
type diffPath struct {
	parts []string
	index []bool
}

func (p *diffPath) push(part string, index bool) {
	p.parts = append(p.parts, part)
	p.index = append(p.index, index)
}

func (p *diffPath) pop() {
	p.parts = p.parts[:len(p.parts)-1]
	p.index = p.index[:len(p.index)-1]
}

func (p *diffPath) String() string { return strings.Join(p.parts, ".") }

// note records the current path in DottedPaths when a field name on it holds a dot, which
// makes it ambiguous in a way only the delta can resolve (disambiguatedPaths).
func (p *diffPath) note(desc *UpdateDescription) {
	dotted := false
	for i, s := range p.parts {
		dotted = dotted || (!p.index[i] && strings.Contains(s, "."))
	}
	if !dotted {
		return
	}
	comps := make(bson.A, len(p.parts))
	for i, s := range p.parts {
		comps[i] = s
		if p.index[i] {
			n, _ := strconv.Atoi(s)
			comps[i] = int32(n)
		}
	}
	desc.DottedPaths = append(desc.DottedPaths, bson.E{Key: p.String(), Value: comps})
}

// describe reads a document node as the change-stream parser does: updates and inserts are
// updatedFields, deletes removedFields, then the sub-diffs in order.
func (n *docDelta) describe(desc *UpdateDescription, p *diffPath) {
	for _, set := range [2][]bson.E{n.updates, n.inserts} {
		for _, e := range set {
			p.push(e.Key, false)
			desc.UpdatedFields = append(desc.UpdatedFields, bson.E{Key: p.String(), Value: e.Value})
			p.note(desc)
			p.pop()
		}
	}
	for _, k := range n.deletes {
		p.push(k, false)
		desc.RemovedFields = append(desc.RemovedFields, p.String())
		p.note(desc)
		p.pop()
	}
	for _, s := range n.subs {
		p.push(s.key, false)
		s.describe(desc, p)
		p.pop()
	}
}

func (s subDelta) describe(desc *UpdateDescription, p *diffPath) {
	switch {
	case s.doc != nil:
		s.doc.describe(desc, p)
	case s.arr != nil:
		s.arr.describe(desc, p)
	}
}

// describe reads an array node: a truncation, then the elements by index.
func (n *arrDelta) describe(desc *UpdateDescription, p *diffPath) {
	if n.resize >= 0 {
		desc.TruncatedArrays = append(desc.TruncatedArrays, TruncatedArray{Field: p.String(), NewSize: int32(n.resize)})
		p.note(desc)
	}
	for _, e := range n.elems {
		p.push(strconv.Itoa(e.idx), true)
		if e.doc == nil && e.arr == nil {
			desc.UpdatedFields = append(desc.UpdatedFields, bson.E{Key: p.String(), Value: e.value})
			p.note(desc)
		} else {
			e.describe(desc, p)
		}
		p.pop()
	}
}

func digits(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}
