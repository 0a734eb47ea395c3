package app

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/internal/certfile"
	"github.com/gameops/rollup/internal/certfile/certtest"
)

// runHTTP serves h with RunHTTP (over TLS with certs) until the test ends; it returns the
// listening address.
func runHTTP(t *testing.T, certs *certfile.Reloader) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	if certs != nil {
		srv.TLSConfig = certs.ServerConfig()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunHTTP(ctx, srv, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunHTTP: %v", err)
		}
	})
	return ln.Addr().String()
}

// TestTLSPortMismatch: a client that trusts the CA is served over TLS; a plain HTTP client on
// the TLS port gets Go's 400 "Client sent an HTTP request to an HTTPS server"; a TLS client on
// a plain port fails its handshake with an error that says so; an untrusted certificate is
// refused by the client.
func TestTLSPortMismatch(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Issue(t, certFile, keyFile, 7)
	certs, err := certfile.Load(certFile, keyFile, certfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tlsAddr, plainAddr := runHTTP(t, certs), runHTTP(t, nil)
	trusting, err := agentclient.NewHTTPClient(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	get := func(hc *http.Client, url string) (string, error) {
		res, err := hc.Get(url)
		if err != nil {
			return "", err
		}
		defer func() { _ = res.Body.Close() }()
		b, _ := io.ReadAll(res.Body)
		return res.Status + " " + string(b), nil
	}
	if got, err := get(trusting, "https://"+tlsAddr+"/"); err != nil || got != "200 OK ok" {
		t.Errorf("https with the CA: %q, %v", got, err)
	}
	if got, err := get(trusting, "https://localhost:"+strings.Split(tlsAddr, ":")[1]+"/"); err != nil || got != "200 OK ok" {
		t.Errorf("https to localhost with the CA: %q, %v", got, err)
	}
	if got, err := get(http.DefaultClient, "http://"+tlsAddr+"/"); err != nil ||
		!strings.HasPrefix(got, "400 Bad Request") || !strings.Contains(got, "Client sent an HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP on the TLS port: %q, %v", got, err)
	}
	if got, err := get(trusting, "https://"+plainAddr+"/"); err == nil || !strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		t.Errorf("TLS on the plain port: %q, %v", got, err)
	}
	untrusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}}
	if got, err := get(untrusting, "https://"+tlsAddr+"/"); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("https without the CA: %q, %v", got, err)
	}
	if _, err := agentclient.NewHTTPClient(certFile + ".missing"); err == nil || !strings.Contains(err.Error(), "tls.crt.missing") {
		t.Errorf("missing CA file: %v", err)
	}
	if _, err := agentclient.NewHTTPClient(keyFile); err == nil || !strings.Contains(err.Error(), "tls.key: no PEM certificate") {
		t.Errorf("CA file without a certificate: %v", err)
	}
}
