package api

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// fastParse is parseRequest for the plain bodies agents send, without encoding/json's
// per-token cost: a JSON object of the known fields, each at most once, with string values
// of printable ASCII without escapes, counts an array of at most maxItems objects of id,
// type (such strings) and online (an integer without fraction or exponent), and nothing
// after the object but whitespace. ok is false for anything else — including every body
// that is not exactly such a request, valid or not — and the caller then runs parseRequest,
// which reads every body fastParse accepts identically (FuzzFastParse checks) and explains
// what is wrong with the others.
func fastParse(body []byte, maxItems int) (req *rawRequest, ok bool) {
	p := fastScanner{s: string(body)}
	if !p.lit('{') {
		return nil, false
	}
	req = &rawRequest{}
	if p.lit('}') {
		return req, p.end()
	}
	var seen uint
	for {
		key, ok := p.str()
		if !ok || !p.lit(':') {
			return nil, false
		}
		var bit uint
		switch key {
		case "project":
			bit = 1 << 0
			req.project, ok = p.optStr()
		case "timestamp":
			bit = 1 << 1
			req.timestamp, ok = p.optStr()
		case "observed_at":
			bit = 1 << 2
			req.observedAt, ok = p.optStr()
		case "submission_id":
			bit = 1 << 3
			req.submissionID, ok = p.optStr()
		case "counts":
			bit = 1 << 4
			ok = p.counts(req, maxItems)
		default:
			return nil, false
		}
		if !ok || seen&bit != 0 {
			return nil, false
		}
		seen |= bit
		if p.lit(',') {
			continue
		}
		if p.lit('}') {
			return req, p.end()
		}
		return nil, false
	}
}

// fastScanner reads the plain JSON subset of fastParse; each method returns false at
// anything else.
type fastScanner struct {
	s string
	i int
}

func (p *fastScanner) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// lit consumes c after optional whitespace.
func (p *fastScanner) lit(c byte) bool {
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (p *fastScanner) end() bool {
	p.ws()
	return p.i == len(p.s)
}

// str reads a string of printable ASCII without escapes (what encoding/json decodes to the
// same bytes).
func (p *fastScanner) str() (string, bool) {
	p.ws()
	if p.i >= len(p.s) || p.s[p.i] != '"' {
		return "", false
	}
	start := p.i + 1
	for j := start; j < len(p.s); j++ {
		switch c := p.s[j]; {
		case c == '"':
			p.i = j + 1
			return p.s[start:j], true
		case c < 0x20 || c >= utf8.RuneSelf || c == '\\':
			return "", false
		}
	}
	return "", false
}

func (p *fastScanner) optStr() (optString, bool) {
	v, ok := p.str()
	return optString{v: v, ok: ok}, ok
}

// integer reads -?(0|[1-9][0-9]*), a JSON number without fraction or exponent (one that
// follows is left for the caller's next expectation to fail on).
func (p *fastScanner) integer() (json.Number, bool) {
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
	return json.Number(p.s[start:j]), true
}

// counts reads the counts array: non-empty objects of id, type and online, each at most once.
func (p *fastScanner) counts(req *rawRequest, maxItems int) bool {
	if !p.lit('[') {
		return false
	}
	req.hasCounts = true
	// Every item is an object: the number of '{' left bounds the number of items.
	req.counts = make([]rawCount, 0, min(strings.Count(p.s[p.i:], "{"), max(maxItems, 0)))
	if p.lit(']') {
		return true
	}
	for {
		if len(req.counts) == maxItems || !p.lit('{') {
			return false
		}
		var c rawCount
		var seen uint
		for {
			key, ok := p.str()
			if !ok || !p.lit(':') {
				return false
			}
			var bit uint
			switch key {
			case "id":
				bit = 1 << 0
				c.id, ok = p.optStr()
			case "type":
				bit = 1 << 1
				c.typ, ok = p.optStr()
			case "online":
				bit = 1 << 2
				c.online, ok = p.integer()
				c.hasOnl = ok
			default:
				return false
			}
			if !ok || seen&bit != 0 {
				return false
			}
			seen |= bit
			if p.lit(',') {
				continue
			}
			if p.lit('}') {
				break
			}
			return false
		}
		req.counts = append(req.counts, c)
		if p.lit(',') {
			continue
		}
		return p.lit(']')
	}
}
