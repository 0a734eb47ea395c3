package apiv1

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gameops/rollup/api/internal/jsonscan"
)

// The hand-written encoders and decoder below exist because the ingest path handles a request
// per agent per tick: reflection-based encoding/json was a large part of its cost. Each one
// produces exactly what encoding/json produces (tests compare them byte for byte and value
// for value), falling back to encoding/json for anything out of the ordinary.

// AppendJSON appends r encoded as a json.Encoder with SetEscapeHTML(false) encodes it, without
// the trailing newline. The error is encoding/json's (only a timestamp outside years
// 0–9999 fails).
func (r *CountsRequest) AppendJSON(b []byte) ([]byte, error) {
	n0 := len(b)
	b = append(b, `{"project":`...)
	b = appendString(b, r.Project)
	b = append(b, `,"timestamp":`...)
	b, ok := appendTime(b, r.Timestamp)
	if ok && r.ObservedAt != nil {
		b = append(b, `,"observed_at":`...)
		b, ok = appendTime(b, *r.ObservedAt)
	}
	if !ok {
		return appendReflect(b[:n0], r)
	}
	b = append(b, `,"submission_id":`...)
	b = appendString(b, r.SubmissionID)
	b = append(b, `,"counts":`...)
	if r.Counts == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Counts {
			c := &r.Counts[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendString(b, c.ID)
			b = append(b, `,"type":`...)
			b = appendString(b, c.Type)
			b = append(b, `,"online":`...)
			b = strconv.AppendInt(b, c.Online, 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// AppendJSON appends r encoded as a json.Encoder with SetEscapeHTML(false) encodes it, without
// the trailing newline. The error is encoding/json's (only a timestamp outside years
// 0–9999 fails).
func (r *CountsResponse) AppendJSON(b []byte) ([]byte, error) {
	n0 := len(b)
	b = append(b, `{"submission_id":`...)
	b = appendString(b, r.SubmissionID)
	b = append(b, `,"project":`...)
	b = appendString(b, r.Project)
	b = append(b, `,"timestamp":`...)
	b, ok := appendTime(b, r.Timestamp)
	if !ok {
		return appendReflect(b[:n0], r)
	}
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, r.Version, 10)
	b = append(b, `,"items":`...)
	if r.Items == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Items {
			it := &r.Items[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"index":`...)
			b = strconv.AppendInt(b, int64(it.Index), 10)
			b = append(b, `,"id":`...)
			b = appendString(b, it.ID)
			b = append(b, `,"type":`...)
			b = appendString(b, it.Type)
			b = append(b, `,"status":`...)
			b = appendString(b, string(it.Status))
			if it.Error != "" {
				b = append(b, `,"error":`...)
				b = appendString(b, it.Error)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"summary":{"applied":`...)
	b = strconv.AppendInt(b, int64(r.Summary.Applied), 10)
	b = append(b, `,"stale":`...)
	b = strconv.AppendInt(b, int64(r.Summary.Stale), 10)
	b = append(b, `,"rejected":`...)
	b = strconv.AppendInt(b, int64(r.Summary.Rejected), 10)
	return append(b, "}}"...), nil
}

// appendReflect is the encoding/json fallback of the AppendJSON methods.
func appendReflect(b []byte, v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b, err // encoding/json's error, as documented
	}
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...), nil
}

// appendTime appends t as time.Time.MarshalJSON does; ok is false when that would fail.
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	out, err := t.AppendText(append(b, '"'))
	if err != nil {
		return b, false
	}
	return append(out, '"'), true
}

const hexDigits = "0123456789abcdef"

// appendString appends s quoted as encoding/json quotes strings with HTML escaping off:
// invalid UTF-8 becomes U+FFFD, U+2028 and U+2029 are escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// DecodeCountsResponse sets *r to data decoded as json.Unmarshal decodes it into a zero
// CountsResponse, with the same error when it fails. The server's own encoding (plain keys in
// any order, strings without escapes) is read directly; anything else goes through
// encoding/json.
func DecodeCountsResponse(data []byte, r *CountsResponse) error {
	*r = CountsResponse{}
	if fastDecodeResponse(data, r) {
		return nil
	}
	*r = CountsResponse{}
	return json.Unmarshal(data, r) // encoding/json's error, as documented
}

// scanner reads the plain subset of JSON the fast decoder accepts; every method returns false
// when the input is anything else (which then goes to encoding/json).
type scanner struct{ jsonscan.Scanner }

// integer reads an integer without fraction or exponent into an int64.
func (p *scanner) integer() (int64, bool) {
	n, ok := p.Int()
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(n, 10, 64)
	return v, err == nil
}

func (p *scanner) int() (int, bool) {
	v, ok := p.integer()
	if !ok || int64(int(v)) != v {
		return 0, false
	}
	return int(v), true
}

func fastDecodeResponse(data []byte, r *CountsResponse) bool {
	p := scanner{jsonscan.New(string(data))}
	if !p.Lit('{') {
		return false
	}
	ok := p.Object(func(key string) (uint, bool) {
		var ok bool
		switch key {
		case "submission_id":
			r.SubmissionID, ok = p.Str()
			return 1 << 0, ok
		case "project":
			r.Project, ok = p.Str()
			return 1 << 1, ok
		case "timestamp":
			raw, ok := p.RawStr()
			return 1 << 2, ok && r.Timestamp.UnmarshalJSON([]byte(raw)) == nil
		case "version":
			r.Version, ok = p.integer()
			return 1 << 3, ok
		case "items":
			return 1 << 4, p.items(r)
		case "summary":
			return 1 << 5, p.summary(&r.Summary)
		}
		return 0, false
	})
	if !ok {
		return false
	}
	return p.End()
}

func (p *scanner) items(r *CountsResponse) bool {
	if !p.Lit('[') {
		return false
	}
	r.Items = make([]ItemResult, 0, strings.Count(p.Rest(), `"index"`))
	if p.Lit(']') {
		return true
	}
	for {
		if !p.Lit('{') {
			return false
		}
		var it ItemResult
		ok := p.Object(func(key string) (uint, bool) {
			var ok bool
			switch key {
			case "index":
				it.Index, ok = p.int()
				return 1 << 0, ok
			case "id":
				it.ID, ok = p.Str()
				return 1 << 1, ok
			case "type":
				it.Type, ok = p.Str()
				return 1 << 2, ok
			case "status":
				var s string
				s, ok = p.Str()
				it.Status = Status(s)
				return 1 << 3, ok
			case "error":
				it.Error, ok = p.Str()
				return 1 << 4, ok
			}
			return 0, false
		})
		if !ok {
			return false
		}
		r.Items = append(r.Items, it)
		if p.Lit(',') {
			continue
		}
		return p.Lit(']')
	}
}

func (p *scanner) summary(s *Summary) bool {
	if !p.Lit('{') {
		return false
	}
	return p.Object(func(key string) (uint, bool) {
		var ok bool
		switch key {
		case "applied":
			s.Applied, ok = p.int()
			return 1 << 0, ok
		case "stale":
			s.Stale, ok = p.int()
			return 1 << 1, ok
		case "rejected":
			s.Rejected, ok = p.int()
			return 1 << 2, ok
		}
		return 0, false
	})
}
