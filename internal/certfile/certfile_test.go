package certfile_test

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gameops/rollup/internal/certfile"
	"github.com/gameops/rollup/internal/certfile/certtest"
	"github.com/gameops/rollup/internal/testctx"
)

// TestParseErrors: every bad pair fails with an error naming the file at fault.
func TestParseErrors(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir)
	certPEM, keyPEM := ca.IssuePEM(t, 2)
	_, otherKey := ca.IssuePEM(t, 3)
	file := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		certtest.Write(t, p, data)
		return p
	}
	cert, key := file("cert.pem", certPEM), file("key.pem", keyPEM)
	tests := []struct {
		name, cert, key string
		want            []string // in the error; none: it loads
	}{
		{"valid", cert, key, nil},
		{"missing certificate", filepath.Join(dir, "nope.pem"), key, []string{"certificate file", "nope.pem", "no such file"}},
		{"missing key", cert, filepath.Join(dir, "nokey.pem"), []string{"key file", "nokey.pem"}},
		{"garbage certificate", file("garbage.pem", []byte("hello\n")), key, []string{"certificate file", "garbage.pem", "no PEM certificate"}},
		{"certificate bytes corrupted", file("corrupt.pem", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")), key,
			[]string{"certificate file", "corrupt.pem", "certificate 1"}},
		{"key given as certificate", key, key, []string{"certificate file", "key.pem", "holds a private key"}},
		{"certificate given as key", cert, cert, []string{"key file", "cert.pem", "no PEM private key"}},
		{"corrupted key", cert, file("badkey.pem", []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")), []string{"key file", "badkey.pem"}},
		{"mismatched key", cert, file("other.pem", otherKey), []string{"key file", "other.pem", "does not match the certificate in", "cert.pem"}},
	}
	for _, tc := range tests {
		_, err := certfile.Load(tc.cert, tc.key, certfile.Options{})
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: loaded", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to hold %q", tc.name, err, w)
			}
		}
	}
}

// TestRenewal: a TLS server on a Reloader serves a renewed certificate to the next
// handshakes, whether the files are replaced by a rename or overwritten; a half-written
// renewal (a new certificate with the old key) keeps the old certificate, logged once.
func TestRenewal(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Issue(t, certFile, keyFile, 100)
	core, logs := observer.New(zap.InfoLevel)
	r, err := certfile.Load(certFile, keyFile, certfile.Options{CheckInterval: 10 * time.Millisecond, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	serial := func() int64 {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer func() { _ = c.Close() }()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if s := serial(); s != 100 {
		t.Fatalf("serial %d, want 100", s)
	}
	ca.Issue(t, certFile, keyFile, 101) // renamed into place
	testctx.WaitFor(t, "serial 101", func() bool { return serial() == 101 })

	// Half-written: the certificate of a new pair, the key still the old one.
	certPEM, keyPEM := ca.IssuePEM(t, 102)
	certtest.Write(t, certFile, certPEM)
	for range 3 {
		wait := time.NewTimer(20 * time.Millisecond) // past the check interval: each handshake looks again
		<-wait.C
		if s := serial(); s != 101 {
			t.Fatalf("serial %d during a half-written renewal, want 101", s)
		}
	}
	if n := logs.FilterMessage("TLS certificate not reloaded; still serving the previous one").Len(); n != 1 {
		t.Errorf("%d warnings of the failed reload, want 1", n)
	}
	certtest.Write(t, keyFile, keyPEM) // overwritten in place
	testctx.WaitFor(t, "serial 102", func() bool { return serial() == 102 })
	if n := logs.FilterMessage("TLS certificate reloaded").Len(); n != 2 {
		t.Errorf("%d reloads logged, want 2", n)
	}
	if s := r.Certificate().Leaf.SerialNumber.Int64(); s != 102 {
		t.Errorf("Certificate() serial %d", s)
	}
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	if s := serial(); s != 102 {
		t.Errorf("serial %d with the key file gone, want 102 kept", s)
	}
}
