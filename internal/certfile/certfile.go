package certfile

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// DefaultCheckInterval is how often, at most, the files are looked at again.
const DefaultCheckInterval = time.Second

// Reloader holds the certificate of a pair of files and reloads it when they change.
type Reloader struct {
	certPath, keyPath string
	log               *zap.Logger
	interval          time.Duration
	now               func() time.Time

	mu        sync.Mutex
	cert      *tls.Certificate
	certStat  os.FileInfo // of the files the current certificate was read from
	keyStat   os.FileInfo
	checked   time.Time // last look at the files
	lastError string    // of the last failed reload, logged once
}

// Options tune a Reloader; zero fields take their defaults.
type Options struct {
	// CheckInterval bounds how often a handshake looks at the files (default 1s).
	CheckInterval time.Duration
	// Logger receives reloads and failed reloads (default none).
	Logger *zap.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Load reads the certificate (with its chain) in certPath and its key in keyPath.
func Load(certPath, keyPath string, o Options) (*Reloader, error) {
	if o.CheckInterval <= 0 {
		o.CheckInterval = DefaultCheckInterval
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &Reloader{certPath: certPath, keyPath: keyPath, log: o.Logger, interval: o.CheckInterval, now: o.Now}
	cert, cs, ks, err := r.read()
	if err != nil {
		return nil, err
	}
	r.cert, r.certStat, r.keyStat, r.checked = cert, cs, ks, o.Now()
	if leaf := cert.Leaf; leaf != nil && o.Now().After(leaf.NotAfter) {
		r.log.Warn("the TLS certificate has expired; clients will refuse it until it is renewed",
			zap.String("cert", certPath), zap.Time("not_after", leaf.NotAfter))
	}
	return r, nil
}

// Certificate returns the certificate served now.
func (r *Reloader) Certificate() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert
}

// GetCertificate is a tls.Config.GetCertificate: the current certificate, after looking at
// the files if the check interval has passed.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); now.Sub(r.checked) >= r.interval {
		r.checked = now
		r.maybeReloadLocked()
	}
	return r.cert, nil
}

// ServerConfig returns a TLS server configuration (TLS 1.2 or later) that serves r's
// certificate.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
}

// maybeReloadLocked reads the files again when either changed since the current certificate
// was read from them.
func (r *Reloader) maybeReloadLocked() {
	cs, cerr := os.Stat(r.certPath)
	ks, kerr := os.Stat(r.keyPath)
	if cerr == nil && kerr == nil && same(cs, r.certStat) && same(ks, r.keyStat) {
		return
	}
	cert, cs, ks, err := r.read()
	if err != nil {
		if msg := err.Error(); msg != r.lastError {
			r.lastError = msg
			r.log.Warn("TLS certificate not reloaded; still serving the previous one", zap.Error(err))
		}
		return
	}
	r.cert, r.certStat, r.keyStat, r.lastError = cert, cs, ks, ""
	fields := []zap.Field{zap.String("cert", r.certPath)}
	if cert.Leaf != nil {
		fields = append(fields, zap.String("serial", cert.Leaf.SerialNumber.String()), zap.Time("not_after", cert.Leaf.NotAfter))
	}
	r.log.Info("TLS certificate reloaded", fields...)
}

// same reports whether a file is unchanged: same inode, size and modification time.
func same(a, b os.FileInfo) bool {
	return b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// read parses the pair, with the files' stats taken before reading them (a change during the
// read is then seen by the next check).
func (r *Reloader) read() (*tls.Certificate, os.FileInfo, os.FileInfo, error) {
	cs, err := os.Stat(r.certPath)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("TLS certificate file: %w", err)
	}
	ks, err := os.Stat(r.keyPath)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("TLS key file: %w", err)
	}
	cert, err := Parse(r.certPath, r.keyPath)
	return cert, cs, ks, err
}

// Parse reads a certificate file (PEM, the leaf first, then its chain) and its key file
// (PEM), and checks that the key matches. Errors name the file at fault.
func Parse(certPath, keyPath string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate file: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("TLS key file: %w", err)
	}
	if err := checkCertPEM(certPEM); err != nil {
		return nil, fmt.Errorf("TLS certificate file %s: %w", certPath, err)
	}
	if b, _ := pem.Decode(keyPEM); b == nil || !strings.Contains(b.Type, "PRIVATE KEY") {
		return nil, fmt.Errorf("TLS key file %s: no PEM private key block (want -----BEGIN PRIVATE KEY----- or EC/RSA PRIVATE KEY)", keyPath)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	switch {
	case err != nil && strings.Contains(err.Error(), "does not match"):
		return nil, fmt.Errorf("TLS key file %s does not match the certificate in %s: %w", keyPath, certPath, err)
	case err != nil:
		return nil, fmt.Errorf("TLS key file %s: %w", keyPath, err)
	}
	return &cert, nil
}

// checkCertPEM checks that data holds PEM certificates, each parsable.
func checkCertPEM(data []byte) error {
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			if strings.Contains(b.Type, "PRIVATE KEY") {
				return errors.New("holds a private key: pass the certificate here and the key to the key flag")
			}
			continue
		}
		n++
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return fmt.Errorf("certificate %d: %w", n, err)
		}
	}
	if n == 0 {
		return errors.New("no PEM certificate (want -----BEGIN CERTIFICATE-----)")
	}
	return nil
}
