package query

import "go.mongodb.org/mongo-driver/v2/bson"

// The positional $ update operator uses the position, in an array the query traversed, of
// the element that made the query match (MongoDB's elemMatchKey).

// MatchPosition is Match that also returns that position: for a path condition, the index
// of the first element of the first array along its path that satisfies it; under $and the
// last condition that has one wins (MongoDB leaves a query with several array conditions
// undefined); $or, $nor, $not and $expr give none.
// pos is -1 when the document does not match or no array position is known.
func (f *Filter) MatchPosition(doc bson.D) (ok bool, pos int, err error) {
	ok, err = f.Match(doc)
	if !ok || err != nil || f == nil || f.root == nil {
		return ok, -1, err
	}
	return true, position(f.root, doc), nil
}

// position returns the array position a matching node recorded, or -1.
func position(n node, d bson.D) int {
	switch x := n.(type) {
	case *pathNode:
		return x.position(d)
	case andNode:
		pos := -1
		for _, c := range x {
			if q := position(c, d); q >= 0 {
				pos = q
			}
		}
		return pos
	}
	return -1
}

// position finds the first array along the path and the first of its elements through
// which the predicate holds.
func (p *pathNode) position(d bson.D) int {
	cur := d
	for i, part := range p.parts {
		v, ok := getField(cur, part)
		if !ok {
			return -1
		}
		last := i == len(p.parts)-1
		switch x := v.(type) {
		case bson.A:
			if !last {
				rest := p.parts[i+1:]
				off := arrayIndex(rest[0])
				for idx, e := range x {
					if arrayElemMatches(idx, e, rest, off, p.mode, p.p) {
						return idx
					}
				}
				return -1
			}
			if p.mode == modeWhole {
				if em, ok := p.p.(elementPositioner); ok {
					return em.firstMatch(x)
				}
				return -1
			}
			for idx, e := range x {
				if p.p.test(e, false) {
					return idx
				}
			}
			return -1
		case bson.D:
			if last {
				return -1
			}
			cur = x
		default:
			return -1
		}
	}
	return -1
}

// elementPositioner is a predicate over a whole array ($elemMatch) that can tell which
// element satisfied it.
type elementPositioner interface {
	firstMatch(arr bson.A) int
}

func (e elemMatchValue) firstMatch(arr bson.A) int {
	for i, x := range arr {
		if e.p.test(x, false) {
			return i
		}
	}
	return -1
}

func (e elemMatchObject) firstMatch(arr bson.A) int {
	for i, x := range arr {
		switch y := x.(type) {
		case bson.D:
			if e.n.match(y) {
				return i
			}
		case bson.A:
			if e.n.match(arrayAsDoc(y)) {
				return i
			}
		}
	}
	return -1
}
