package embeddedtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are PEM files a test generated: a CA, and a certificate it signed for 127.0.0.1,
// ::1 and localhost, with its key, good for a server and for a client.
type TLSFiles struct {
	// CAFile, CertFile and KeyFile are the paths of the PEM files.
	CAFile, CertFile, KeyFile string
	// CA is the CA certificate, for a client's tls.Config RootCAs.
	CA *x509.Certificate
}

// ClientConfig is a client's tls.Config that trusts the CA.
func (f TLSFiles) ClientConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(f.CA)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// WriteTLSFiles generates an ECDSA P-256 CA and server certificate, valid for an hour,
// into dir (ca.pem, server.pem, server-key.pem).
func WriteTLSFiles(t testing.TB, dir string) TLSFiles {
	t.Helper()
	caKey := newKey(t)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rollup test CA"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("create CA: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey := newKey(t)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("create server certificate: %v", err)
	}
	f := TLSFiles{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "server.pem"), KeyFile: filepath.Join(dir, "server-key.pem"), CA: ca}
	writePEM(t, f.CAFile, "CERTIFICATE", caDER)
	writePEM(t, f.CertFile, "CERTIFICATE", srvDER)
	WriteKey(t, f.KeyFile, srvKey)
	return f
}

// WriteKey writes key as a PKCS#8 PEM file.
func WriteKey(t testing.TB, path string, key *ecdsa.PrivateKey) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, path, "PRIVATE KEY", der)
}

// NewKey returns a fresh ECDSA P-256 key (e.g. one that matches no certificate).
func NewKey(t testing.TB) *ecdsa.PrivateKey { return newKey(t) }

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// ClientCertConfig is ClientConfig presenting the certificate as the client's.
func (f TLSFiles) ClientCertConfig(t testing.TB) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	c := f.ClientConfig()
	c.Certificates = []tls.Certificate{cert}
	return c
}
