package bench

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/agentsim"
)

func TestReadHTTPResponse(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		wantStatus int
		wantBody   string
		wantErr    string
		// wantRetryAfter is the Retry-After read ("": none).
		wantRetryAfter string
		wantClose      bool
	}{
		{"ok", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", 200, "{}", "", "", false},
		{"lower-case header, spaces", "HTTP/1.1 503 Service Unavailable\r\ncontent-length:  5 \r\n\r\nbusy!", 503, "busy!", "", "", false},
		{"empty body", "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", 204, "", "", "", false},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 1\n\nx", 200, "x", "", "", false},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{\"\r\nA;x=y\r\n:[1,2,3,4]\r\n0\r\nX-T: 1\r\n\r\n", 200, `{":[1,2,3,4]`, "", "", false},
		{"chunked, bad size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, "", "malformed chunk size", "", false},
		{"chunked, missing CRLF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}xx0\r\n\r\n", 0, "", "malformed chunk end", "", false},
		{"chunked, huge", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffff\r\n", 0, "", "over the", "", false},
		{"gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 0, "", "unsupported Transfer-Encoding", "", false},
		{"no length", "HTTP/1.1 200 OK\r\n\r\n{}", 0, "", "without Content-Length", "", false},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0, "", "malformed Content-Length", "", false},
		{"bad status", "HTTP/1.1 2x0 OK\r\n\r\n", 0, "", "malformed status line", "", false},
		{"not HTTP", "SSH-2.0-OpenSSH\r\n\r\n", 0, "", "malformed status line", "", false},
		{"header without colon", "HTTP/1.1 200 OK\r\nContent-Length 2\r\n\r\n{}", 0, "", "malformed header", "", false},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", 0, "", "read body", "", false},
		{"huge length", "HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n", 0, "", "over the", "", false},
		{"status below 100", "HTTP/1.1 099 x\r\n\r\n", 0, "", "malformed status line", "", false},
		{"cut in headers", "HTTP/1.1 200 OK\r\nContent-Len", 0, "", "read header", "", false},
		{"retry after seconds", "HTTP/1.1 503 x\r\nRetry-After: 7\r\nContent-Length: 0\r\n\r\n", 503, "", "", "7s", false},
		{"retry after zero", "HTTP/1.1 503 x\r\nretry-after:0\r\nContent-Length: 0\r\n\r\n", 503, "", "", "0s", false},
		{"retry after negative", "HTTP/1.1 503 x\r\nRetry-After: -3\r\nContent-Length: 0\r\n\r\n", 503, "", "", "0s", false},
		{"retry after date", "HTTP/1.1 429 x\r\nRetry-After: Wed, 25 Nov 2026 10:00:12 GMT\r\nContent-Length: 0\r\n\r\n", 429, "", "", "12s", false},
		{"retry after past date", "HTTP/1.1 429 x\r\nRetry-After: Wed, 25 Nov 2026 09:00:00 GMT\r\nContent-Length: 0\r\n\r\n", 429, "", "", "0s", false},
		{"retry after unreadable", "HTTP/1.1 503 x\r\nRetry-After: soon\r\nContent-Length: 0\r\n\r\n", 503, "", "", "", false},
		{"retry after huge", "HTTP/1.1 503 x\r\nRetry-After: 99999999999\r\nContent-Length: 0\r\n\r\n", 503, "", "", "24h0m0s", false},
		{"connection close", "HTTP/1.1 503 x\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n", 503, "", "", "", true},
	}
	now := func() time.Time { return time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC) }
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := readHTTPResponse(bufio.NewReader(strings.NewReader(tc.in)), nil, now)
			status, body := a.status, a.body
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if status != tc.wantStatus || string(body) != tc.wantBody {
				t.Fatalf("got %d %q, want %d %q", status, body, tc.wantStatus, tc.wantBody)
			}
			if got := a.retryAfter.String(); a.retryAfterSet != (tc.wantRetryAfter != "") || a.retryAfterSet && got != tc.wantRetryAfter {
				t.Fatalf("Retry-After %s (set %v), want %q", got, a.retryAfterSet, tc.wantRetryAfter)
			}
			if a.close != tc.wantClose {
				t.Fatalf("close %v, want %v", a.close, tc.wantClose)
			}
		})
	}
}

// FuzzReadHTTPResponse checks the load generator's response parser never panics and never
// returns more body than the input holds.
func FuzzReadHTTPResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"))
	f.Add([]byte("HTTP/1.0 404 x\ncontent-length:0\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := readHTTPResponse(bufio.NewReader(bytes.NewReader(in)), nil, time.Now)
		if err == nil && len(a.body) > len(in) {
			t.Fatalf("body of %d bytes from %d bytes of input", len(a.body), len(in))
		}
	})
}

// TestLoadConnSend checks that the load generator accepts the answer that reports every item
// of the request applied (byte for byte) or stored (applied or stale: the writer's own resend
// after an unknown outcome finds its write), and nothing else.
func TestLoadConnSend(t *testing.T) {
	g := newLoadGen("unused", "tok", "p", []agentsim.Leaf{{ID: "a", Type: "process"}, {ID: "b", Type: "process"}}, 1, 1, 7)
	tick := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	r, err := g.prepare(0, tick, tick.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	stale := bytes.Replace(r.want, []byte(`"status":"applied"`), []byte(`"status":"stale"`), 1)
	rejected := bytes.Replace(r.want, []byte(`"status":"applied"`), []byte(`"status":"rejected"`), 1)
	answer := func(status string, body []byte) string {
		return "HTTP/1.1 " + status + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)
	}
	tests := []struct {
		name, answer, wantErr string
		// wantResend: the error is a *resendError (the request may be sent again) of status.
		wantResend bool
		wantStatus int
	}{
		{"every item applied", answer("200 OK", r.want), "", false, 0},
		{"one item stale", answer("200 OK", stale), "", false, 0},
		{"one item rejected", answer("200 OK", rejected), "want", false, 0},
		{"not an answer", answer("200 OK", []byte(`{"x":1}`)), "want", false, 0},
		{"unavailable", answer("503 Service Unavailable", []byte("busy")), "HTTP 503", true, 503},
		{"too many requests", answer("429 Too Many Requests", nil), "HTTP 429", true, 429},
		{"request timeout", answer("408 Request Timeout", nil), "HTTP 408", true, 408},
		{"internal error", answer("500 Internal Server Error", nil), "HTTP 500", true, 500},
		{"bad request", answer("400 Bad Request", []byte(`{"error":"malformed_json"}`)), "HTTP 400", false, 0},
		{"forbidden", answer("403 Forbidden", nil), "HTTP 403", false, 0},
		{"cut short", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", "read body", true, 0},
		{"closed before the answer", "", "read status line", true, 0},
		{"malformed", "HTTP/1.1 2x0 OK\r\n\r\n", "malformed status line", false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer func() { _ = client.Close() }()
			go func() {
				defer func() { _ = server.Close() }()
				req := make([]byte, len(r.req))
				if _, err := io.ReadFull(server, req); err != nil || !bytes.Equal(req, r.req) {
					return
				}
				_, _ = server.Write([]byte(tc.answer))
			}()
			lc := &loadConn{c: client, r: bufio.NewReader(client)}
			err := lc.send(&r)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
			}
			var re *resendError
			if errors.As(err, &re) != tc.wantResend || tc.wantResend && re.status != tc.wantStatus {
				t.Fatalf("err %v (%#v): want resendable %v of status %d", err, re, tc.wantResend, tc.wantStatus)
			}
		})
	}
	if !bytes.Contains(r.req, []byte("Authorization: Bearer tok\r\n")) || !bytes.Contains(r.want, []byte(`"summary":{"applied":2,`)) {
		t.Fatalf("prepared request %q, answer %q", r.req, r.want)
	}
}
