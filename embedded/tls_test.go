package embedded_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/embedded/embeddedtest"
)

// dialClient returns a client of uri (disconnected when the test ends) whose server selection
// gives up after selection.
func dialClient(t *testing.T, uri string, selection time.Duration, opts ...*options.ClientOptions) *mongo.Client {
	t.Helper()
	o := options.Client().ApplyURI(uri).SetServerSelectionTimeout(selection).SetHeartbeatInterval(time.Second)
	c, err := mongo.Connect(append([]*options.ClientOptions{o}, opts...)...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Disconnect(ctx)
	})
	return c
}

// roundTrip writes a document with c and reads it back.
func roundTrip(ctx context.Context, t *testing.T, c *mongo.Client) {
	t.Helper()
	coll := c.Database("tlsauth").Collection("docs")
	id := bson.NewObjectID()
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "v", Value: 1}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	var got bson.D
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&got); err != nil {
		t.Fatalf("find: %v", err)
	}
}

func startTLS(t *testing.T, f embeddedtest.TLSFiles, cfg embedded.Config) *embedded.Server {
	t.Helper()
	tc, err := embedded.LoadTLS(embedded.TLSFiles{CertFile: f.CertFile, KeyFile: f.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLS = tc
	return embeddedtest.Serve(t, cfg)
}

// TestTLS: a TLS server takes the Go driver with tls=true, its CA given as tlsCAFile in the
// URI or as a tls.Config; a plain client on it gets SSLHandshakeFailed naming tls=true, and
// the server goes on serving TLS clients.
func TestTLS(t *testing.T) {
	f := embeddedtest.WriteTLSFiles(t, t.TempDir())
	srv := startTLS(t, f, embedded.Config{})
	if !strings.Contains(srv.URI(), "tls=true") {
		t.Fatalf("URI %q lacks tls=true", srv.URI())
	}
	ctx := ctxFor(t)
	roundTrip(ctx, t, dialClient(t, srv.URI()+"&tlsCAFile="+f.CAFile, 10*time.Second))
	roundTrip(ctx, t, dialClient(t, srv.URI(), 10*time.Second, options.Client().SetTLSConfig(f.ClientConfig())))

	plainURI := strings.Replace(srv.URI(), "&tls=true", "", 1)
	err := dialClient(t, plainURI, time.Second).Ping(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "SSLHandshakeFailed") || !strings.Contains(err.Error(), "tls=true") {
		t.Fatalf("plain client on the TLS port: %v, want SSLHandshakeFailed naming tls=true", err)
	}
	// A client that does not trust the certificate fails its handshake.
	err = dialClient(t, srv.URI(), time.Second).Ping(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("client without the CA: %v, want a certificate error", err)
	}
	roundTrip(ctx, t, dialClient(t, srv.URI()+"&tlsCAFile="+f.CAFile, 10*time.Second))
}

// TestTLSClientOnPlainPort: a TLS client on a plain server gets a handshake failure (a TLS
// alert, not a bare EOF) and the server goes on serving plain clients.
func TestTLSClientOnPlainPort(t *testing.T) {
	f := embeddedtest.WriteTLSFiles(t, t.TempDir())
	srv := embeddedtest.Serve(t, embedded.Config{})
	ctx := ctxFor(t)
	err := dialClient(t, srv.URI()+"&tls=true&tlsCAFile="+f.CAFile, time.Second).Ping(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "tls: handshake failure") {
		t.Fatalf("TLS client on the plain port: %v, want a TLS handshake failure", err)
	}
	roundTrip(ctx, t, dialClient(t, srv.URI(), 10*time.Second))
}

// TestLoadTLSBadFiles: every malformed, missing or mismatched file is an error naming it.
func TestLoadTLSBadFiles(t *testing.T) {
	dir := t.TempDir()
	f := embeddedtest.WriteTLSFiles(t, dir)
	otherKey := filepath.Join(dir, "other-key.pem")
	embeddedtest.WriteKey(t, otherKey, embeddedtest.NewKey(t))
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	garbage := write("garbage.pem", "not a certificate\n")
	badCert := write("bad-cert.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name      string
		files     embedded.TLSFiles
		wantNamed string
		want      string
	}{
		{"missing certificate", embedded.TLSFiles{CertFile: missing, KeyFile: f.KeyFile}, missing, "no such file"},
		{"missing key", embedded.TLSFiles{CertFile: f.CertFile, KeyFile: missing}, missing, "no such file"},
		{"certificate not PEM", embedded.TLSFiles{CertFile: garbage, KeyFile: f.KeyFile}, garbage, "no PEM CERTIFICATE"},
		{"certificate does not parse", embedded.TLSFiles{CertFile: badCert, KeyFile: f.KeyFile}, badCert, "does not parse"},
		{"key not PEM", embedded.TLSFiles{CertFile: f.CertFile, KeyFile: garbage}, garbage, "no PEM PRIVATE KEY"},
		{"key file holds a certificate", embedded.TLSFiles{CertFile: f.CertFile, KeyFile: f.CertFile}, f.CertFile, "no PEM PRIVATE KEY"},
		{"key of another certificate", embedded.TLSFiles{CertFile: f.CertFile, KeyFile: otherKey}, otherKey, "does not match"},
		{"CA file not PEM", embedded.TLSFiles{CertFile: f.CertFile, KeyFile: f.KeyFile, CAFile: garbage}, garbage, "no PEM CERTIFICATE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := embedded.LoadTLS(tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.wantNamed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadTLS = %v, want an error naming %s and saying %q", err, tc.wantNamed, tc.want)
			}
		})
	}
	if _, err := embedded.LoadTLS(embedded.TLSFiles{CertFile: f.CertFile, KeyFile: f.KeyFile, CAFile: f.CAFile}); err != nil {
		t.Fatalf("good files: %v", err)
	}
}

// TestTLSClientCertificates: with a CA file, a client certificate the CA signed is accepted,
// one of another CA fails the handshake, and a client without one is accepted.
func TestTLSClientCertificates(t *testing.T) {
	f := embeddedtest.WriteTLSFiles(t, t.TempDir())
	other := embeddedtest.WriteTLSFiles(t, t.TempDir())
	tc, err := embedded.LoadTLS(embedded.TLSFiles{CertFile: f.CertFile, KeyFile: f.KeyFile, CAFile: f.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	srv := embeddedtest.Serve(t, embedded.Config{TLS: tc})
	ctx := ctxFor(t)
	roundTrip(ctx, t, dialClient(t, srv.URI(), 10*time.Second, options.Client().SetTLSConfig(f.ClientCertConfig(t))))
	roundTrip(ctx, t, dialClient(t, srv.URI(), 10*time.Second, options.Client().SetTLSConfig(f.ClientConfig())))
	foreign := f.ClientConfig()
	foreign.Certificates = other.ClientCertConfig(t).Certificates
	// The refusal reaches the client as an alert on its first read (TLS 1.3), in the monitor's
	// check; server selection then reports the monitor's last error, which may be a later
	// check cut short by the timeout. So the checks' failures are read, not only that one.
	var mu sync.Mutex
	var failures []string
	mon := &event.ServerMonitor{ServerHeartbeatFailed: func(e *event.ServerHeartbeatFailedEvent) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, e.Failure.Error())
	}}
	err = dialClient(t, srv.URI(), time.Second, options.Client().SetTLSConfig(foreign).SetServerMonitor(mon)).Ping(ctx, nil)
	if err == nil {
		t.Fatal("client certificate of another CA: accepted, want a TLS error")
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("selection: %v; checks failed with %q", err, failures)
	if !strings.Contains(err.Error(), "tls") && !slices.ContainsFunc(failures, func(f string) bool { return strings.Contains(f, "tls") }) {
		t.Fatalf("client certificate of another CA: %v (checks failed with %q), want a TLS error", err, failures)
	}
}
