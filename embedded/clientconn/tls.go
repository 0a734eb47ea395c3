package clientconn

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/wire"
)

// handshakeTimeout bounds how long a connection to a TLS listener may take to send its first
// bytes and complete the TLS handshake.
const handshakeTimeout = 30 * time.Second

// tlsAlertHandshakeFailure is a fatal TLS alert record (level 2, description 40
// handshake_failure): what a TLS client on a plain listener gets before the connection
// closes, so it reports a failed handshake rather than a bare EOF.
var tlsAlertHandshakeFailure = []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 40}

// errTLSRequired answers every request of a plain (non-TLS) client on a TLS listener.
var errTLSRequired = mongoerr.New(mongoerr.SSLHandshakeFailed,
	"this server accepts TLS connections only: connect with tls=true (and tlsCAFile naming the CA of its certificate)")

// stream is what a connection's requests are read from and its replies written to once its
// transport is settled.
type stream struct {
	r io.Reader
	w io.Writer
	// refuse, when set, answers the connection's first request instead of the Handler and
	// closes it (a plain client on a TLS listener).
	refuse error
}

// transport settles what a new connection speaks from its first bytes: TLS on a TLS listener
// (handshake done here), the wire protocol on a plain one. A plain client on a TLS listener
// gets a stream whose first request is refused with a clear error; a TLS client on a plain
// listener gets a TLS alert and ok false (the caller closes the connection).
func (l *Listener) transport(ctx context.Context, nc net.Conn, log *zap.Logger) (_ stream, ok bool) {
	pr := bufio.NewReaderSize(nc, wire.HeaderSize)
	if l.tls != nil {
		_ = nc.SetReadDeadline(time.Now().Add(handshakeTimeout))
	}
	first, err := pr.Peek(wire.HeaderSize)
	if err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
			log.Debug("connection read failed", zap.Error(err))
		}
		return stream{}, false
	}
	tlsHello := looksLikeTLS(first)
	log = log.With(zap.String("remote", nc.RemoteAddr().String()))
	switch {
	case l.tls == nil && !tlsHello:
		return stream{r: pr, w: nc}, true
	case l.tls == nil:
		log.Info("TLS handshake on a plain listener refused: the server was started without a TLS certificate; connect without tls=true")
		_, _ = nc.Write(tlsAlertHandshakeFailure)
		return stream{}, false
	case !tlsHello:
		_ = nc.SetReadDeadline(time.Time{})
		log.Info("plain connection on a TLS listener refused: the client must connect with tls=true")
		return stream{r: pr, w: nc, refuse: errTLSRequired}, true
	}
	tc := tls.Server(peekedConn{Conn: nc, r: pr}, l.tls)
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		log.Info("TLS handshake failed", zap.Error(err))
		return stream{}, false
	}
	_ = nc.SetReadDeadline(time.Time{})
	return stream{r: tc, w: tc}, true
}

// looksLikeTLS reports whether a connection's first 16 bytes are a TLS handshake record
// (content type 22, major version 3) rather than a wire-protocol header, whose op code at
// bytes 12-15 is OP_MSG or OP_QUERY for every request a client opens with.
func looksLikeTLS(b []byte) bool {
	if b[0] != 0x16 || b[1] != 0x03 {
		return false
	}
	op := int32(binary.LittleEndian.Uint32(b[12:]))
	return op != wire.OpMsg && op != wire.OpQuery
}

// peekedConn is a connection whose first bytes were read into r (to tell TLS from the wire
// protocol): reads go through r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
