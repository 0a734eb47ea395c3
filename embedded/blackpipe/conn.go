package blackpipe

import (
	"bytes"
	"context"
	"net"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded/wire"
)

// pair is one proxied connection: the client side, the server side, and the command names of
// the requests whose replies are still expected, by requestID.
type pair struct {
	client, server net.Conn
	once           sync.Once

	mu      sync.Mutex
	pending map[int32]string
}

func (c *pair) close() {
	c.once.Do(func() {
		_ = c.client.Close()
		_ = c.server.Close()
	})
}

func (c *pair) expect(requestID int32, cmd string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) >= maxPending {
		clear(c.pending)
	}
	c.pending[requestID] = cmd
}

func (c *pair) answered(responseTo int32) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	cmd := c.pending[responseTo]
	delete(c.pending, responseTo)
	return cmd
}

func (p *Proxy) serve(ctx context.Context, client net.Conn) {
	p.mu.Lock()
	p.stats.Conns++
	p.mu.Unlock()
	var d net.Dialer
	server, err := d.DialContext(ctx, "tcp", p.target)
	if err != nil {
		p.log.Warn("blackpipe: cannot reach target", zap.String("target", p.target), zap.Error(err))
		_ = client.Close()
		return
	}
	c := &pair{client: client, server: server, pending: make(map[int32]string)}
	if !p.track(client, server) {
		c.close()
		return
	}
	defer p.untrack(client, server)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.up(c)
		c.close()
	}()
	p.down(ctx, c)
	c.close()
	<-done
}

// describe returns the command name and recorded body (nil unless keep) of a client→server
// message, and whether the client expects a reply to it.
func describe(h wire.Header, msg []byte, keep bool) (string, bson.Raw, bool) {
	switch h.OpCode {
	case wire.OpMsg:
		m, err := wire.ParseMsg(msg)
		if err != nil {
			return "", nil, true
		}
		if !keep {
			return wire.CommandName(m.Body), nil, m.Flags&wire.FlagMoreToCome == 0
		}
		body := m.MergedBody()
		if len(m.Sequences) == 0 {
			body = bytes.Clone(body)
		}
		return wire.CommandName(body), body, m.Flags&wire.FlagMoreToCome == 0
	case wire.OpQuery:
		q, err := wire.ParseQuery(msg)
		if err != nil {
			return "", nil, true
		}
		if !keep {
			return wire.CommandName(q.Command()), nil, true
		}
		cmd := bytes.Clone(q.Command())
		return wire.CommandName(cmd), cmd, true
	}
	return "", nil, true
}

// up forwards client→server until either side fails or a DropRequest fault fires.
func (p *Proxy) up(c *pair) {
	in := wire.NewMessageReader(c.client, maxMessage) // a request is written before the next is read
	for {
		h, msg, err := in.Next()
		if err != nil {
			return
		}
		name, body, wantsReply := describe(h, msg, !p.countOnly.Load())
		p.mu.Lock()
		p.stats.Requests++
		if name != "" {
			p.stats.Commands[name]++
			p.record(name, body)
		}
		_, drop := takeMatch(&p.drops, name, self)
		if !drop {
			p.stats.BytesUp += int64(len(msg))
		}
		p.mu.Unlock()
		if drop {
			p.log.Info("blackpipe: dropping request", zap.String("cmd", name))
			return
		}
		if wantsReply {
			c.expect(h.RequestID, name)
		}
		if _, err := c.server.Write(msg); err != nil {
			return
		}
	}
}

// down forwards server→client, applying reply faults, until either side fails, a fault ends
// the connection, or ctx is done during a stall.
func (p *Proxy) down(ctx context.Context, c *pair) {
	in := wire.NewMessageReader(c.server, maxMessage) // a reply is forwarded before the next is read
	for {
		h, msg, err := in.Next()
		if err != nil {
			return
		}
		cmd := c.answered(h.ResponseTo)
		if h.OpCode == wire.OpMsg && len(msg) >= wire.HeaderSize+4 && msg[wire.HeaderSize]&byte(wire.FlagMoreToCome) != 0 {
			// An exhaust stream: the next reply answers this one.
			c.expect(h.RequestID, cmd)
		}

		p.mu.Lock()
		st, stalled := takeMatch(&p.stalls, cmd, func(s stall) string { return s.cmd })
		_, reset := takeMatch(&p.resets, cmd, self)
		cut := -1
		if !reset && p.dropAfter >= 0 {
			if p.dropAfter < int64(len(msg)) {
				cut = int(p.dropAfter)
				p.dropAfter = -1
			} else {
				p.dropAfter -= int64(len(msg))
			}
		}
		p.mu.Unlock()

		if stalled {
			p.log.Info("blackpipe: stalling reply", zap.String("cmd", cmd), zap.Duration("for", st.d))
			t := time.NewTimer(st.d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		switch {
		case reset:
			p.log.Info("blackpipe: resetting connection mid-reply", zap.String("cmd", cmd))
			p.forward(c, msg[:len(msg)/2])
			if tc, ok := c.client.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			return
		case cut >= 0:
			p.log.Info("blackpipe: dropping connection mid-reply", zap.String("cmd", cmd), zap.Int("after", cut))
			p.forward(c, msg[:cut])
			return
		}
		if !p.forward(c, msg) {
			return
		}
	}
}

func (p *Proxy) forward(c *pair, b []byte) bool {
	if len(b) == 0 {
		return true
	}
	// Counted before writing, so that a client that has read the bytes sees them in Stats.
	p.mu.Lock()
	p.stats.BytesDown += int64(len(b))
	p.mu.Unlock()
	n, err := c.client.Write(b)
	if n < len(b) {
		p.mu.Lock()
		p.stats.BytesDown -= int64(len(b) - n)
		p.mu.Unlock()
	}
	return err == nil
}
