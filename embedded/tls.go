package embedded

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// TLSFiles names the PEM files of the server's TLS identity.
type TLSFiles struct {
	// CertFile holds the server's certificate, then any intermediates (its chain).
	CertFile string
	// KeyFile holds the certificate's private key (PKCS#1, PKCS#8 or SEC 1 PEM); it may be
	// CertFile itself when that file holds both.
	KeyFile string
	// CAFile, when set, holds the CA certificates that client certificates are checked
	// against: a client that presents a certificate must present a valid one (clients
	// without one are still accepted, as they authenticate with SCRAM).
	CAFile string
}

// LoadTLS reads the files and returns the server's TLS configuration (TLS 1.2 or later).
// Every error names the file at fault: unreadable, no PEM certificate or key in it, a
// certificate that does not parse, or a key that does not match the certificate.
func LoadTLS(f TLSFiles) (*tls.Config, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("TLS needs both a certificate file and a key file")
	}
	certPEM, err := readPEM(f.CertFile, "CERTIFICATE")
	if err != nil {
		return nil, err
	}
	keyPEM, err := readPEM(f.KeyFile, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("TLS key %s and certificate %s: %w", f.KeyFile, f.CertFile, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if f.CAFile != "" {
		caPEM, err := readPEM(f.CAFile, "CERTIFICATE")
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("TLS CA file %s: no certificate in it parses", f.CAFile)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// readPEM reads a PEM file and checks it holds a block whose type ends with kind
// ("CERTIFICATE", or "PRIVATE KEY" for "RSA PRIVATE KEY", "EC PRIVATE KEY"...), and that
// every certificate in it parses.
func readPEM(path, kind string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("TLS file: %w", err)
	}
	found := false
	for rest := raw; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" && kind == "CERTIFICATE" {
			if _, err := x509.ParseCertificate(b.Bytes); err != nil {
				return nil, fmt.Errorf("TLS file %s: certificate does not parse: %w", path, err)
			}
		}
		found = found || strings.HasSuffix(b.Type, kind)
	}
	if !found {
		return nil, fmt.Errorf("TLS file %s: no PEM %s block in it", path, kind)
	}
	return raw, nil
}
