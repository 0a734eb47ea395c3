package query

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/gameops/rollup/embedded/bsonval"
)

// TestDiffDocs checks the descriptions mongod gives pipeline-style updates (its $v:2 delta
// read by the change-stream parser); the array cases are the change-streams spec test "Test
// array truncation" and the drivers' documented example.
func TestDiffDocs(t *testing.T) {
	long := strings.Repeat("x", 200)
	tests := []struct {
		name          string
		before, after D
		updated       D
		removed       []string
		truncated     []TruncatedArray
		dotted        D
		replacement   bool
	}{
		{name: "same", before: D{e("_id", 1), e("a", 1), e("pad", long)}, after: D{e("_id", 1), e("a", 1), e("pad", long)}},
		{name: "changed and added", before: D{e("_id", 1), e("a", 1), e("pad", long)}, after: D{e("_id", 1), e("a", 2), e("pad", long), e("b", 3)},
			updated: D{e("a", 2), e("b", 3)}},
		{name: "type change is a change", before: D{e("a", int32(1)), e("pad", long)}, after: D{e("a", 1.0), e("pad", long)}, updated: D{e("a", 1.0)}},
		{name: "removed", before: D{e("_id", 1), e("a", 1), e("b", 2), e("pad", long)}, after: D{e("_id", 1), e("b", 2), e("pad", long)}, removed: []string{"a"}},
		{name: "removed at the end", before: D{e("_id", 1), e("pad", long), e("a", 1)}, after: D{e("_id", 1), e("pad", long)}, removed: []string{"a"}},
		{name: "nested documents recurse", before: D{e("a", D{e("x", 1), e("y", 2), e("pad", long)})}, after: D{e("a", D{e("x", 1), e("y", 3), e("pad", long), e("z", 4)})},
			updated: D{e("a.y", 3), e("a.z", 4)}},
		{name: "nested removal", before: D{e("a", D{e("x", long), e("y", 2)})}, after: D{e("a", D{e("x", long)})}, removed: []string{"a.y"}},
		{name: "nested diff not smaller than the value is the value", before: D{e("a", D{e("x", 1), e("y", 2)}), e("pad", long)}, after: D{e("a", D{e("x", 1)}), e("pad", long)},
			updated: D{e("a", D{e("x", 1)})}},
		{name: "array truncated (spec: Test array truncation)",
			before:    D{e("_id", int32(1)), e("a", int32(1)), e("array", A{"foo", D{e("a", "bar")}, int32(1), int32(2), int32(3)})},
			after:     D{e("_id", int32(1)), e("a", int32(1)), e("array", A{"foo", D{e("a", "bar")}})},
			truncated: []TruncatedArray{{Field: "array", NewSize: 2}}},
		{name: "array truncated, element changed inside",
			before:    D{e("_id", int32(1)), e("arrayField", A{"foo", D{e("a", "bar")}, int32(1), int32(2), int32(3)}), e("pad", long)},
			after:     D{e("_id", int32(1)), e("arrayField", A{"foo", D{e("a", "bar"), e("b", int32(3))}}), e("pad", long)},
			updated:   D{e("arrayField.1.b", int32(3))},
			truncated: []TruncatedArray{{Field: "arrayField", NewSize: 2}}},
		{name: "array element set and appended", before: D{e("a", A{long, int32(1)})}, after: D{e("a", A{long, int32(2), int32(3)})},
			updated: D{e("a.1", int32(2)), e("a.2", int32(3))}},
		{name: "array replaced whole when its diff is not smaller", before: D{e("a", A{int32(1), int32(2)}), e("pad", long)}, after: D{e("a", A{int32(7), int32(8)}), e("pad", long)},
			updated: D{e("a", A{int32(7), int32(8)})}},
		{name: "document to scalar", before: D{e("a", D{e("x", 1)}), e("pad", long)}, after: D{e("a", 5), e("pad", long)}, updated: D{e("a", 5)}},
		{name: "moved field is removed and set", before: D{e("_id", 1), e("a", 1), e("b", 2), e("pad", long)}, after: D{e("_id", 1), e("b", 2), e("pad", long), e("a", 1)},
			updated: D{e("a", 1)}},
		{name: "removed fields out of place come sorted after the trailing ones",
			before: D{e("_id", 1), e("z", 1), e("y", 1), e("pad", long), e("t", 1)}, after: D{e("_id", 1), e("pad", long)},
			removed: []string{"t", "y", "z"}},
		{name: "dotted field names keep their components", before: D{e("_id", 1), e("a", D{e("b.c", 1), e("pad", long)})}, after: D{e("_id", 1), e("a", D{e("b.c", 2), e("pad", long)})},
			updated: D{e("a.b.c", 2)}, dotted: D{e("a.b.c", A{"a", "b.c"})}},
		{name: "mostly new document is a replacement", before: D{e("_id", 1), e("a", 1)}, after: D{e("_id", 1), e("b", long)}, replacement: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := DiffDocs(tc.before, tc.after)
			if ok == tc.replacement {
				t.Fatalf("DiffDocs ok = %v, want %v", ok, !tc.replacement)
			}
			if !ok {
				return
			}
			if formatValue(got.UpdatedFields) != formatValue(tc.updated) || fmt.Sprint(got.RemovedFields) != fmt.Sprint(tc.removed) ||
				fmt.Sprint(got.TruncatedArrays) != fmt.Sprint(tc.truncated) || formatValue(got.DottedPaths) != formatValue(tc.dotted) {
				t.Fatalf("DiffDocs = %v / %v / %v / %v, want %v / %v / %v / %v", got.UpdatedFields, got.RemovedFields, got.TruncatedArrays, got.DottedPaths,
					tc.updated, tc.removed, tc.truncated, tc.dotted)
			}
		})
	}
}

// TestDiffDocsRandom cross-checks DiffDocs on random documents and random edits of them:
// replaying the description naively ($unset the removed paths, truncate the arrays, then set
// each updated path in place or append it) rebuilds the new document (up to the order of
// fields: a field that moved is only set, as mongod describes it); the delta's tracked size is its real BSON size; and a replacement is reported
// exactly when the delta would not be smaller than the new document.
func TestDiffDocsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 2))
	replacements := 0
	for i := range 5000 {
		fields := randDiffDoc(r, 3)
		before := append(D{e("_id", int32(i))}, fields...)
		after := append(D{e("_id", int32(i))}, mutateDoc(r, fields, 3)...)

		root := diffDoc(before, after, deltaMetadataSize)
		desc, ok := DiffDocs(before, after)
		if ok != (root != nil) {
			t.Fatalf("DiffDocs ok=%v, diffDoc %v", ok, root)
		}
		if !ok {
			replacements++
			continue
		}
		enc := encodeDelta(root)
		if root.size-deltaMetadataSize != len(enc) {
			t.Fatalf("delta of %v -> %v: tracked size %d, encoded %d (%v)", before, after, root.size-deltaMetadataSize, len(enc), bson.Raw(enc))
		}
		if len(enc)+deltaMetadataSize >= bsonval.DocSize(after) {
			t.Fatalf("delta kept although not smaller: %d+%d >= %d", len(enc), deltaMetadataSize, bsonval.DocSize(after))
		}
		got := replayDesc(t, before, desc)
		if !strictEqual(sortedFields(got), sortedFields(after)) {
			t.Fatalf("replaying %v / %v / %v on\n%v\ngives %v\nwant  %v", desc.UpdatedFields, desc.RemovedFields, desc.TruncatedArrays,
				formatValue(before), formatValue(got), formatValue(after))
		}
	}
	if replacements == 0 || replacements == 5000 {
		t.Fatalf("%d replacements of 5000: the generator does not cover both outcomes", replacements)
	}
}

func randDiffDoc(r *rand.Rand, depth int) D {
	d := D{}
	for _, k := range []string{"a", "b", "c", "d"} {
		if r.IntN(4) > 0 {
			d = append(d, e(k, randDiffValue(r, depth)))
		}
	}
	return d
}

func randDiffValue(r *rand.Rand, depth int) any {
	if depth > 0 {
		switch r.IntN(5) {
		case 0:
			a := A{}
			for range r.IntN(6) {
				a = append(a, randDiffValue(r, depth-1))
			}
			return a
		case 1:
			return randDiffDoc(r, depth-1)
		}
	}
	if r.IntN(4) == 0 {
		return strings.Repeat("s", r.IntN(40))
	}
	return randScalar(r)
}

// mutateDoc returns an edited copy of d: fields kept, dropped, changed or edited inside,
// sometimes two swapped, sometimes new ones appended.
func mutateDoc(r *rand.Rand, d D, depth int) D {
	out := D{}
	for _, f := range d {
		switch r.IntN(6) {
		case 0:
			continue
		case 1:
			out = append(out, e(f.Key, randDiffValue(r, depth)))
		case 2, 3:
			out = append(out, e(f.Key, mutateValue(r, f.Value, depth)))
		default:
			out = append(out, f)
		}
	}
	if len(out) > 1 && r.IntN(4) == 0 {
		i, j := r.IntN(len(out)), r.IntN(len(out))
		out[i], out[j] = out[j], out[i]
	}
	for _, k := range []string{"e", "f"} {
		if r.IntN(4) == 0 {
			out = append(out, e(k, randDiffValue(r, depth)))
		}
	}
	return out
}

func mutateValue(r *rand.Rand, v any, depth int) any {
	switch x := v.(type) {
	case D:
		return mutateDoc(r, x, depth-1)
	case A:
		out := A{}
		for _, el := range x {
			switch r.IntN(4) {
			case 0:
				out = append(out, randDiffValue(r, depth-1))
			case 1:
				out = append(out, mutateValue(r, el, depth-1))
			default:
				out = append(out, el)
			}
		}
		switch r.IntN(3) {
		case 0:
			out = out[:r.IntN(len(out)+1)]
		case 1:
			for range r.IntN(3) {
				out = append(out, randDiffValue(r, depth-1))
			}
		}
		return out
	}
	return randDiffValue(r, depth)
}

// replayDesc applies a change-stream update description to doc the naive way.
func replayDesc(t *testing.T, doc D, desc UpdateDescription) D {
	t.Helper()
	out := bsonval.CloneDoc(doc)
	for _, p := range desc.RemovedFields {
		out = editPath(t, out, strings.Split(p, "."), func(parent any, last string) any {
			pd := parent.(D)
			for i := range pd {
				if pd[i].Key == last {
					return append(pd[:i:i], pd[i+1:]...)
				}
			}
			t.Fatalf("removed %s: no such field", p)
			return nil
		})
	}
	for _, ta := range desc.TruncatedArrays {
		parts := strings.Split(ta.Field, ".")
		out = editPath(t, out, parts, func(parent any, last string) any {
			return setChild(t, parent, last, func(old any) any { return old.(A)[:ta.NewSize] })
		})
	}
	for _, f := range desc.UpdatedFields {
		out = editPath(t, out, strings.Split(f.Key, "."), func(parent any, last string) any {
			return setChild(t, parent, last, func(any) any { return f.Value })
		})
	}
	return out
}

// editPath rebuilds doc with edit applied to the container holding the path's last component.
func editPath(t *testing.T, doc D, parts []string, edit func(parent any, last string) any) D {
	t.Helper()
	var walk func(cur any, parts []string) any
	walk = func(cur any, parts []string) any {
		if len(parts) == 1 {
			return edit(cur, parts[0])
		}
		return setChild(t, cur, parts[0], func(old any) any { return walk(old, parts[1:]) })
	}
	return walk(doc, parts).(D)
}

// setChild replaces (or appends) the child named key of a document or array container.
func setChild(t *testing.T, container any, key string, f func(old any) any) any {
	t.Helper()
	switch c := container.(type) {
	case D:
		out := append(D(nil), c...)
		for i := range out {
			if out[i].Key == key {
				out[i].Value = f(out[i].Value)
				return out
			}
		}
		return append(out, e(key, f(nil)))
	case A:
		i, err := strconv.Atoi(key)
		if err != nil || i > len(c) {
			t.Fatalf("array index %q of %d elements", key, len(c))
		}
		out := append(A(nil), c...)
		if i == len(out) {
			return append(out, f(nil))
		}
		out[i] = f(out[i])
		return out
	}
	t.Fatalf("path through %T", container)
	return nil
}

// encodeDelta is the $v:2 delta mongod logs for n, as BSON.
func encodeDelta(n *docDelta) []byte {
	b := bsoncore.NewDocumentBuilder()
	if len(n.deletes) > 0 {
		db := bsoncore.NewDocumentBuilder()
		for _, k := range n.deletes {
			db.AppendBoolean(k, false)
		}
		b.AppendDocument("d", db.Build())
	}
	for _, sec := range []struct {
		name string
		es   []bson.E
	}{{"u", n.updates}, {"i", n.inserts}} {
		if len(sec.es) > 0 {
			raw, err := bsonval.Encode(D(sec.es))
			if err != nil {
				panic(err)
			}
			b.AppendDocument(sec.name, raw)
		}
	}
	for _, s := range n.subs {
		b.AppendDocument("s"+s.key, encodeSub(s))
	}
	return b.Build()
}

func encodeSub(s subDelta) []byte {
	if s.doc != nil {
		return encodeDelta(s.doc)
	}
	idx, dst := bsoncore.ReserveLength(nil)
	dst = bsoncore.AppendBooleanElement(dst, "a", true)
	if s.arr.resize >= 0 {
		dst = bsoncore.AppendInt32Element(dst, "l", int32(s.arr.resize))
	}
	for _, el := range s.arr.elems {
		if el.doc == nil && el.arr == nil {
			var err error
			if dst, err = bsonval.AppendElement(dst, "u"+strconv.Itoa(el.idx), el.value); err != nil {
				panic(err)
			}
			continue
		}
		dst = bsoncore.AppendDocumentElement(dst, "s"+strconv.Itoa(el.idx), encodeSub(el))
	}
	dst = append(dst, 0)
	return bsoncore.UpdateLength(dst, idx, int32(len(dst)-int(idx)))
}

// sortedFields returns v with every document's fields in name order.
func sortedFields(v any) any {
	switch x := v.(type) {
	case D:
		out := make(D, len(x))
		for i, f := range x {
			out[i] = e(f.Key, sortedFields(f.Value))
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
		return out
	case A:
		out := make(A, len(x))
		for i, el := range x {
			out[i] = sortedFields(el)
		}
		return out
	}
	return v
}
