package blackpipe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
)

const (
	// MaxRecorded is how many request bodies the proxy keeps for Commands (the newest ones).
	MaxRecorded = 10_000
	// maxMessage bounds one forwarded message; above mongod's own limit so the proxy never
	// refuses what the server would judge.
	maxMessage int32 = 64 << 20
	// maxPending bounds the per-connection requestID → command map (requests whose replies
	// never came).
	maxPending = 10_000
)

// Stats counts the traffic since the proxy started or since ResetStats.
type Stats struct {
	// Commands counts client→server OP_MSG and OP_QUERY requests by command name (the first
	// key of the body, or of the $query document of an OP_QUERY), handshakes included.
	Commands map[string]int
	// Requests counts all client→server messages, whatever their op code.
	Requests int64
	// BytesUp and BytesDown count bytes forwarded client→server and server→client.
	BytesUp, BytesDown int64
	// Conns counts client connections accepted, those the target refused included.
	Conns int64
}

type stall struct {
	cmd string
	d   time.Duration
}

type recorded struct {
	name string
	body bson.Raw
}

// Proxy is a fault-injecting proxy to one target address. Its methods are safe for concurrent
// use; a fault armed while traffic flows applies to the next matching message after arming.
type Proxy struct {
	target string
	log    *zap.Logger

	mu        sync.Mutex
	ln        net.Listener
	running   bool
	closed    bool
	conns     map[net.Conn]struct{}
	resets    []string
	stalls    []stall
	drops     []string
	dropAfter int64 // bytes still allowed server→client; -1 when disarmed
	stats     Stats
	ring      []recorded
	ringNext  int
	// countOnly, set by CountOnly, keeps no bodies: only the counters.
	countOnly atomic.Bool
}

// New returns a proxy that forwards every accepted connection to target (host:port). A nil
// logger logs nothing.
func New(target string, logger *zap.Logger) *Proxy {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Proxy{
		target:    target,
		log:       logger,
		conns:     make(map[net.Conn]struct{}),
		dropAfter: -1,
		stats:     Stats{Commands: make(map[string]int)},
	}
}

// Listen binds the proxy's listening address (for example "127.0.0.1:0") so that Addr is known
// before Run starts accepting.
func (p *Proxy) Listen(addr string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return errors.New("blackpipe: already listening")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("blackpipe listen: %w", err)
	}
	p.ln = ln
	return nil
}

// Addr returns the address the proxy listens on, or "" before Listen.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return ""
	}
	return p.ln.Addr().String()
}

// Run accepts connections until ctx is done, then closes the listener and every proxied
// connection, waits for all its goroutines and returns nil. It returns an error if Listen was
// not called, if Run was already called, or if accepting fails for another reason. A proxy runs
// once.
func (p *Proxy) Run(ctx context.Context) error {
	p.mu.Lock()
	ln, already := p.ln, p.running
	p.running = p.running || ln != nil
	p.mu.Unlock()
	if ln == nil {
		return errors.New("blackpipe: Run before Listen")
	}
	if already {
		return errors.New("blackpipe: Run called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()

	var wg sync.WaitGroup
	var runErr error
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				runErr = fmt.Errorf("blackpipe accept: %w", err)
			}
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.serve(ctx, c)
		}()
	}
	cancel()
	_ = ln.Close()
	p.closeAll()
	wg.Wait()
	return runErr
}

// ResetNextReply arms a fault: the next server→client reply to cmd ("" for any command) is cut
// after half its bytes and the client connection is reset (RST, SetLinger(0)); the server
// connection is closed too. The server has executed the command; the client sees a network
// error and never the reply.
func (p *Proxy) ResetNextReply(cmd string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resets = append(p.resets, cmd)
}

// DropAfterBytes arms a fault: after n more bytes have flowed server→client (counted over all
// connections from now on), the connection that carries the n-th byte is closed normally (FIN)
// right after it, cutting its reply short; n = 0 closes the connection of the next reply before
// any of its bytes. A negative n disarms the fault.
func (p *Proxy) DropAfterBytes(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropAfter = max(int64(n), -1)
}

// Stall arms a fault: the next reply to cmd ("" for any command) is held for d before it is
// forwarded, or until the proxy stops, whichever comes first. Replies after it on the same
// connection wait behind it; other connections are not affected.
func (p *Proxy) Stall(cmd string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalls = append(p.stalls, stall{cmd: cmd, d: d})
}

// DropRequest arms a fault: the next client→server request of cmd ("" for any command) is not
// forwarded and both connections are closed, so the client sees a network error for a command
// the server never received. The request still counts in Stats and Commands.
func (p *Proxy) DropRequest(cmd string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drops = append(p.drops, cmd)
}

// Stats returns a copy of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Commands = make(map[string]int, len(p.stats.Commands))
	for k, v := range p.stats.Commands {
		s.Commands[k] = v
	}
	return s
}

// CountOnly makes the proxy keep only its counters from now on: no request bodies for
// Commands, and no copy of each request to record it. A benchmark's proxy then costs its
// process neither the newest MaxRecorded bodies' memory (hundreds of MB with bulk writes) nor
// their copying.
func (p *Proxy) CountOnly() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.countOnly.Store(true)
	p.ring, p.ringNext = nil, 0
}

// ResetStats zeroes the counters and forgets the recorded bodies. Armed faults stay armed.
func (p *Proxy) ResetStats() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats = Stats{Commands: make(map[string]int)}
	p.ring = nil
	p.ringNext = 0
}

// Commands returns, oldest first, the bodies of the requests of command name seen since the
// last ResetStats (at most the newest MaxRecorded requests of all commands are kept). OP_MSG
// document sequences are merged into the body as arrays (e.g. "updates"); an OP_QUERY gives its
// unwrapped $query document. The returned documents are the caller's.
func (p *Proxy) Commands(name string) []bson.Raw {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []bson.Raw
	n := len(p.ring)
	for i := range n {
		r := p.ring[(p.ringNext+i)%n]
		if r.name == name {
			out = append(out, bytes.Clone(r.body))
		}
	}
	return out
}

func (p *Proxy) record(name string, body bson.Raw) {
	if body == nil {
		return
	}
	if len(p.ring) < MaxRecorded {
		p.ring = append(p.ring, recorded{name: name, body: body})
		return
	}
	p.ring[p.ringNext] = recorded{name: name, body: body}
	p.ringNext = (p.ringNext + 1) % MaxRecorded
}

// track registers conns so that Run's exit closes them; it refuses once the proxy stopped.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// takeMatch removes and reports the first armed entry matching cmd.
func takeMatch[T any](list *[]T, cmd string, key func(T) string) (T, bool) {
	for i, e := range *list {
		if k := key(e); k == "" || k == cmd {
			*list = append((*list)[:i], (*list)[i+1:]...)
			return e, true
		}
	}
	var zero T
	return zero, false
}

func self(s string) string { return s }
