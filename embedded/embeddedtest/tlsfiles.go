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

// CA is a throwaway certificate authority of a test: an ECDSA P-256 key and its self-signed
// certificate, valid from an hour ago for a day. It is the one generator of the tests'
// certificates (rollup's internal/certfile/certtest writes its files with it).
type CA struct {
	// Cert is the CA certificate, for a client's tls.Config RootCAs.
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA creates a CA.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rollup test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("create CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, key: key}
}

// PEM returns the CA certificate in PEM.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// IssuePEM returns a new certificate the CA signed for 127.0.0.1, ::1 and localhost, good for
// a server and for a client, with the given serial number and valid as long as the CA, and
// its new key (PKCS#8), both in PEM.
func (ca *CA) IssuePEM(t testing.TB, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: ca.Cert.NotBefore, NotAfter: ca.Cert.NotAfter,
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("issue certificate: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), encodeKey(t, key)
}

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

// WriteTLSFiles generates a CA and a certificate it issued (see CA) into dir (ca.pem,
// server.pem, server-key.pem).
func WriteTLSFiles(t testing.TB, dir string) TLSFiles {
	t.Helper()
	ca := NewCA(t)
	certPEM, keyPEM := ca.IssuePEM(t, 2)
	f := TLSFiles{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "server.pem"), KeyFile: filepath.Join(dir, "server-key.pem"), CA: ca.Cert}
	writeFile(t, f.CAFile, ca.PEM())
	writeFile(t, f.CertFile, certPEM)
	writeFile(t, f.KeyFile, keyPEM)
	return f
}

// WriteKey writes key as a PKCS#8 PEM file.
func WriteKey(t testing.TB, path string, key *ecdsa.PrivateKey) {
	t.Helper()
	writeFile(t, path, encodeKey(t, key))
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

// encodeKey returns key as PKCS#8 PEM.
func encodeKey(t testing.TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
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
