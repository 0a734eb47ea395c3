package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/gameops/rollup/api/apiv1"
)

// optString is a string field as sent: ok is false when it was absent or null.
type optString struct {
	v  string
	ok bool
}

// rawRequest is a syntactically valid request body whose values are not validated yet.
type rawRequest struct {
	project      optString
	timestamp    optString
	observedAt   optString
	submissionID optString
	hasCounts    bool
	counts       []rawCount
}

// rawCount is one item of counts as sent; problems holds what is already known to be wrong
// with it (wrong JSON types, unknown or duplicate fields).
type rawCount struct {
	id, typ  optString
	online   json.Number
	hasOnl   bool
	notObj   bool
	problems []apiv1.FieldError
}

// httpError is a complete non-200 answer.
type httpError struct {
	status int
	body   apiv1.ErrorResponse
}

func (e *httpError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.status, e.body.Error, e.body.Message)
}

func malformed(field, format string, args ...any) *httpError {
	e := &httpError{status: http.StatusBadRequest, body: apiv1.ErrorResponse{
		Error: apiv1.ErrMalformedJSON, Message: fmt.Sprintf(format, args...),
	}}
	if field != "" {
		e.body.Errors = []apiv1.FieldError{{Field: field, Message: e.body.Message}}
	}
	return e
}

// decodeBody is parseRequest, through fastParse for the plain bodies agents send: anything
// else (including every invalid body) goes to parseRequest, which explains what is wrong.
// The fast path reads into (and returns) into, reusing its counts' capacity.
func decodeBody(body []byte, maxItems int, into *rawRequest) (*rawRequest, *httpError) {
	if fastParse(body, maxItems, into) {
		return into, nil
	}
	return parseRequest(body, maxItems)
}

// parseRequest decodes body strictly: a single JSON object with exactly the known, case-exact,
// non-repeated fields of the right JSON types; at most maxItems counts (413 beyond). Wrong
// things inside an item do not stop the parse: they are kept in the item's problems so every
// invalid item can be named.
func parseRequest(body []byte, maxItems int) (*rawRequest, *httpError) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxError(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, malformed("", "the body must be a JSON object")
	}
	req := &rawRequest{}
	seen := make(map[string]bool, 5)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxError(err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return nil, malformed(key, "field %q appears twice", key)
		}
		seen[key] = true
		switch key {
		case "project":
			req.project, err = stringField(dec, key)
		case "timestamp":
			req.timestamp, err = stringField(dec, key)
		case "observed_at":
			req.observedAt, err = stringField(dec, key)
		case "submission_id":
			req.submissionID, err = stringField(dec, key)
		case "counts":
			if herr := parseCounts(dec, req, maxItems); herr != nil {
				return nil, herr
			}
		default:
			return nil, malformed(key, "unknown field %q (fields are project, timestamp, observed_at, submission_id, counts)", key)
		}
		if err != nil {
			var herr *httpError
			if errors.As(err, &herr) {
				return nil, herr
			}
			return nil, syntaxError(err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, syntaxError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, syntaxError(err)
		}
		return nil, malformed("", "unexpected data after the JSON object")
	}
	return req, nil
}

// stringField reads a top-level string value (null = absent).
func stringField(dec *json.Decoder, key string) (optString, error) {
	tok, err := dec.Token()
	if err != nil {
		return optString{}, err
	}
	switch v := tok.(type) {
	case string:
		return optString{v: v, ok: true}, nil
	case nil:
		return optString{}, nil
	default:
		return optString{}, malformed(key, "%s must be a string, not %s", key, jsonKind(tok))
	}
}

func parseCounts(dec *json.Decoder, req *rawRequest, maxItems int) *httpError {
	tok, err := dec.Token()
	if err != nil {
		return syntaxError(err)
	}
	if tok == nil {
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return malformed("counts", "counts must be an array, not %s", jsonKind(tok))
	}
	req.hasCounts = true
	for dec.More() {
		if len(req.counts) == maxItems {
			return &httpError{status: http.StatusRequestEntityTooLarge, body: apiv1.ErrorResponse{
				Error:   apiv1.ErrTooManyItems,
				Message: fmt.Sprintf("counts has more than %d items; split the submission", maxItems),
				Errors:  []apiv1.FieldError{{Field: "counts", Message: fmt.Sprintf("at most %d items", maxItems)}},
			}}
		}
		c, err := parseCount(dec, len(req.counts))
		if err != nil {
			return itemSyntaxError(err, len(req.counts))
		}
		req.counts = append(req.counts, c)
	}
	if _, err := dec.Token(); err != nil { // the closing bracket
		return syntaxError(err)
	}
	return nil
}

// parseCount reads one element of counts. It returns an error only for broken JSON; wrong
// shapes become problems of the item.
func parseCount(dec *json.Decoder, index int) (rawCount, error) {
	var c rawCount
	problem := func(field, format string, args ...any) {
		name := fmt.Sprintf("counts[%d]", index)
		if field != "" {
			name += "." + field
		}
		c.problems = append(c.problems, apiv1.FieldError{Index: &index, Field: name, Message: fmt.Sprintf(format, args...)})
	}
	tok, err := dec.Token()
	if err != nil {
		return c, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		problem("", "must be an object {id, type, online}, not %s", jsonKind(tok))
		c.notObj = true
		return c, skipValue(dec, tok)
	}
	var seenID, seenType, seenOnline bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return c, err
		}
		key, _ := tok.(string)
		val, err := dec.Token()
		if err != nil {
			return c, err
		}
		var seen *bool
		switch key {
		case "id":
			seen = &seenID
		case "type":
			seen = &seenType
		case "online":
			seen = &seenOnline
		default:
			problem(key, "unknown field %q (fields are id, type, online)", key)
			if err := skipValue(dec, val); err != nil {
				return c, err
			}
			continue
		}
		if *seen {
			problem(key, "appears twice")
		}
		*seen = true
		switch v := val.(type) {
		case string:
			switch key {
			case "id":
				c.id = optString{v: v, ok: true}
			case "type":
				c.typ = optString{v: v, ok: true}
			default:
				problem(key, "must be a number, not a string")
			}
		case json.Number:
			if key == "online" {
				c.online, c.hasOnl = v, true
			} else {
				problem(key, "must be a string, not a number")
			}
		case nil:
			// null: treated as absent, reported as required below.
		default:
			want := "a string"
			if key == "online" {
				want = "a number"
			}
			problem(key, "must be %s, not %s", want, jsonKind(val))
			if err := skipValue(dec, val); err != nil {
				return c, err
			}
		}
	}
	_, err = dec.Token() // the closing brace
	return c, err
}

// skipValue consumes the rest of a value whose first token was tok.
func skipValue(dec *json.Decoder, tok json.Token) error {
	d, ok := tok.(json.Delim)
	if !ok || (d != '{' && d != '[') {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

func jsonKind(tok json.Token) string {
	switch v := tok.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	case json.Delim:
		switch v {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
	}
	return "something else"
}

func syntaxError(err error) *httpError {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return malformed("", "invalid JSON at byte %d: %s%s", se.Offset, se.Error(), syntaxHint(se.Error()))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return malformed("", "the JSON body is empty or truncated")
	default:
		return malformed("", "invalid JSON: %s", err.Error())
	}
}

// itemSyntaxError is syntaxError for JSON broken inside counts[index], naming the item.
func itemSyntaxError(err error, index int) *httpError {
	e := syntaxError(err)
	name := fmt.Sprintf("counts[%d]", index)
	e.body.Message += " (in " + name + ")"
	e.body.Errors = []apiv1.FieldError{{Index: &index, Field: name, Message: e.body.Message}}
	return e
}

// syntaxHint explains the JSON syntax errors that come from numbers written as another
// language writes them (encoding/json's messages are stable: they are part of its tests).
func syntaxHint(msg string) string {
	const begin, after = "' looking for beginning of value", "' after object key:value pair"
	rest, ok := strings.CutPrefix(msg, "invalid character '")
	if !ok || len(rest) < 2 {
		return ""
	}
	c, rest := rest[0], rest[1:]
	switch {
	case rest == begin && c == '+':
		return "; a number must not start with +"
	case rest == begin && c == '.':
		return "; a number must start with a digit (0.5, not .5)"
	case rest == begin && (c == 'N' || c == 'I'):
		return "; NaN and Infinity are not JSON numbers"
	case rest == after && (c == 'x' || c == 'X'):
		return "; hexadecimal is not JSON: write the number in decimal digits"
	case rest == after && c >= '0' && c <= '9':
		return "; a number must not have a leading zero (1, not 01)"
	}
	return ""
}

// parseOnline reads a count: a whole number written in decimal digits only. n is a JSON
// number (both parsers check its syntax: no sign but '-', no leading zero). "-0" is refused
// like any other sign (a count is never negative, and -0 is not how an agent writes 0);
// fractions and exponents are refused even when their value is whole (1.0, 1e2): they come
// from a float somewhere in the agent, which loses counts above 2^53.
func parseOnline(n json.Number, maxOnline int64) (int64, string) {
	s := string(n)
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, fmt.Sprintf("must be a whole number written with digits only, not %s (no fraction or exponent)", quoteNumber(s))
	}
	if len(digits) < len(s) {
		if strings.Trim(digits, "0") == "" {
			return 0, "-0 is not a count; send 0"
		}
		return 0, fmt.Sprintf("must be >= 0, not %s", quoteNumber(s))
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v > maxOnline { // the only error left is a value beyond int64
		return 0, fmt.Sprintf("%s is above the maximum %d", quoteNumber(s), maxOnline)
	}
	return v, ""
}

// quoteNumber is a number as sent, shortened to 32 bytes for a message.
func quoteNumber(s string) string {
	if len(s) > 32 {
		return s[:32] + fmt.Sprintf("… (%d characters)", len(s))
	}
	return s
}
