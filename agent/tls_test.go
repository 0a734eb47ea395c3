package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/internal/certfile/certtest"
)

// TestCAFile: an agent whose config names the API's private CA in ca_file sends to the API
// over TLS; without ca_file the send fails with an error that names the certificate problem
// and says to set ca_file, and the tick stays in the spool. A ca_file that cannot be used is
// refused when the config is built, naming the key and the file.
func TestCAFile(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir)
	certPEM, keyPEM := ca.IssuePEM(t, 2)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	api := &fakeAPI{status: http.StatusOK}
	srv := httptest.NewUnstartedServer(api)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	counts := filepath.Join(dir, "online.json")
	if err := os.WriteFile(counts, []byte(`{"a": 3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	config := func(caLine string) string {
		return "url: " + srv.URL + "\ntoken: tok\nproject: p\n" + caLine +
			"spool: {dir: " + filepath.Join(dir, "spool") + "}\nsources: [{name: f, leaves: [a], file: {path: " + counts + "}}]\n"
	}
	once := func(t *testing.T, yaml string) (int, error) {
		t.Helper()
		f, err := ParseFile("agent.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Build()
		if err != nil {
			t.Fatal(err)
		}
		log := zaptest.NewLogger(t)
		sp, err := OpenSpool(t.TempDir(), 1<<20, log)
		if err != nil {
			t.Fatal(err)
		}
		err = New(Options{Settings: st, Spool: sp, Logger: log}).Once(context.Background())
		n, _ := sp.Depth()
		return n, err
	}

	t.Run("without ca_file", func(t *testing.T) {
		left, err := once(t, config(""))
		if err == nil || left != 1 || len(api.sent()) != 0 {
			t.Fatalf("Once: %v, %d ticks left, %d sent; want a refused certificate and the tick kept", err, left, len(api.sent()))
		}
		for _, want := range []string{"certificate is signed by an unknown authority", "set ca_file"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	})
	t.Run("with ca_file", func(t *testing.T) {
		left, err := once(t, config("ca_file: "+ca.File+"\n"))
		if err != nil || left != 0 || len(api.sent()) != 1 {
			t.Fatalf("Once: %v, %d ticks left, %d sent; want the tick sent over TLS", err, left, len(api.sent()))
		}
	})

	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := []struct{ name, yaml, want string }{
		{"missing file", config("ca_file: " + filepath.Join(dir, "nope.pem") + "\n"), "ca_file: CA file: open " + filepath.Join(dir, "nope.pem")},
		{"no certificate in it", config("ca_file: " + notPEM + "\n"), "ca_file: CA file " + notPEM + ": no PEM certificate"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFile("agent.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Build(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build: %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("with an http url", func(t *testing.T) {
		_, err := ParseFile("agent.yaml", []byte(strings.Replace(config("ca_file: "+ca.File+"\n"), "https://", "http://", 1)))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "ca_file" || !strings.Contains(err.Error(), "only used for an https:// URL") {
			t.Fatalf("ParseFile: %v, want a ca_file error", err)
		}
	})
}
