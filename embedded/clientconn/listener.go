package clientconn

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// Listener accepts connections and serves each with its Handler.
type Listener struct {
	ln      net.Listener
	h       Handler
	log     *zap.Logger
	connIDs atomic.Int64
	reqIDs  atomic.Int32

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closing chan struct{}
	tls     *tls.Config // nil: plain TCP
}

// Option configures a Listener.
type Option func(*Listener)

// WithTLS makes the listener speak TLS with cfg (which holds the server's certificate): a
// plain client's first request is answered with SSLHandshakeFailed (141) and its connection
// closed. Without it a TLS client's handshake gets a handshake_failure alert.
func WithTLS(cfg *tls.Config) Option { return func(l *Listener) { l.tls = cfg } }

// Listen binds addr (e.g. "127.0.0.1:0"), so Addr is known before Run.
func Listen(addr string, h Handler, log *zap.Logger, opts ...Option) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if log == nil {
		log = zap.NewNop()
	}
	l := &Listener{ln: ln, h: h, log: log, conns: map[net.Conn]struct{}{}, closing: make(chan struct{})}
	for _, o := range opts {
		o(l)
	}
	return l, nil
}

// Addr is the address the listener is bound to.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close releases the listening socket of a Listener that will not Run.
func (l *Listener) Close() error { return l.ln.Close() }

// Run serves connections, each on its own goroutine, until ctx is done or accepting fails;
// then it closes the listener and every connection and returns once their goroutines have
// ended: nil after ctx is done, the accept error otherwise.
func (l *Listener) Run(parent context.Context) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	stop := context.AfterFunc(ctx, l.shutdown)
	defer stop()

	var wg sync.WaitGroup
	var acceptErr error
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				acceptErr = fmt.Errorf("accept: %w", err)
				cancel()
			}
			break
		}
		if !l.track(c) {
			_ = c.Close()
			continue
		}
		wg.Go(func() {
			l.serve(ctx, c)
			l.untrack(c)
		})
	}
	wg.Wait()
	return acceptErr
}

// shutdown stops accepting and closes every open connection, which ends their goroutines.
func (l *Listener) shutdown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.closing)
	_ = l.ln.Close()
	for c := range l.conns {
		_ = c.Close()
	}
}

func (l *Listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.closing:
		return false
	default:
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Listener) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	_ = c.Close()
}

func (l *Listener) nextRequestID() int32 { return l.reqIDs.Add(1) }

// Connections reports the connections open now and those accepted since the listener started
// (serverStatus's connections.current and totalCreated).
func (l *Listener) Connections() (current int, totalCreated int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns), l.connIDs.Load()
}
