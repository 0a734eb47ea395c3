package agentclient

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
)

// NewHTTPClient returns an agent's HTTP client (timeout DefaultHTTPTimeout) for http and
// https URLs. It trusts the system's certificate authorities (on Linux SSL_CERT_FILE and
// SSL_CERT_DIR replace the system's files) and, when caFile is set, the PEM certificates in
// it too: the way to trust a private CA without installing it.
func NewHTTPClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return &http.Client{Timeout: DefaultHTTPTimeout}, nil
	}
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate (want -----BEGIN CERTIFICATE-----)", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	return &http.Client{Transport: tr, Timeout: DefaultHTTPTimeout}, nil
}
