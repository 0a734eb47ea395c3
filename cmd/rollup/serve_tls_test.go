package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gameops/rollup/api/agentclient"
	"github.com/gameops/rollup/internal/certfile/certtest"
	"github.com/gameops/rollup/internal/testctx"
)

// TestServeTLS: serve --tls-cert/--tls-key serves the API over HTTPS only (the demo's
// in-process agents included); 'rollup submit --ca-file' submits to it; a plain HTTP client
// gets 400; a certificate renewed on disk is served to the next handshakes without a restart.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Issue(t, certFile, keyFile, 1000)
	// One past tick is enough to see submissions over TLS; the default three hours cost CPU.
	s := serveInProcess(t, "--demo", "--demo-agents", "1", "--demo-backfill", "1", "--listen", "127.0.0.1:0", "--log-level", "warn",
		"--tls-cert", certFile, "--tls-key", keyFile, "--totals-max-projects", "0")
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("API URL %s, want https", s.url)
	}
	hc, err := agentclient.NewHTTPClient(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	metrics := func() string {
		res, err := hc.Get(s.url + "/metrics")
		if err != nil {
			return ""
		}
		defer func() { _ = res.Body.Close() }()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	applied := regexp.MustCompile(`rollup_ingest_requests_total\{status="200"\} [1-9]`)
	waitUntil(t, 60*time.Second, "the demo agents' submissions over TLS", func() bool { return applied.MatchString(metrics()) })

	var token string
	waitUntil(t, 30*time.Second, "the demo token", func() bool {
		m := regexp.MustCompile(`token (\S+)`).FindStringSubmatch(s.stdout.String())
		if m != nil {
			token = m[1]
		}
		return m != nil
	})
	ctx := testctx.Context(t)
	var out, errOut syncBuffer
	e := &env{stdout: &out, stderr: &errOut}
	t.Setenv("ROLLUP_TOKEN", token)
	args := []string{"--url", s.url, "--project", "demo", "--timestamp", "now"}
	counts := `[{"id":"tls-leaf","type":"proc","online":3}]`
	if err := runSubmitWith(ctx, e, strings.NewReader(counts), append(args, "--ca-file", ca.File, "-")); err != nil ||
		!strings.Contains(out.String(), "tls-leaf\tproc\tapplied") {
		t.Fatalf("submit --ca-file: %v\n%s%s", err, out.String(), errOut.String())
	}
	err = runSubmitWith(ctx, e, strings.NewReader(counts), append(args, "--attempts", "1", "-"))
	if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("submit without the CA: %v", err)
	}

	// Plain HTTP on the TLS port.
	res, err := http.Get("http://" + strings.TrimPrefix(s.url, "https://") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Client sent an HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP on the TLS port: %d %s", res.StatusCode, body)
	}

	// Renewal.
	serial := func() int64 {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", strings.TrimPrefix(s.url, "https://"),
			&tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer func() { _ = c.Close() }()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serial(); got != 1000 {
		t.Fatalf("serial %d, want 1000", got)
	}
	ca.Issue(t, certFile, keyFile, 1001)
	renewed := time.Now()
	waitUntil(t, 30*time.Second, "the renewed certificate", func() bool { return serial() == 1001 })
	t.Logf("renewed certificate served %s after it was written", time.Since(renewed).Round(time.Millisecond))
	if err := runSubmitWith(ctx, e, strings.NewReader(counts), append(args, "--ca-file", ca.File, "-")); err != nil {
		t.Errorf("submit after the renewal: %v", err)
	}
}

// TestServeTLSBadInput: a malformed or mismatched certificate or key stops serve at start
// with an error naming the file; a certificate without its key is a usage error.
func TestServeTLSBadInput(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Issue(t, certFile, keyFile, 1)
	_, otherKey := ca.IssuePEM(t, 2)
	other := filepath.Join(dir, "other.key")
	certtest.Write(t, other, otherKey)
	garbage := filepath.Join(dir, "garbage.crt")
	certtest.Write(t, garbage, []byte("not a certificate\n"))
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--tls-cert", garbage, "--tls-key", keyFile}, []string{"garbage.crt", "no PEM certificate"}},
		{[]string{"--tls-cert", certFile, "--tls-key", other}, []string{"other.key", "does not match the certificate in", "tls.crt"}},
		{[]string{"--tls-cert", certFile, "--tls-key", filepath.Join(dir, "missing.key")}, []string{"missing.key", "no such file"}},
		{[]string{"--tls-cert", certFile}, []string{"--tls-cert (from flag)", "pass --tls-key too"}},
	}
	for _, tc := range tests {
		var out, errOut syncBuffer
		ctx, cancel := context.WithTimeout(testctx.Context(t), 60*time.Second)
		err := run(ctx, &env{stdout: &out, stderr: &errOut}, append([]string{"serve", "--demo", "--listen", "127.0.0.1:0", "--log-level", "error"}, tc.args...))
		cancel()
		if err == nil {
			t.Errorf("%v: serve started", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v, want it to name %q", tc.args, err, w)
			}
		}
		if strings.Contains(out.String(), "rollup API:") {
			t.Errorf("%v: serve listened before failing", tc.args)
		}
	}
}
