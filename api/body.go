package api

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gameops/rollup/api/apiv1"
)

// This file owns how an ingest body's bytes arrive: its Content-Type and Content-Encoding
// headers, the read deadline, decompression and the size limits, and the byte-level checks
// (compressed without the header, UTF-16, a UTF-8 byte order mark) made before the JSON
// parser sees the body. docs/openapi.yaml documents every decision.

// bodyEncoding is the Content-Encoding of an accepted ingest body.
type bodyEncoding uint8

const (
	encIdentity bodyEncoding = iota
	encGzip
)

// checkBodyHeaders checks the headers that say what the body is: a missing Content-Type is
// taken as JSON (clients that send raw bytes set none); otherwise it must be application/json
// or application/*+json, with no charset but UTF-8. The Content-Encoding may be absent,
// identity or gzip (x-gzip); anything else is 415 with Accept-Encoding: gzip, as RFC 9110
// §15.5.16 suggests.
func checkBodyHeaders(w http.ResponseWriter, h http.Header) (bodyEncoding, *httpError) {
	if herr := checkContentType(h.Values("Content-Type")); herr != nil {
		return 0, herr
	}
	enc, herr := contentEncoding(h.Values("Content-Encoding"))
	if herr != nil {
		w.Header().Set("Accept-Encoding", "gzip")
	}
	return enc, herr
}

func unsupportedMedia(header, format string, args ...any) *httpError {
	msg := fmt.Sprintf(format, args...)
	return &httpError{status: http.StatusUnsupportedMediaType, body: apiv1.ErrorResponse{
		Error: apiv1.ErrUnsupportedMediaType, Message: msg + "; nothing was written",
		Errors: []apiv1.FieldError{{Field: header, Message: msg}},
	}}
}

// quoteHeader quotes a header value for a message, at most 64 bytes of it.
func quoteHeader(v string) string {
	if len(v) > 64 {
		return fmt.Sprintf("%q…", v[:64])
	}
	return fmt.Sprintf("%q", v)
}

func checkContentType(values []string) *httpError {
	if len(values) == 1 && strings.TrimSpace(values[0]) == "" {
		return nil // an empty header is a missing one
	}
	switch len(values) {
	case 0:
		return nil
	case 1:
	default:
		return unsupportedMedia("Content-Type", "Content-Type is given %d times; send it once, as application/json", len(values))
	}
	mt, params, err := mime.ParseMediaType(values[0])
	if err != nil {
		return unsupportedMedia("Content-Type", "Content-Type %s cannot be read (%v); send Content-Type: application/json",
			quoteHeader(values[0]), err)
	}
	if mt != "application/json" && (!strings.HasPrefix(mt, "application/") || !strings.HasSuffix(mt, "+json")) {
		msg := fmt.Sprintf("Content-Type %s is not JSON; send Content-Type: application/json", quoteHeader(mt))
		switch mt {
		case "application/x-www-form-urlencoded":
			msg += " (curl -d and --data-binary send application/x-www-form-urlencoded: use curl --json, or add -H 'Content-Type: application/json')"
		case "text/plain":
			msg += " (fetch() sends text/plain for a string body: set the Content-Type header)"
		}
		return unsupportedMedia("Content-Type", "%s", msg)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return unsupportedMedia("Content-Type", "charset %s is not supported: the body must be UTF-8 (send charset=utf-8 or no charset)", quoteHeader(cs))
	}
	return nil
}

// contentEncoding reads the Content-Encoding header lines: codings are separated by commas,
// case-insensitive; identity is no coding.
func contentEncoding(values []string) (bodyEncoding, *httpError) {
	var codings []string
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	switch {
	case len(codings) == 0:
		return encIdentity, nil
	case len(codings) == 1 && (codings[0] == "gzip" || codings[0] == "x-gzip"):
		return encGzip, nil
	case len(codings) == 1:
		return 0, unsupportedMedia("Content-Encoding", "Content-Encoding %s is not supported; send the body uncompressed or with Content-Encoding: gzip",
			quoteHeader(codings[0]))
	default:
		return 0, unsupportedMedia("Content-Encoding", "Content-Encoding %s applies several codings; send the body uncompressed or with Content-Encoding: gzip alone",
			quoteHeader(strings.Join(codings, ", ")))
	}
}

// boundBody sets the read deadline of r's connection d from now when r has a body (also one
// the handler does not read: net/http drains it after the answer). A request without a body
// gets none: net/http's background read on its connection has already started, and a read
// failing at a deadline there would cancel the request's context. It reports whether the
// deadline is set (false too when the ResponseWriter cannot: a test recorder).
func boundBody(r *http.Request, rc *http.ResponseController, d time.Duration) bool {
	return r.ContentLength != 0 && setBodyDeadline(rc, d)
}

// setBodyDeadline sets the read deadline of the request's connection d from now (a zero d
// clears it). It reports false when the ResponseWriter cannot (a test recorder).
func setBodyDeadline(rc *http.ResponseController, d time.Duration) bool {
	var t time.Time
	if d > 0 {
		t = time.Now().Add(d)
	}
	return rc.SetReadDeadline(t) == nil
}

// readIngestBody reads the whole body into b (reusing its capacity; the returned slice is
// b's buffer even on error) under a fresh read deadline of BodyReadTimeout, decompressing a
// gzip body. The limit MaxBodyBytes applies to the bytes received and, for gzip, to the
// decompressed bytes too. On success the deadline is cleared: a read failing at it later
// (net/http's background read while the Sink works) would cancel the request's context.
// (net/http's HTTP/1 server clears it too when the body ends; this does not rely on that.)
// On failure it is left in place so that what net/http drains after the answer stays bounded.
// The returned body is the JSON to parse (a UTF-8 byte order mark removed).
func (s *Server) readIngestBody(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, enc bodyEncoding, b []byte) (buf, body []byte, herr *httpError) {
	deadline := boundBody(r, rc, s.cfg.BodyReadTimeout)
	limit := s.cfg.MaxBodyBytes
	src := http.MaxBytesReader(w, r.Body, limit)
	var err error
	switch enc {
	case encGzip:
		buf, err = readGzip(b, src, limit)
	default:
		buf, err = readBody(b, src, r.ContentLength, limit)
	}
	if err != nil {
		return buf, nil, s.bodyReadError(w, enc, err)
	}
	if deadline {
		setBodyDeadline(rc, 0)
	}
	body, herr = checkBodyBytes(buf, enc)
	return buf, body, herr
}

// errDecompressedTooLarge is a gzip body that inflates beyond MaxBodyBytes.
var errDecompressedTooLarge = errors.New("decompressed body too large")

// readGzip appends the decompressed body of src to b, at most limit bytes. (A reader per
// request: gzip bodies are rare, and a pooled one would keep its last request reachable.)
func readGzip(b []byte, src io.Reader, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(src)
	if err != nil {
		return b, err
	}
	lr := &io.LimitedReader{R: zr, N: limit + 1}
	b, err = readBody(b, lr, -1, limit)
	if err == nil && lr.N <= 0 {
		err = errDecompressedTooLarge
	}
	return b, err
}

// bodyReadError is the answer to a body that could not be read.
func (s *Server) bodyReadError(w http.ResponseWriter, enc bodyEncoding, err error) *httpError {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return &httpError{status: http.StatusRequestEntityTooLarge, body: apiv1.ErrorResponse{
			Error: apiv1.ErrBodyTooLarge, Message: fmt.Sprintf("the body exceeds %d bytes; split the submission", s.cfg.MaxBodyBytes),
		}}
	case errors.Is(err, errDecompressedTooLarge):
		return &httpError{status: http.StatusRequestEntityTooLarge, body: apiv1.ErrorResponse{
			Error: apiv1.ErrBodyTooLarge, Message: fmt.Sprintf("the body exceeds %d bytes once decompressed; split the submission", s.cfg.MaxBodyBytes),
		}}
	case errors.Is(err, os.ErrDeadlineExceeded):
		// What remains of the body on the wire must not be read as another request.
		w.Header().Set("Connection", "close")
		return &httpError{status: http.StatusRequestTimeout, body: apiv1.ErrorResponse{
			Error: apiv1.ErrRequestTimeout, ResendSafe: true,
			Message: fmt.Sprintf("the body did not arrive within %s; nothing was written, resending the same request is safe", s.cfg.BodyReadTimeout),
		}}
	case enc == encGzip:
		return &httpError{status: http.StatusBadRequest, body: apiv1.ErrorResponse{
			Error:   apiv1.ErrMalformedBody,
			Message: fmt.Sprintf("the body is not valid gzip although the request says Content-Encoding: gzip (%v); nothing was written", err),
			Errors:  []apiv1.FieldError{{Field: "Content-Encoding", Message: "the body is not valid gzip"}},
		}}
	default:
		return malformed("", "reading the body: %s", err.Error())
	}
}

// Byte signatures recognized in a body that is not JSON.
var (
	utf8BOM   = []byte{0xEF, 0xBB, 0xBF}
	gzipMagic = []byte{0x1F, 0x8B}
	zstdMagic = []byte{0x28, 0xB5, 0x2F, 0xFD}
)

// checkBodyBytes refuses bodies whose first bytes show they are not UTF-8 JSON text, with a
// message naming the cause instead of a JSON syntax error at byte 0, and drops a UTF-8 byte
// order mark (RFC 8259 §8.1 allows ignoring it; Windows tools write one).
func checkBodyBytes(b []byte, enc bodyEncoding) ([]byte, *httpError) {
	bad := func(field, format string, args ...any) *httpError {
		msg := fmt.Sprintf(format, args...)
		e := &httpError{status: http.StatusBadRequest, body: apiv1.ErrorResponse{
			Error: apiv1.ErrMalformedBody, Message: msg + "; nothing was written",
		}}
		if field != "" {
			e.body.Errors = []apiv1.FieldError{{Field: field, Message: msg}}
		}
		return e
	}
	decompressed := ""
	if enc == encGzip {
		decompressed = " once decompressed"
	}
	switch {
	case bytes.HasPrefix(b, gzipMagic) && enc == encIdentity:
		return nil, bad("Content-Encoding", "the body is gzip-compressed but the request has no Content-Encoding: gzip header; send that header or an uncompressed body")
	case bytes.HasPrefix(b, gzipMagic):
		return nil, bad("Content-Encoding", "the body is gzip-compressed twice; compress it once")
	case bytes.HasPrefix(b, zstdMagic):
		return nil, bad("Content-Encoding", "the body%s is zstd-compressed, which is not supported; send it uncompressed or with Content-Encoding: gzip", decompressed)
	case bytes.HasPrefix(b, []byte{0xFE, 0xFF}), bytes.HasPrefix(b, []byte{0xFF, 0xFE}),
		len(b) >= 2 && (b[0] == 0 || b[1] == 0):
		return nil, bad("", "the body%s is UTF-16 or UTF-32 text; JSON must be sent as UTF-8", decompressed)
	}
	return bytes.TrimPrefix(b, utf8BOM), nil
}
