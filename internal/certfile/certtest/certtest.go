package certtest

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/gameops/rollup/embedded/embeddedtest"
)

// CA is a certificate authority of a test (embeddedtest.CA) with its certificate written to a
// file.
type CA struct {
	ca *embeddedtest.CA
	// File is the CA certificate's PEM file (what clients pass as --ca-file).
	File string
	// Pool holds the CA certificate.
	Pool *x509.CertPool
}

// NewCA creates a CA valid for a day, its PEM written to dir/ca.pem.
func NewCA(t testing.TB, dir string) *CA {
	t.Helper()
	ca := &CA{ca: embeddedtest.NewCA(t), File: filepath.Join(dir, "ca.pem"), Pool: x509.NewCertPool()}
	ca.Pool.AddCert(ca.ca.Cert)
	write(t, ca.File, ca.ca.PEM())
	return ca
}

// Issue writes a server certificate for 127.0.0.1, ::1 and localhost with the given serial
// to certFile and its new key to keyFile, each replacing the file through a rename.
func (ca *CA) Issue(t testing.TB, certFile, keyFile string, serial int64) {
	t.Helper()
	certPEM, keyPEM := ca.IssuePEM(t, serial)
	write(t, certFile, certPEM)
	write(t, keyFile, keyPEM)
}

// IssuePEM returns a server certificate (as Issue) and its key in PEM.
func (ca *CA) IssuePEM(t testing.TB, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.ca.IssuePEM(t, serial)
}

// write replaces path's content by data through a rename, as a renewal tool does.
func write(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Write writes data to path in place (an overwrite, not a rename).
func Write(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
