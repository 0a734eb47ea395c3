package query

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// walkMode selects how a path that ends at an array is reported.
type walkMode uint8

const (
	// modeMatch reports each element of a leaf array and then the array itself (query leaves).
	modeMatch walkMode = iota
	// modeWhole reports a leaf array only as a whole ($elemMatch).
	modeWhole
	// modeSortKey reports each element of a leaf array but not the array; an empty leaf array
	// is reported as emptyArrayKey.
	modeSortKey
)

// emptyArrayKey is the sort key of an empty array: less than null and missing.
type emptyArrayKey struct{}

// pred tests one value reached by a path; missing is true when the path does not exist.
type pred interface {
	test(v any, missing bool) bool
}

// splitPath splits a dotted path into its components.
func splitPath(p string) []string {
	if strings.IndexByte(p, '.') < 0 {
		return []string{p}
	}
	return strings.Split(p, ".")
}

// walkDoc visits the values at parts in d with MongoDB's classic-matcher traversal
// (BSONElementIterator): implicit traversal of arrays of documents, numeric components that
// address array positions as well as fields named by digits, and leaf arrays per mode. It
// returns true as soon as p accepts a visited value.
func walkDoc(d bson.D, parts []string, mode walkMode, p pred) bool {
	cur := d
	for i, part := range parts {
		v, ok := getField(cur, part)
		if !ok {
			return p.test(nil, true)
		}
		last := i == len(parts)-1
		switch x := v.(type) {
		case bson.A:
			if last {
				return leafArray(x, mode, p)
			}
			return walkArray(x, parts[i+1:], mode, p)
		case bson.D:
			if last {
				return p.test(x, false)
			}
			cur = x
		default:
			if last {
				return p.test(v, false)
			}
			return p.test(nil, true)
		}
	}
	return p.test(cur, false)
}

func getField(d bson.D, key string) (any, bool) {
	for i := range d {
		if d[i].Key == key {
			return d[i].Value, true
		}
	}
	return nil, false
}

func leafArray(a bson.A, mode walkMode, p pred) bool {
	switch mode {
	case modeWhole:
		return p.test(a, false)
	case modeSortKey:
		if len(a) == 0 {
			return p.test(emptyArrayKey{}, false)
		}
	}
	for _, e := range a {
		if p.test(e, false) {
			return true
		}
	}
	if mode == modeMatch {
		return p.test(a, false)
	}
	return false
}

// walkArray continues a path (rest, non-empty) inside an array that is not at the path's end.
func walkArray(a bson.A, rest []string, mode walkMode, p pred) bool {
	off := arrayIndex(rest[0])
	for idx, e := range a {
		if arrayElemMatches(idx, e, rest, off, mode, p) {
			return true
		}
	}
	return false
}

// arrayElemMatches reports whether element idx (e) of an array inside a path makes p match
// the rest of the path: through a document element, or through the element itself when the
// next component is its position (off).
func arrayElemMatches(idx int, e any, rest []string, off int, mode walkMode, p pred) bool {
	if ed, ok := e.(bson.D); ok {
		if walkDoc(ed, rest, mode, p) {
			return true
		}
		if idx != off {
			return false
		}
		if len(rest) == 1 {
			return p.test(ed, false)
		}
		return walkDoc(ed, rest[1:], mode, p)
	}
	if idx != off {
		return false
	}
	if len(rest) == 1 {
		return p.test(e, false)
	}
	ea, ok := e.(bson.A)
	return ok && walkArray(ea, rest[1:], mode, p)
}

// arrayIndex returns the array position a path component names, or -1 when it names none
// (not all digits, or a non-canonical number such as "01").
func arrayIndex(s string) int {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return -1
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// isAllDigits reports whether s is a non-empty string of ASCII digits.
func isAllDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
