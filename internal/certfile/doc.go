// Package certfile serves a TLS certificate from a PEM certificate file and a PEM key file,
// and picks up a certificate renewed on disk without a restart: tls.Config.GetCertificate
// stats both files at most once per check interval (a second by default) and parses them
// again when either changed (another inode, size or modification time, so an atomic rename
// or a Kubernetes Secret's symlink swap is seen as well as an overwrite).
//
// Loading at start fails with an error that names the file at fault: unreadable, no PEM
// certificate, a certificate that does not parse, a key that does not parse, or a key that
// does not match the certificate. A renewal that fails the same checks (a half-written pair)
// is logged and the previous certificate kept; the next check tries again.
//
// It does not listen or serve (internal/app does) and knows nothing of client certificates.
package certfile
