package jsonscan

import "unicode/utf8"

// Scanner reads s from the current position.
type Scanner struct {
	s string
	i int
}

// New returns a Scanner at the start of s.
func New(s string) Scanner { return Scanner{s: s} }

func (p *Scanner) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// Lit consumes c after optional whitespace.
func (p *Scanner) Lit(c byte) bool {
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// End reports whether only whitespace is left.
func (p *Scanner) End() bool {
	p.ws()
	return p.i == len(p.s)
}

// Rest is the input not read yet.
func (p *Scanner) Rest() string { return p.s[p.i:] }

// Str reads a string of printable ASCII without escapes and returns its contents (a
// substring of the input, which encoding/json decodes to the same bytes).
func (p *Scanner) Str() (string, bool) {
	raw, ok := p.RawStr()
	if !ok {
		return "", false
	}
	return raw[1 : len(raw)-1], true
}

// RawStr is Str returning the string with its quotes.
func (p *Scanner) RawStr() (string, bool) {
	p.ws()
	if p.i >= len(p.s) || p.s[p.i] != '"' {
		return "", false
	}
	start := p.i
	for j := start + 1; j < len(p.s); j++ {
		switch c := p.s[j]; {
		case c == '"':
			p.i = j + 1
			return p.s[start:p.i], true
		case c < 0x20 || c >= utf8.RuneSelf || c == '\\':
			return "", false
		}
	}
	return "", false
}

// Int reads -?(0|[1-9][0-9]*) and returns its text. A fraction or exponent after it is left
// for the caller's next expectation (',' or a closing bracket) to fail on.
func (p *Scanner) Int() (string, bool) {
	p.ws()
	start, j := p.i, p.i
	if j < len(p.s) && p.s[j] == '-' {
		j++
	}
	switch {
	case j < len(p.s) && p.s[j] == '0':
		j++
	case j < len(p.s) && p.s[j] >= '1' && p.s[j] <= '9':
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
	default:
		return "", false
	}
	p.i = j
	return p.s[start:j], true
}

// Object reads the members of an object whose '{' was consumed, through its '}': member is
// called with each key after its ':', reads the value and returns the key's bit (distinct per
// key). Object returns false when member does, at a repeated bit, and at anything but an
// empty object or members separated by ',' (so also at a trailing ',').
func (p *Scanner) Object(member func(key string) (bit uint, ok bool)) bool {
	if p.Lit('}') {
		return true
	}
	var seen uint
	for {
		key, ok := p.Str()
		if !ok || !p.Lit(':') {
			return false
		}
		bit, ok := member(key)
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		if p.Lit(',') {
			continue
		}
		return p.Lit('}')
	}
}
