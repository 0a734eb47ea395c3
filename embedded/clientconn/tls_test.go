package clientconn

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/wire"
)

// selfSigned returns a server tls.Config with a self-signed certificate for 127.0.0.1 and a
// client tls.Config that trusts it.
func selfSigned(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "clientconn test"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12},
		&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

func startWith(t *testing.T, h Handler, opts ...Option) *Listener {
	t.Helper()
	l, err := Listen("127.0.0.1:0", h, zaptest.NewLogger(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	})
	return l
}

// TestTLSListener: on a TLS listener a TLS client's commands reach the Handler; a plain
// client's first request, OP_MSG or the legacy OP_QUERY hello, is answered (in its own reply
// format) with 141 SSLHandshakeFailed naming tls=true and never reaches the Handler, and its
// connection is closed.
func TestTLSListener(t *testing.T) {
	srvTLS, cliTLS := selfSigned(t)
	h := &echo{}
	l := startWith(t, h, WithTLS(srvTLS))

	tc, err := tls.Dial("tcp", l.Addr().String(), cliTLS)
	if err != nil {
		t.Fatalf("TLS dial: %v", err)
	}
	t.Cleanup(func() { _ = tc.Close() })
	cl := &client{c: tc, r: bufio.NewReader(tc)}
	id := cl.send(t, msgOf(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "db"}}, 0))
	if _, reply := cl.read(t, id); field(reply, "ok") != 1.0 || h.commands() != 1 {
		t.Fatalf("TLS client: reply %v, %d commands run", reply, h.commands())
	}

	for _, tc := range []struct {
		name   string
		build  func(int32) []byte
		opCode int32
	}{
		{"OP_MSG", msgOf(t, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}}, 0), wire.OpMsg},
		{"OP_QUERY", queryOf(t, "admin.$cmd", bson.D{{Key: "isMaster", Value: 1}}), wire.OpReply},
	} {
		t.Run("plain "+tc.name, func(t *testing.T) {
			cl := dial(t, l)
			id := cl.send(t, tc.build)
			op, reply := cl.read(t, id)
			if op != tc.opCode || field(reply, "code") != mongoerr.SSLHandshakeFailed || !strings.Contains(field(reply, "errmsg").(string), "tls=true") {
				t.Fatalf("plain client on a TLS listener: op %d, reply %v", op, reply)
			}
			if _, _, err := wire.ReadMessage(cl.r, wire.DefaultMaxMessageSize); !errors.Is(err, io.EOF) {
				t.Fatalf("after the refusal: read = %v, want EOF", err)
			}
			if h.commands() != 1 {
				t.Fatalf("a plain client's command reached the Handler (%d commands)", h.commands())
			}
		})
	}
}

// TestTLSClientOnPlainListener: a TLS client's handshake on a plain listener fails with the
// server's handshake_failure alert, and the listener goes on serving plain clients.
func TestTLSClientOnPlainListener(t *testing.T) {
	_, cliTLS := selfSigned(t)
	h := &echo{}
	l := startWith(t, h)
	c, err := net.DialTimeout("tcp", l.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	cliTLS.ServerName = "127.0.0.1"
	err = tls.Client(c, cliTLS).Handshake()
	if err == nil || !strings.Contains(err.Error(), "handshake failure") {
		t.Fatalf("TLS handshake on a plain listener: %v, want the server's handshake failure alert", err)
	}
	cl := dial(t, l)
	id := cl.send(t, msgOf(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "db"}}, 0))
	if _, reply := cl.read(t, id); field(reply, "ok") != 1.0 || h.commands() != 1 {
		t.Fatalf("plain client after a TLS one: reply %v, %d commands", reply, h.commands())
	}
}

// TestLooksLikeTLS: a TLS handshake record is told from wire-protocol headers, including
// those whose length happens to start with the record's bytes.
func TestLooksLikeTLS(t *testing.T) {
	hdr := func(length, op int32) []byte {
		b := make([]byte, 16)
		for i, v := range []int32{length, 1, 0, op} {
			b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		}
		return b
	}
	clientHello := []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, 0x5a, 0x1b, 0x2c, 0x3d, 0x4e}
	for _, tc := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"ClientHello", clientHello, true},
		{"OP_MSG", hdr(200, wire.OpMsg), false},
		{"OP_QUERY", hdr(300, wire.OpQuery), false},
		{"OP_MSG of 0x10316 bytes", hdr(0x10316, wire.OpMsg), false},
		{"OP_QUERY of 0x316 bytes", hdr(0x316, wire.OpQuery), false},
	} {
		if got := looksLikeTLS(tc.b); got != tc.want {
			t.Errorf("%s: looksLikeTLS = %v, want %v", tc.name, got, tc.want)
		}
	}
}
