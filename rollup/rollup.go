package rollup

import (
	"maps"
	"time"
)

// Contribution is what one child gives its parent at a tick: its online total, the version
// that orders its contributions (a leaf's observation time in unix ns, a parent's Rev), and how
// many leaves under it reported out of how many the tree expects.
type Contribution struct {
	Child     string
	ChildType string
	Online    int64
	Version   int64
	Reported  int64
	Expected  int64
}

// ChildState is a child's latest contribution as the parent document stores it.
type ChildState struct {
	Type     string
	Online   int64
	Version  int64
	Reported int64
	Expected int64
}

// Parent is a parent or root document of the counts collection at one tick. Online and
// Reported are the sums over Children; Expected is the number of leaves under the node in tree
// version TreeVersion; Rev is the document's version, incremented by every change.
type Parent struct {
	ID          string
	Type        string
	Project     string
	Timestamp   time.Time
	Online      int64
	Rev         int64
	Reported    int64
	Expected    int64
	Children    map[string]ChildState
	TreeVersion int
}

// ChildSet is what Merge needs to know of the tree version of a tick about one node.
type ChildSet struct {
	// Child reports whether id is a child of the node in this tree version, and its type.
	// A nil Child means the node has no children.
	Child func(id string) (typ string, ok bool)
	// Expected is the number of leaves in the tree under the node.
	Expected int64
	// TreeVersion is the version of the tree the set was taken from.
	TreeVersion int
}

// ChildMap returns the ChildSet of a node whose children are given as id → type.
func ChildMap(children map[string]string, expected int64, treeVersion int) ChildSet {
	return ChildSet{
		Child: func(id string) (string, bool) {
			typ, ok := children[id]
			return typ, ok
		},
		Expected:    expected,
		TreeVersion: treeVersion,
	}
}

// lookup is cs.Child, tolerating a nil func.
func (cs ChildSet) lookup(id string) (string, bool) {
	if cs.Child == nil {
		return "", false
	}
	return cs.Child(id)
}

// LeafContribution returns the contribution of a leaf document: it reports itself, and the
// tree expects exactly it.
func LeafContribution(id, typ string, online, version int64) Contribution {
	return Contribution{Child: id, ChildType: typ, Online: online, Version: version, Reported: 1, Expected: 1}
}

// Contribution returns what p gives its own parent: its totals, versioned by its Rev.
func (p Parent) Contribution() Contribution {
	return Contribution{
		Child:     p.ID,
		ChildType: p.Type,
		Online:    p.Online,
		Version:   p.Rev,
		Reported:  p.Reported,
		Expected:  p.Expected,
	}
}

// Merge applies the contributions in to p and returns the new document and whether it changed.
//
// Per child the contribution with the greatest version wins; on equal versions the stored one
// is kept (and, between contributions of one call, the greatest by Online, Reported, Expected,
// so the result never depends on the order of in). Contributions and stored children that are
// not children of the node in cs (by id and type) are dropped. Online and Reported are then the
// sums over the children, Expected and TreeVersion come from cs. If nothing changed, p is
// returned as is with false; otherwise Rev is p.Rev+1. A parent never written before (Rev 0)
// that gets no child is not created: (p, false). Merge does not modify p or in.
//
// Callers going up the tree must pass the result's Contribution to the node's own parent
// whether it changed or not (unless Rev is 0): after a crash between two levels, the redelivered
// events leave the lower parent unchanged, and only its unchanged contribution repairs the
// levels above (testdata/partial.txt). Unchanged contributions cost a merge, never a write.
func Merge(p Parent, in []Contribution, cs ChildSet) (Parent, bool) {
	return merge(p, false, in, cs)
}

// Rebuild is Merge with the stored children replaced: the result's children are exactly the
// winning contributions of in (filtered by cs), as a full recompute from current values needs
// it. Identity fields are kept, Rev is p.Rev+1 if the result differs from p. Contributions
// in must be the children's current values: a stored child missing from in is dropped even if
// it is still in the tree.
func Rebuild(p Parent, in []Contribution, cs ChildSet) (Parent, bool) {
	return merge(p, true, in, cs)
}

// merge is Merge, or Rebuild with replace: then the children start empty instead of stored.
func merge(p Parent, replace bool, in []Contribution, cs ChildSet) (Parent, bool) {
	base := p.Children
	if replace {
		base = nil
	}
	// Every change makes the children differ from base for good: a stored entry is replaced
	// only by a greater version, which a later contribution can raise but never take back.
	changed := false
	next := maps.Clone(base)
	if next == nil {
		next = make(map[string]ChildState, len(in))
	}
	for id, st := range next {
		if typ, ok := cs.lookup(id); !ok || typ != st.Type {
			delete(next, id)
			changed = true
		}
	}
	for _, c := range in {
		typ, ok := cs.lookup(c.Child)
		if !ok || typ != c.ChildType {
			continue
		}
		st := ChildState{Type: c.ChildType, Online: c.Online, Version: c.Version, Reported: c.Reported, Expected: c.Expected}
		cur, ok := next[c.Child]
		if ok && !wins(st, cur, base, c.Child) {
			continue
		}
		next[c.Child] = st
		changed = true
	}
	if p.Rev == 0 && len(next) == 0 {
		return p, false
	}
	q := p
	q.Children = next
	q.Online, q.Reported = 0, 0
	for _, st := range next {
		q.Online += st.Online
		q.Reported += st.Reported
	}
	q.Expected = cs.Expected
	q.TreeVersion = cs.TreeVersion
	if replace {
		changed = !maps.Equal(next, p.Children)
	}
	if !changed && q.Online == p.Online && q.Reported == p.Reported && q.Expected == p.Expected &&
		q.TreeVersion == p.TreeVersion {
		return p, false
	}
	q.Rev = p.Rev + 1
	return q, true
}

// wins reports whether st replaces cur, the entry for child id so far.
func wins(st, cur ChildState, base map[string]ChildState, id string) bool {
	if st.Version != cur.Version {
		return st.Version > cur.Version
	}
	if stored, ok := base[id]; ok && stored == cur {
		return false // ties keep the stored contribution
	}
	switch {
	case st.Online != cur.Online:
		return st.Online > cur.Online
	case st.Reported != cur.Reported:
		return st.Reported > cur.Reported
	default:
		return st.Expected > cur.Expected
	}
}
