package api

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/gameops/rollup/api/apiv1"
	"github.com/gameops/rollup/bulk"
	"github.com/gameops/rollup/internal/testctx"
)

// gz compresses b with gzip.
func gz(b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return out.Bytes()
}

// padded is reqBody(twoItems) padded with spaces to exactly n bytes.
func padded(n int) []byte {
	b := []byte(reqBody(twoItems))
	return append(b, bytes.Repeat([]byte(" "), n-len(b))...)
}

// TestBodyHeadersAndBytes: what the Content-Type and Content-Encoding headers and the first
// bytes of a body may be, and the answer (status, code, the header named in errors, what the
// message says) for everything else. Nothing reaches the Sink unless the answer is 200, and
// then the items are the ones sent.
func TestBodyHeadersAndBytes(t *testing.T) {
	plain := []byte(reqBody(twoItems))
	utf16le := func(s string) []byte {
		var b []byte
		for _, u := range utf16.Encode([]rune(s)) {
			b = append(b, byte(u), byte(u>>8))
		}
		return b
	}
	corruptCRC := gz(plain)
	corruptCRC[len(corruptCRC)-8] ^= 0xFF
	type hdr = map[string][]string
	tests := []struct {
		name       string
		header     hdr
		body       []byte
		wantStatus int
		wantCode   string
		wantField  string // a header named in errors
		wantMsg    string
	}{
		// Content-Type: JSON, with a UTF-8 charset or none, or no Content-Type at all.
		{"no Content-Type", nil, plain, 200, "", "", ""},
		{"empty Content-Type", hdr{"Content-Type": {""}}, plain, 200, "", "", ""},
		{"application/json", hdr{"Content-Type": {"application/json"}}, plain, 200, "", "", ""},
		{"charset utf-8", hdr{"Content-Type": {"application/json; charset=utf-8"}}, plain, 200, "", "", ""},
		{"case-insensitive", hdr{"Content-Type": {"Application/JSON;Charset=\"UTF-8\""}}, plain, 200, "", "", ""},
		{"charset utf8", hdr{"Content-Type": {"application/json; charset=utf8"}}, plain, 200, "", "", ""},
		{"other parameter", hdr{"Content-Type": {"application/json; version=1"}}, plain, 200, "", "", ""},
		{"+json suffix", hdr{"Content-Type": {"application/vnd.rollup.counts+json"}}, plain, 200, "", "", ""},
		{"curl -d", hdr{"Content-Type": {"application/x-www-form-urlencoded"}}, plain, 415, apiv1.ErrUnsupportedMediaType, "Content-Type", "use curl --json"},
		{"fetch string body", hdr{"Content-Type": {"text/plain;charset=UTF-8"}}, plain, 415, apiv1.ErrUnsupportedMediaType, "Content-Type", `Content-Type "text/plain" is not JSON`},
		{"text/json", hdr{"Content-Type": {"text/json"}}, plain, 415, apiv1.ErrUnsupportedMediaType, "Content-Type", "send Content-Type: application/json"},
		{"multipart", hdr{"Content-Type": {"multipart/form-data; boundary=x"}}, plain, 415, apiv1.ErrUnsupportedMediaType, "Content-Type", "not JSON"},
		{"+json outside application", hdr{"Content-Type": {"text/x+json"}}, plain, 415, apiv1.ErrUnsupportedMediaType, "Content-Type", "not JSON"},
		{"latin-1", hdr{"Content-Type": {"application/json; charset=ISO-8859-1"}}, plain, 415, apiv1.ErrUnsupportedMediaType, "Content-Type", `charset "ISO-8859-1" is not supported: the body must be UTF-8`},
		{"utf-16 charset", hdr{"Content-Type": {"application/json; charset=utf-16"}}, plain, 415, apiv1.ErrUnsupportedMediaType, "Content-Type", "must be UTF-8"},
		{"unreadable", hdr{"Content-Type": {"application/json; charset"}}, plain, 415, apiv1.ErrUnsupportedMediaType, "Content-Type", "cannot be read"},
		{"twice", hdr{"Content-Type": {"application/json", "text/plain"}}, plain, 415, apiv1.ErrUnsupportedMediaType, "Content-Type", "given 2 times"},
		{"long value shortened", hdr{"Content-Type": {"text/" + strings.Repeat("x", 500)}}, plain, 415, apiv1.ErrUnsupportedMediaType, "Content-Type", `xxxx"…`},

		// Content-Encoding: none, identity or gzip.
		{"identity", hdr{"Content-Encoding": {"identity"}}, plain, 200, "", "", ""},
		{"gzip", hdr{"Content-Encoding": {"gzip"}}, gz(plain), 200, "", "", ""},
		{"GZIP with JSON type", hdr{"Content-Encoding": {"GZIP"}, "Content-Type": {"application/json"}}, gz(plain), 200, "", "", ""},
		{"x-gzip", hdr{"Content-Encoding": {"x-gzip"}}, gz(plain), 200, "", "", ""},
		{"gzip and identity", hdr{"Content-Encoding": {"identity, gzip"}}, gz(plain), 200, "", "", ""},
		{"two gzip members", hdr{"Content-Encoding": {"gzip"}}, append(gz(plain[:20]), gz(plain[20:])...), 200, "", "", ""},
		{"br", hdr{"Content-Encoding": {"br"}}, plain, 415, apiv1.ErrUnsupportedMediaType, "Content-Encoding", `Content-Encoding "br" is not supported; send the body uncompressed or with Content-Encoding: gzip`},
		{"deflate", hdr{"Content-Encoding": {"deflate"}}, plain, 415, apiv1.ErrUnsupportedMediaType, "Content-Encoding", `"deflate" is not supported`},
		{"zstd", hdr{"Content-Encoding": {"zstd"}}, plain, 415, apiv1.ErrUnsupportedMediaType, "Content-Encoding", `"zstd" is not supported`},
		{"gzip twice", hdr{"Content-Encoding": {"gzip", "gzip"}}, gz(gz(plain)), 415, apiv1.ErrUnsupportedMediaType, "Content-Encoding", "several codings"},
		{"gzip header, plain body", hdr{"Content-Encoding": {"gzip"}}, plain, 400, apiv1.ErrMalformedBody, "Content-Encoding", "not valid gzip although the request says Content-Encoding: gzip"},
		{"gzip truncated", hdr{"Content-Encoding": {"gzip"}}, gz(plain)[:30], 400, apiv1.ErrMalformedBody, "Content-Encoding", "not valid gzip"},
		{"gzip bad checksum", hdr{"Content-Encoding": {"gzip"}}, corruptCRC, 400, apiv1.ErrMalformedBody, "Content-Encoding", "checksum"},
		{"gzip with trailing garbage", hdr{"Content-Encoding": {"gzip"}}, append(gz(plain), "xyz"...), 400, apiv1.ErrMalformedBody, "Content-Encoding", "not valid gzip"},
		{"gzip inside gzip", hdr{"Content-Encoding": {"gzip"}}, gz(gz(plain)), 400, apiv1.ErrMalformedBody, "Content-Encoding", "compressed twice"},
		{"gzip without header", nil, gz(plain), 400, apiv1.ErrMalformedBody, "Content-Encoding", "gzip-compressed but the request has no Content-Encoding: gzip header"},
		{"zstd without header", nil, []byte{0x28, 0xB5, 0x2F, 0xFD, 0, 0}, 400, apiv1.ErrMalformedBody, "Content-Encoding", "zstd-compressed, which is not supported"},

		// Limits: the bytes received, and the decompressed bytes.
		{"plain at the limit", nil, padded(4096), 200, "", "", ""},
		{"plain over the limit", nil, padded(4097), 413, apiv1.ErrBodyTooLarge, "", "exceeds 4096 bytes"},
		{"gzip inflating to the limit", hdr{"Content-Encoding": {"gzip"}}, gz(padded(4096)), 200, "", "", ""},
		{"gzip inflating over the limit", hdr{"Content-Encoding": {"gzip"}}, gz(padded(4097)), 413, apiv1.ErrBodyTooLarge, "", "exceeds 4096 bytes once decompressed"},
		{"gzip bomb", hdr{"Content-Encoding": {"gzip"}}, gz(padded(1 << 20)), 413, apiv1.ErrBodyTooLarge, "", "once decompressed"},

		// Text encodings: UTF-8, with or without a byte order mark.
		{"UTF-8 byte order mark", nil, append([]byte{0xEF, 0xBB, 0xBF}, plain...), 200, "", "", ""},
		{"UTF-8 byte order mark in gzip", hdr{"Content-Encoding": {"gzip"}}, gz(append([]byte{0xEF, 0xBB, 0xBF}, plain...)), 200, "", "", ""},
		{"UTF-16LE with BOM", nil, append([]byte{0xFF, 0xFE}, utf16le(string(plain))...), 400, apiv1.ErrMalformedBody, "", "UTF-16 or UTF-32 text; JSON must be sent as UTF-8"},
		{"UTF-16LE without BOM", nil, utf16le(string(plain)), 400, apiv1.ErrMalformedBody, "", "UTF-16"},
		{"UTF-16 in gzip", hdr{"Content-Encoding": {"gzip"}}, gz(utf16le(string(plain))), 400, apiv1.ErrMalformedBody, "", "once decompressed is UTF-16"},
		{"two byte order marks", nil, append([]byte{0xEF, 0xBB, 0xBF, 0xEF, 0xBB, 0xBF}, plain...), 400, apiv1.ErrMalformedJSON, "", "invalid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink := &fakeSink{}
			srv := newServer(testConfig(t, sink), newFakeTokens())
			req := httptest.NewRequest(http.MethodPost, apiv1.CountsPath, bytes.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+tokenA)
			for k, vs := range tc.header {
				req.Header[k] = vs
			}
			r := do(t, srv, req)
			if r.status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", r.status, tc.wantStatus, r.raw)
			}
			if tc.wantStatus == http.StatusOK {
				if sink.numCalls() != 1 || len(sink.calls[0]) != 2 || sink.calls[0][0].ID != "srv-1" || sink.calls[0][0].Online != 3 || sink.calls[0][1].ID != "srv-2" {
					t.Fatalf("the sink got %+v", sink.calls)
				}
				return
			}
			if sink.numCalls() != 0 {
				t.Errorf("the sink was called for a %d", r.status)
			}
			if r.err.Error != tc.wantCode || !strings.Contains(r.err.Message, tc.wantMsg) {
				t.Errorf("answer %s, want code %s saying %q", r.raw, tc.wantCode, tc.wantMsg)
			}
			if tc.wantField != "" && (len(r.err.Errors) != 1 || r.err.Errors[0].Field != tc.wantField || r.err.Errors[0].Index != nil) {
				t.Errorf("errors %+v, want one naming the header %s", r.err.Errors, tc.wantField)
			}
			if ae := r.header.Get("Accept-Encoding"); (r.status == 415 && tc.wantField == "Content-Encoding") != (ae == "gzip") {
				t.Errorf("Accept-Encoding %q", ae)
			}
			if got := srv.Stats().Rejections[tc.wantCode]; got != 1 {
				t.Errorf("stats count %d %s rejections", got, tc.wantCode)
			}
		})
	}
}

// TestBodyChecksAfterAuth: a request with a bad token and a bad Content-Type is 401 (who
// comes first; the body is not read).
func TestBodyChecksAfterAuth(t *testing.T) {
	srv := newServer(testConfig(t, &fakeSink{}), newFakeTokens())
	req := httptest.NewRequest(http.MethodPost, apiv1.CountsPath, failingReader{t})
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Content-Encoding", "br")
	if r := do(t, srv, req); r.status != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401: %s", r.status, r.raw)
	}
	req = httptest.NewRequest(http.MethodPost, apiv1.CountsPath, failingReader{t})
	req.Header.Set("Authorization", "Bearer "+tokenA)
	req.Header.Set("Content-Encoding", "br")
	if r := do(t, srv, req); r.status != http.StatusUnsupportedMediaType {
		t.Fatalf("status %d, want 415 without reading the body: %s", r.status, r.raw)
	}
}

// rawConn is a client connection that writes HTTP/1.1 by hand, to stall mid-body.
type rawConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.SetDeadline(testctx.Deadline(t)); err != nil { // a hang fails with a message
		t.Fatal(err)
	}
	return &rawConn{c: c, r: bufio.NewReader(c)}
}

// send writes the request head of a body of length bytes (with the token), then part.
func (rc *rawConn) send(t *testing.T, token string, length int, part []byte) {
	t.Helper()
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: rollup\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		apiv1.CountsPath, token, length)
	if _, err := rc.c.Write(append([]byte(head), part...)); err != nil {
		t.Fatal(err)
	}
}

// answer reads one response and decodes its error body.
func (rc *rawConn) answer(t *testing.T) (*http.Response, apiv1.ErrorResponse) {
	t.Helper()
	res, err := http.ReadResponse(rc.r, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	var e apiv1.ErrorResponse
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("%d answer %q: %v", res.StatusCode, body, err)
		}
	}
	return res, e
}

// closed reports whether the server closed the connection (after its answer), waiting at
// most until the test's deadline.
func (rc *rawConn) closed(t *testing.T) bool {
	t.Helper()
	_, err := rc.r.ReadByte()
	return errors.Is(err, io.EOF)
}

// TestStalledBodyIs408: a client that sends half its body and stalls is answered 408 (JSON,
// resend_safe) BodyReadTimeout after the server starts reading, and its connection is
// closed; nothing reaches the Sink. A body that trickles in is cut the same way: the timeout
// bounds the whole body, not the gap between bytes.
func TestStalledBodyIs408(t *testing.T) {
	const timeout = 300 * time.Millisecond
	// slack bounds how late the 408 may come on a loaded machine; the assertion it backs is
	// "the stall is cut", which without a deadline would never happen.
	const slack = 10 * time.Second
	sink := &fakeSink{}
	cfg := testConfig(t, sink)
	cfg.BodyReadTimeout = timeout
	tokens := newFakeTokens()
	hs := httptest.NewServer(newServer(cfg, tokens))
	t.Cleanup(hs.Close)
	body := []byte(reqBody(twoItems))

	t.Run("stalled", func(t *testing.T) {
		rc := dialRaw(t, hs.Listener.Addr().String())
		start := time.Now() // before the server can have started reading
		rc.send(t, tokenA, len(body), body[:len(body)/2])
		sent := time.Now()
		res, e := rc.answer(t) // the signal: the answer arrives, or the test times out
		got := time.Now()
		if res.StatusCode != http.StatusRequestTimeout || e.Error != apiv1.ErrRequestTimeout || !e.ResendSafe ||
			!strings.Contains(e.Message, "did not arrive within 300ms") {
			t.Fatalf("answer %d %+v, want 408 request_timeout", res.StatusCode, e)
		}
		if got.Sub(start) < timeout {
			t.Errorf("408 after %v, before the %v timeout", got.Sub(start), timeout)
		}
		if got.Sub(sent) > timeout+slack {
			t.Errorf("408 %v after the stall, want about %v", got.Sub(sent), timeout)
		}
		if !res.Close || !rc.closed(t) {
			t.Error("the connection was not closed after the 408")
		}
		t.Logf("stalled body: 408 after %v (timeout %v)", got.Sub(sent), timeout)
	})

	t.Run("trickling", func(t *testing.T) {
		rc := dialRaw(t, hs.Listener.Addr().String())
		sent := time.Now()
		rc.send(t, tokenA, len(body), nil)
		answered := make(chan struct{})
		trickled := make(chan int)
		go func() { // one byte per tick, far slower than the timeout allows
			tick := time.NewTicker(timeout / 10)
			defer tick.Stop()
			n := 0
			defer func() { trickled <- n }()
			for ; n < len(body)-1; n++ {
				select {
				case <-answered:
					return
				case <-tick.C:
				}
				if _, err := rc.c.Write(body[n : n+1]); err != nil {
					return
				}
			}
		}()
		res, e := rc.answer(t)
		got := time.Now()
		close(answered)
		n := <-trickled
		if res.StatusCode != http.StatusRequestTimeout || e.Error != apiv1.ErrRequestTimeout {
			t.Fatalf("answer %d %+v after %d bytes, want 408", res.StatusCode, e, n)
		}
		if got.Sub(sent) < timeout || got.Sub(sent) > timeout+slack {
			t.Errorf("408 after %v, want about %v", got.Sub(sent), timeout)
		}
		if n == 0 {
			t.Error("no byte trickled in before the 408: this is the stalled case")
		}
	})

	t.Run("refused before the body", func(t *testing.T) {
		// A 401 leaves the body unread; net/http drains it before answering, which the
		// deadline bounds too.
		rc := dialRaw(t, hs.Listener.Addr().String())
		rc.send(t, "unknown-token", len(body), body[:10])
		sent := time.Now()
		res, _ := rc.answer(t)
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", res.StatusCode)
		}
		if d := time.Since(sent); d > timeout+slack {
			t.Errorf("401 after %v", d)
		}
	})

	t.Run("read API with a stalled body", func(t *testing.T) {
		// A read takes no body; net/http drains one after the answer, within the deadline.
		rc := dialRaw(t, hs.Listener.Addr().String())
		head := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: rollup\r\nAuthorization: Bearer unknown\r\nContent-Length: 100\r\n\r\n0123456789", apiv1.ProjectsPath)
		if _, err := rc.c.Write([]byte(head)); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		res, _ := rc.answer(t)
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", res.StatusCode)
		}
		if d := time.Since(sent); d > timeout+slack {
			t.Errorf("401 after %v", d)
		}
	})

	t.Run("no body, slow answer", func(t *testing.T) {
		// Without a body there is no deadline: a read request's context is not cancelled
		// when the answer takes longer than the body timeout (here: a token lookup).
		rc := dialRaw(t, hs.Listener.Addr().String())
		tokens.mu.Lock()
		tokens.block = make(chan struct{})
		block := tokens.block
		tokens.mu.Unlock()
		fmt.Fprintf(rc.c, "POST %s HTTP/1.1\r\nHost: rollup\r\nAuthorization: Bearer %s\r\nContent-Length: 0\r\n\r\n", apiv1.CountsPath, tokenB)
		timer := time.AfterFunc(3*timeout, func() { close(block) }) // the store answers after 3 timeouts
		defer timer.Stop()
		res, e := rc.answer(t)
		if res.StatusCode != http.StatusBadRequest || e.Error != apiv1.ErrMalformedJSON {
			t.Fatalf("answer %d %+v, want 400 malformed_json (the empty body), not a cancelled lookup", res.StatusCode, e)
		}
	})

	if sink.numCalls() != 0 {
		t.Errorf("the sink was called %d times", sink.numCalls())
	}
}

// TestBodyDeadlineEndsWithTheBody: once the body is read, the read deadline no longer
// applies: a Sink slower than BodyReadTimeout still gets its full SubmitTimeout (an expired
// deadline would make net/http cancel the request's context), and the connection is reused.
func TestBodyDeadlineEndsWithTheBody(t *testing.T) {
	const timeout = 100 * time.Millisecond
	var canceled atomic.Int32
	sink := &fakeSink{fn: func(ctx context.Context, items []bulk.Item) ([]bulk.Result, error) {
		select { // a slow store: answers after three body timeouts
		case <-time.After(3 * timeout):
		case <-ctx.Done():
			canceled.Add(1)
			return nil, ctx.Err()
		}
		res := make([]bulk.Result, len(items))
		for i := range res {
			res[i].Outcome = bulk.OutcomeApplied
		}
		return res, nil
	}}
	cfg := testConfig(t, sink)
	cfg.BodyReadTimeout = timeout
	cfg.SubmitTimeout = time.Hour
	hs := httptest.NewServer(newServer(cfg, newFakeTokens()))
	t.Cleanup(hs.Close)
	rc := dialRaw(t, hs.Listener.Addr().String())
	body := []byte(reqBody(twoItems))
	for i := range 2 {
		rc.send(t, tokenA, len(body), body)
		res, e := rc.answer(t)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d %+v (sink contexts canceled: %d)", i, res.StatusCode, e, canceled.Load())
		}
		if res.Close {
			t.Fatalf("request %d: the connection is closed", i)
		}
	}
}

// FuzzIngestBody: whatever the Content-Type, Content-Encoding and bytes, the answer is a 200
// for exactly the bodies the parser accepts (after decompression and a byte order mark), or a
// 4xx in the JSON error schema whose errors name a header, a field or an item consistently;
// the Sink sees only accepted requests, with their items.
func FuzzIngestBody(f *testing.F) {
	plain := []byte(reqBody(twoItems))
	for _, s := range []struct {
		ct, ce   string
		compress bool
		body     []byte
	}{
		{"application/json", "", false, plain},
		{"", "gzip", true, plain},
		{"application/json; charset=utf-8", "x-gzip", true, plain},
		{"text/plain", "", false, plain},
		{"application/json; charset=latin1", "", false, plain},
		{"", "br", false, plain},
		{"", "gzip, gzip", true, plain},
		{"", "", false, gz(plain)},
		{"", "gzip", false, plain},
		{"", "", false, append([]byte{0xEF, 0xBB, 0xBF}, plain...)},
		{"", "", false, []byte{0xFF, 0xFE, '{', 0, '}', 0}},
		{"", "", false, []byte(reqBody(`[{"id":"a","type":"t","online":-0}]`))},
		{"", "", false, []byte(reqBody(`[{"id":"é","type":"t","online":01}]`))},
	} {
		f.Add(s.ct, s.ce, s.compress, s.body)
	}
	f.Fuzz(func(t *testing.T, ct, ce string, compress bool, body []byte) {
		sink := &fakeSink{}
		cfg := testConfig(t, sink)
		cfg.Logger = nil
		srv := newServer(cfg, newFakeTokens())
		sent := body
		if compress {
			sent = gz(body)
		}
		req := httptest.NewRequest(http.MethodPost, apiv1.CountsPath, bytes.NewReader(sent))
		req.Header.Set("Authorization", "Bearer "+tokenA)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		if ce != "" {
			req.Header.Set("Content-Encoding", ce)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if ctype := rec.Header().Get("Content-Type"); ctype != "application/json" {
			t.Fatalf("answer Content-Type %q", ctype)
		}
		if rec.Code == http.StatusOK {
			sub, herr := decodeRequest(bytes.TrimPrefix(body, []byte{0xEF, 0xBB, 0xBF}), limits{
				maxItems: cfg.MaxItems, maxOnline: cfg.MaxOnline, tick: 5 * time.Minute, lateWindow: DefaultLateWindow, futureSkew: DefaultFutureSkew,
			}, testNow())
			if herr != nil {
				t.Fatalf("200 for a body the parser rejects: %v", herr)
			}
			if !compress && len(body) > int(cfg.MaxBodyBytes) {
				t.Fatalf("200 for %d bytes, limit %d", len(body), cfg.MaxBodyBytes)
			}
			if len(sub.items) > 0 && (sink.numCalls() != 1 || len(sink.calls[0]) != len(sub.items)) {
				t.Fatalf("the sink got %d calls for %d items", sink.numCalls(), len(sub.items))
			}
			return
		}
		if sink.numCalls() != 0 {
			t.Fatalf("the sink was called for a %d", rec.Code)
		}
		switch rec.Code {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity,
			http.StatusForbidden: // a project other than the token's
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		var e apiv1.ErrorResponse
		dec := json.NewDecoder(rec.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil || e.Error == "" || e.Message == "" {
			t.Fatalf("answer %+v: %v", e, err)
		}
		for _, fe := range e.Errors {
			checkIndex(t, fe)
		}
		if rec.Code == http.StatusForbidden && (len(e.Errors) != 1 || e.Errors[0].Field != "project") {
			t.Fatalf("403 %+v", e)
		}
		if rec.Code == http.StatusUnsupportedMediaType {
			if len(e.Errors) != 1 || (e.Errors[0].Field != "Content-Type" || ct == "") && (e.Errors[0].Field != "Content-Encoding" || ce == "") {
				t.Fatalf("415 %+v for Content-Type %q, Content-Encoding %q", e, ct, ce)
			}
		}
	})
}
