package bench

import (
	"bufio"
	"bytes"
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
	}{
		{"ok", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", 200, "{}", ""},
		{"lower-case header, spaces", "HTTP/1.1 503 Service Unavailable\r\ncontent-length:  5 \r\n\r\nbusy!", 503, "busy!", ""},
		{"empty body", "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", 204, "", ""},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 1\n\nx", 200, "x", ""},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{\"\r\nA;x=y\r\n:[1,2,3,4]\r\n0\r\nX-T: 1\r\n\r\n", 200, `{":[1,2,3,4]`, ""},
		{"chunked, bad size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, "", "malformed chunk size"},
		{"chunked, missing CRLF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}xx0\r\n\r\n", 0, "", "malformed chunk end"},
		{"chunked, huge", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffff\r\n", 0, "", "over the"},
		{"gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 0, "", "unsupported Transfer-Encoding"},
		{"no length", "HTTP/1.1 200 OK\r\n\r\n{}", 0, "", "without Content-Length"},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0, "", "malformed Content-Length"},
		{"bad status", "HTTP/1.1 2x0 OK\r\n\r\n", 0, "", "malformed status line"},
		{"not HTTP", "SSH-2.0-OpenSSH\r\n\r\n", 0, "", "malformed status line"},
		{"header without colon", "HTTP/1.1 200 OK\r\nContent-Length 2\r\n\r\n{}", 0, "", "malformed header"},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", 0, "", "read body"},
		{"huge length", "HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n", 0, "", "over the"},
		{"status below 100", "HTTP/1.1 099 x\r\n\r\n", 0, "", "malformed status line"},
		{"cut in headers", "HTTP/1.1 200 OK\r\nContent-Len", 0, "", "read header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body, err := readHTTPResponse(bufio.NewReader(strings.NewReader(tc.in)), nil)
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
		_, body, err := readHTTPResponse(bufio.NewReader(bytes.NewReader(in)), nil)
		if err == nil && len(body) > len(in) {
			t.Fatalf("body of %d bytes from %d bytes of input", len(body), len(in))
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
	}{
		{"every item applied", answer("200 OK", r.want), ""},
		{"one item stale", answer("200 OK", stale), ""},
		{"one item rejected", answer("200 OK", rejected), "want"},
		{"not an answer", answer("200 OK", []byte(`{"x":1}`)), "want"},
		{"unavailable", answer("503 Service Unavailable", []byte("busy")), "HTTP 503"},
		{"cut short", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", "read body"},
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
		})
	}
	if !bytes.Contains(r.req, []byte("Authorization: Bearer tok\r\n")) || !bytes.Contains(r.want, []byte(`"summary":{"applied":2,`)) {
		t.Fatalf("prepared request %q, answer %q", r.req, r.want)
	}
}
