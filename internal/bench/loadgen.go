package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/conc/pool"

	"github.com/gameops/rollup/agentsim"
	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/api/apiv1"
)

// loadGen plays n agents against POST /v1/counts the way an HTTP load generator (wrk, hey)
// does: a fixed set of persistent HTTP/1.1 connections, requests prepared before the measured
// window and each written with one write, answers read with a minimal parser. It exists so
// `bench ingest` can measure the server's pipeline without the agents' own work — which on a
// real deployment runs on the agents' machines — taking CPU from the same two cores. Every
// answer is checked: status 200 and a body byte for byte equal to the answer that reports
// every item applied.
type loadGen struct {
	addr, token, project string
	leaves               []agentsim.Leaf
	agents               int
	seed                 uint64

	// onAck, when set, is called with the index (in Send's slice) of each request once its
	// answer is checked, from the connection's goroutine.
	onAck func(i int)

	mu    sync.Mutex
	idle  []*loadConn // connections kept across ticks
	conns int
}

type loadConn struct {
	c    net.Conn
	r    *bufio.Reader
	body []byte // response body, reused
}

// agentRequest is one agent's prepared request and the answer expected for it.
type agentRequest struct {
	agent int
	req   []byte // request head and body
	want  []byte // the 200 answer with every item applied
}

func newLoadGen(addr, token, project string, leaves []agentsim.Leaf, agents, conns int, seed uint64) *loadGen {
	return &loadGen{addr: addr, token: token, project: project, leaves: leaves, agents: agents, conns: conns, seed: seed}
}

// Prepare encodes every agent's submission of its share of the leaves for tick, observed at
// observed (the split and the counts are agentsim's), and the answer that reports all of
// them applied.
func (g *loadGen) Prepare(tick, observed time.Time) ([]agentRequest, error) {
	out := make([]agentRequest, g.agents)
	for a := range out {
		r, err := g.prepare(a, tick, observed)
		if err != nil {
			return nil, err
		}
		out[a] = r
	}
	return out, nil
}

func (g *loadGen) prepare(agent int, tick, observed time.Time) (agentRequest, error) {
	counts := agentsim.AgentCounts(g.leaves, g.agents, agent, g.seed, observed)
	id := "bench-" + strconv.FormatInt(tick.Unix(), 10) + "-" + strconv.Itoa(agent)
	r, err := newAgentRequest(g.token, g.project, id, tick, observed, counts)
	r.agent = agent
	return r, err
}

// newAgentRequest encodes one submission of counts to project (an HTTP/1.1 request with
// token) and the answer that reports every item applied.
func newAgentRequest(token, project, id string, tick, observed time.Time, counts []agentclient.Count) (agentRequest, error) {
	req := apiv1.CountsRequest{Project: project, Timestamp: tick, ObservedAt: &observed, SubmissionID: id, Counts: counts}

	// The body goes after a head whose Content-Length is patched in once the body is known.
	b := append([]byte(nil), "POST "+apiv1.CountsPath+" HTTP/1.1\r\nHost: rollup\r\nAuthorization: Bearer "...)
	b = append(b, token...)
	b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	lenAt := len(b)
	b = append(b, "          \r\n\r\n"...) // room for the length, padded with spaces
	bodyAt := len(b)
	b, err := req.AppendJSON(b)
	if err != nil {
		return agentRequest{}, fmt.Errorf("encode submission %s: %w", id, err)
	}
	digits := strconv.AppendInt(nil, int64(len(b)-bodyAt), 10)
	// Header values may carry trailing spaces (optional whitespace, RFC 9110 5.6.3).
	copy(b[lenAt:], digits)

	want := apiv1.CountsResponse{SubmissionID: id, Project: project, Timestamp: tick, Version: observed.UnixNano(),
		Items: make([]apiv1.ItemResult, len(counts)), Summary: apiv1.Summary{Applied: len(counts)}}
	for i, c := range counts {
		want.Items[i] = apiv1.ItemResult{Index: i, ID: c.ID, Type: c.Type, Status: apiv1.StatusApplied}
	}
	wantJSON, err := want.AppendJSON(nil)
	if err != nil {
		return agentRequest{}, fmt.Errorf("encode answer of submission %s: %w", id, err)
	}
	return agentRequest{req: b, want: append(wantJSON, '\n')}, nil
}

// Send sends the prepared requests over at most conns connections at once and checks every
// answer.
func (g *loadGen) Send(ctx context.Context, reqs []agentRequest) error {
	var next atomic.Int64
	p := pool.New().WithErrors().WithFirstError().WithContext(ctx).WithCancelOnError()
	for range min(g.conns, len(reqs)) {
		p.Go(func(ctx context.Context) error {
			lc, err := g.conn(ctx)
			if err != nil {
				return err
			}
			// One deadline for the connection's share of the tick, not one per request.
			if err := lc.c.SetDeadline(time.Now().Add(5 * time.Minute)); err != nil {
				_ = lc.c.Close()
				return fmt.Errorf("deadline: %w", err)
			}
			for {
				i := int(next.Add(1) - 1)
				if i >= len(reqs) || ctx.Err() != nil {
					g.release(lc)
					return nil
				}
				if err := lc.send(&reqs[i]); err != nil {
					_ = lc.c.Close()
					return fmt.Errorf("agent %d: %w", reqs[i].agent, err)
				}
				if g.onAck != nil {
					g.onAck(i)
				}
			}
		})
	}
	return p.Wait()
}

// Close closes the idle connections.
func (g *loadGen) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, lc := range g.idle {
		_ = lc.c.Close()
	}
	g.idle = nil
}

func (g *loadGen) conn(ctx context.Context) (*loadConn, error) {
	g.mu.Lock()
	if n := len(g.idle); n > 0 {
		lc := g.idle[n-1]
		g.idle = g.idle[:n-1]
		g.mu.Unlock()
		return lc, nil
	}
	g.mu.Unlock()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", g.addr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	return &loadConn{c: c, r: bufio.NewReaderSize(c, 16<<10)}, nil
}

func (g *loadGen) release(lc *loadConn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.idle = append(g.idle, lc)
}

func (lc *loadConn) send(r *agentRequest) error {
	if _, err := lc.c.Write(r.req); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	status, body, err := readHTTPResponse(lc.r, lc.body)
	if err != nil {
		return err
	}
	lc.body = body
	if status != 200 {
		return fmt.Errorf("HTTP %d: %s", status, body)
	}
	if !bytes.Equal(body, r.want) && !storedAll(body) {
		return fmt.Errorf("answer %s, want %s", clip(body), clip(r.want))
	}
	return nil
}

// storedAll reports whether an answer that is not the expected one (every item applied)
// still has every item stored: applied or stale. A stale item is one the writer's own resend
// found already written, after an attempt whose outcome it could not know (a saturated
// store): this version or a newer one is stored, which is what the agent needs.
func storedAll(body []byte) bool {
	var resp apiv1.CountsResponse
	if err := apiv1.DecodeCountsResponse(body, &resp); err != nil {
		return false
	}
	for _, it := range resp.Items {
		if it.Status != apiv1.StatusApplied && it.Status != apiv1.StatusStale {
			return false
		}
	}
	return len(resp.Items) > 0
}

// clip shortens an answer for an error message.
func clip(b []byte) string {
	const n = 400
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// maxAnswerBytes bounds an answer body (a 10,000-item answer is about 1 MB).
const maxAnswerBytes = 16 << 20

// readHTTPResponse reads one HTTP/1.1 response into buf and returns the status and the
// body. net/http's server sends small answers with a Content-Length and larger ones chunked.
func readHTTPResponse(r *bufio.Reader, buf []byte) (int, []byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, buf, fmt.Errorf("read status line: %w", err)
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, buf, fmt.Errorf("malformed status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil || status < 100 {
		return 0, buf, fmt.Errorf("malformed status line %q", line)
	}
	length, chunked := -1, false
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return 0, buf, fmt.Errorf("read header: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, buf, fmt.Errorf("malformed header %q", line)
		}
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil || length < 0 {
				return 0, buf, fmt.Errorf("malformed Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if !bytes.EqualFold(bytes.TrimSpace(value), []byte("chunked")) {
				return 0, buf, fmt.Errorf("unsupported Transfer-Encoding %q", value)
			}
			chunked = true
		}
	}
	buf = buf[:0]
	switch {
	case chunked:
		buf, err = readChunked(r, buf)
		return status, buf, err
	case length < 0:
		return 0, buf, errors.New("answer without Content-Length")
	}
	return status, buf, readN(r, &buf, length)
}

// readChunked appends a chunked body (RFC 9112 7.1) to buf; trailers are skipped.
func readChunked(r *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return buf, fmt.Errorf("read chunk size: %w", err)
		}
		size, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";")) // no chunk extensions expected
		n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 64)
		if err != nil || n < 0 {
			return buf, fmt.Errorf("malformed chunk size %q", line)
		}
		if n == 0 {
			for { // trailer section, up to the empty line
				line, err := r.ReadSlice('\n')
				if err != nil {
					return buf, fmt.Errorf("read trailer: %w", err)
				}
				if len(bytes.TrimRight(line, "\r\n")) == 0 {
					return buf, nil
				}
			}
		}
		if int64(len(buf))+n > maxAnswerBytes {
			return buf, fmt.Errorf("answer over the %d-byte limit", maxAnswerBytes)
		}
		if err := readN(r, &buf, int(n)); err != nil {
			return buf, err
		}
		line, err = r.ReadSlice('\n')
		if err != nil || len(bytes.TrimRight(line, "\r\n")) != 0 {
			return buf, fmt.Errorf("malformed chunk end %q", line)
		}
	}
}

// readN appends exactly n bytes of r to *buf.
func readN(r *bufio.Reader, buf *[]byte, n int) error {
	if len(*buf)+n > maxAnswerBytes {
		return fmt.Errorf("answer of %d bytes is over the %d-byte limit", len(*buf)+n, maxAnswerBytes)
	}
	b := slices.Grow(*buf, n)
	b = b[:len(b)+n]
	if _, err := io.ReadFull(r, b[len(*buf):]); err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	*buf = b
	return nil
}
