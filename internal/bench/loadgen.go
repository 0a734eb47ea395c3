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
	// resend is when to resend a request whose outcome is unknown.
	resend resendPolicy

	mu    sync.Mutex
	idle  []*loadConn // connections kept across ticks
	conns int
}

type loadConn struct {
	c        net.Conn
	r        *bufio.Reader
	body     []byte    // response body, reused
	deadline time.Time // of c
	closing  bool      // the last answer said "Connection: close"
}

// agentRequest is one agent's prepared request and the answer expected for it.
type agentRequest struct {
	agent int
	req   []byte // request head and body
	want  []byte // the 200 answer with every item applied
}

func newLoadGen(addr, token, project string, leaves []agentsim.Leaf, agents, conns int, seed uint64) *loadGen {
	return &loadGen{addr: addr, token: token, project: project, leaves: leaves, agents: agents, conns: conns, seed: seed,
		resend: defaultResendPolicy()}
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
// answer. A request whose outcome is unknown (a 5xx, 408 or 429 answer, a transport failure)
// is resent on the same connection after the server's Retry-After, or on a new one after a
// backoff, until it is acknowledged or ctx ends (resend.go); the stats count the resends and
// the waits.
func (g *loadGen) Send(ctx context.Context, reqs []agentRequest) (sendStats, error) {
	var next atomic.Int64
	n := min(g.conns, len(reqs))
	stats := make([]sendStats, n)
	p := pool.New().WithErrors().WithFirstError().WithContext(ctx).WithCancelOnError()
	for w := range n {
		p.Go(func(ctx context.Context) error {
			st := &stats[w]
			start := time.Now()
			defer func() { st.busy = time.Since(start) }()
			var lc *loadConn
			for {
				i := int(next.Add(1) - 1)
				if i >= len(reqs) {
					if lc != nil {
						g.release(lc)
					}
					return nil
				}
				if err := ctx.Err(); err != nil {
					if lc != nil {
						_ = lc.c.Close()
					}
					return context.Cause(ctx)
				}
				if err := g.deliver(ctx, &lc, &reqs[i], st); err != nil {
					if lc != nil {
						_ = lc.c.Close()
					}
					return fmt.Errorf("agent %d: %w", reqs[i].agent, err)
				}
				if g.onAck != nil {
					g.onAck(i)
				}
			}
		})
	}
	err := p.Wait()
	var total sendStats
	for _, s := range stats {
		total.add(s)
	}
	return total, err
}

// requestTimeout bounds one attempt: the connection's deadline is pushed this far ahead
// whenever less than half of it remains (one deadline for many requests, not one each).
const requestTimeout = 5 * time.Minute

// deliver sends r until its answer is checked, resending it while its outcome is unknown.
// *lc is the connection to use (nil: dial one); a transport failure closes it and leaves nil.
func (g *loadGen) deliver(ctx context.Context, lc **loadConn, r *agentRequest, st *sendStats) error {
	var first time.Time
	for n := 0; ; n++ {
		err := g.attempt(ctx, lc, r)
		var re *resendError
		if !errors.As(err, &re) {
			return err // nil: acknowledged
		}
		if n == 0 {
			first = time.Now()
		} else if since := time.Since(first); since > g.resend.giveUp {
			return fmt.Errorf("not acknowledged after %d resends over %s: %w", n, since.Round(time.Second), re)
		}
		d := g.resend.delay(n, re)
		st.resends++
		st.mostResends = max(st.mostResends, n+1)
		if st.byStatus == nil {
			st.byStatus = map[int]int{}
		}
		st.byStatus[re.status]++
		st.waited += d
		if err := g.resend.sleep(ctx, d); err != nil {
			return fmt.Errorf("%w (resend %d; last failure: %w)", err, n+1, re)
		}
	}
}

// attempt sends r once on *lc (dialled when nil). Its error is a *resendError when the
// request may be sent again.
func (g *loadGen) attempt(ctx context.Context, lc **loadConn, r *agentRequest) error {
	if *lc == nil {
		c, err := g.conn(ctx)
		if err != nil {
			if ctx.Err() == nil && transportFailure(err) {
				return &resendError{err: err}
			}
			return err
		}
		*lc = c
	}
	c := *lc
	if now := time.Now(); c.deadline.Sub(now) < requestTimeout/2 {
		c.deadline = now.Add(requestTimeout)
		if err := c.c.SetDeadline(c.deadline); err != nil {
			_ = c.c.Close()
			*lc = nil
			return &resendError{err: fmt.Errorf("deadline: %w", err)}
		}
	}
	// The run's end interrupts an answer being waited for (a hung server) as well as a wait.
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
	err := c.send(r)
	if !stop() {
		c.deadline = time.Time{} // set in the past: the next attempt sets it again
	}
	var re *resendError
	switch {
	case errors.As(err, &re) && re.status != 0 && !c.closing:
		// A whole answer: the connection stays usable.
	case err != nil || c.closing:
		// A transport failure leaves the connection in an unknown state; a malformed
		// answer ends the run; "Connection: close" is the server's.
		_ = c.c.Close()
		*lc = nil
	}
	return err
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

// send sends r and checks its answer. A transport failure, or an answer that leaves the
// outcome unknown (resendable), is a *resendError.
func (lc *loadConn) send(r *agentRequest) error {
	if _, err := lc.c.Write(r.req); err != nil {
		return &resendError{err: fmt.Errorf("write: %w", err)}
	}
	a, err := readHTTPResponse(lc.r, lc.body, time.Now)
	lc.body = a.body
	lc.closing = a.close
	if err != nil {
		if transportFailure(err) {
			return &resendError{err: err}
		}
		return err
	}
	if a.status != 200 {
		err := fmt.Errorf("HTTP %d: %s", a.status, clip(a.body))
		if resendable(a.status) {
			return &resendError{status: a.status, retryAfter: a.retryAfter, retryAfterSet: a.retryAfterSet, err: err}
		}
		return err
	}
	if !bytes.Equal(a.body, r.want) && !storedAll(a.body) {
		return fmt.Errorf("answer %s, want %s", clip(a.body), clip(r.want))
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

// answer is one HTTP response as the load generator reads it.
type answer struct {
	status int
	body   []byte
	// retryAfter is the Retry-After header, when retryAfterSet (absent or unreadable: not).
	retryAfter    time.Duration
	retryAfterSet bool
	close         bool // "Connection: close": the server closes the connection after it
}

// readHTTPResponse reads one HTTP/1.1 response, its body into buf (returned in the answer
// even on error, for reuse). net/http's server sends small answers with a Content-Length and
// larger ones chunked. now reads the clock for a Retry-After given as a date.
func readHTTPResponse(r *bufio.Reader, buf []byte, now func() time.Time) (answer, error) {
	a := answer{body: buf}
	line, err := r.ReadSlice('\n')
	if err != nil {
		return a, fmt.Errorf("read status line: %w", err)
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return a, fmt.Errorf("malformed status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil || status < 100 {
		return a, fmt.Errorf("malformed status line %q", line)
	}
	length, chunked := -1, false
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return a, fmt.Errorf("read header: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return a, fmt.Errorf("malformed header %q", line)
		}
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil || length < 0 {
				return a, fmt.Errorf("malformed Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if !bytes.EqualFold(bytes.TrimSpace(value), []byte("chunked")) {
				return a, fmt.Errorf("unsupported Transfer-Encoding %q", value)
			}
			chunked = true
		case bytes.EqualFold(name, []byte("Retry-After")):
			a.retryAfter, a.retryAfterSet = agentclient.ParseRetryAfter(string(value), now())
		case bytes.EqualFold(name, []byte("Connection")):
			a.close = bytes.EqualFold(bytes.TrimSpace(value), []byte("close"))
		}
	}
	a.body = a.body[:0]
	switch {
	case chunked:
		a.body, err = readChunked(r, a.body)
	case length < 0:
		return a, errors.New("answer without Content-Length")
	default:
		err = readN(r, &a.body, length)
	}
	if err != nil {
		return a, err
	}
	a.status = status
	return a, nil
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
