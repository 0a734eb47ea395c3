package api

import (
	"encoding/json"
	"strings"

	"github.com/gameops/rollup/api/internal/jsonscan"
)

// fastParse is parseRequest for the plain bodies agents send, without encoding/json's
// per-token cost: a JSON object of the known fields, each at most once, with string values
// of printable ASCII without escapes, counts an array of at most maxItems objects of id,
// type (such strings) and online (an integer without fraction or exponent), and nothing
// after the object but whitespace. ok is false for anything else — including every body
// that is not exactly such a request, valid or not — and the caller then runs parseRequest,
// which reads every body fastParse accepts identically (FuzzFastParse checks) and explains
// what is wrong with the others.
//
// fastParse reads into req, overwriting it but reusing the capacity of req.counts; req is
// garbage when ok is false.
func fastParse(body []byte, maxItems int, req *rawRequest) (ok bool) {
	*req = rawRequest{counts: req.counts[:0]}
	p := fastScanner{jsonscan.New(string(body))}
	if !p.Lit('{') {
		return false
	}
	ok = p.Object(func(key string) (uint, bool) {
		var ok bool
		switch key {
		case "project":
			req.project, ok = p.optStr()
			return 1 << 0, ok
		case "timestamp":
			req.timestamp, ok = p.optStr()
			return 1 << 1, ok
		case "observed_at":
			req.observedAt, ok = p.optStr()
			return 1 << 2, ok
		case "submission_id":
			req.submissionID, ok = p.optStr()
			return 1 << 3, ok
		case "counts":
			return 1 << 4, p.counts(req, maxItems)
		}
		return 0, false
	})
	return ok && p.End()
}

// fastScanner reads the plain JSON subset of fastParse; each method returns false at
// anything else.
type fastScanner struct{ jsonscan.Scanner }

// integer reads an integer without fraction or exponent.
func (p *fastScanner) integer() (json.Number, bool) {
	n, ok := p.Int()
	return json.Number(n), ok
}

func (p *fastScanner) optStr() (optString, bool) {
	v, ok := p.Str()
	return optString{v: v, ok: ok}, ok
}

// counts reads the counts array: non-empty objects of id, type and online, each at most once.
// It reuses the capacity of req.counts, allocating only when req.counts is nil or too small.
func (p *fastScanner) counts(req *rawRequest, maxItems int) bool {
	if !p.Lit('[') {
		return false
	}
	req.hasCounts = true
	// Every item is an object: the number of '{' left bounds the number of items.
	req.counts = req.counts[:0]
	if n := min(strings.Count(p.Rest(), "{"), max(maxItems, 0)); req.counts == nil || cap(req.counts) < n {
		req.counts = make([]rawCount, 0, n)
	}
	if p.Lit(']') {
		return true
	}
	for {
		// Items are non-empty objects: an empty one is left to parseRequest.
		if len(req.counts) == maxItems || !p.Lit('{') || p.Lit('}') {
			return false
		}
		var c rawCount
		ok := p.Object(func(key string) (uint, bool) {
			var ok bool
			switch key {
			case "id":
				c.id, ok = p.optStr()
				return 1 << 0, ok
			case "type":
				c.typ, ok = p.optStr()
				return 1 << 1, ok
			case "online":
				c.online, ok = p.integer()
				c.hasOnl = ok
				return 1 << 2, ok
			}
			return 0, false
		})
		if !ok {
			return false
		}
		req.counts = append(req.counts, c)
		if p.Lit(',') {
			continue
		}
		return p.Lit(']')
	}
}
