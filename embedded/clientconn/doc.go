// Package clientconn is the embedded server's connection layer: it accepts TCP connections
// and, on each, reads wire-protocol messages, decodes OP_MSG commands (document sequences
// merged into the body as arrays) and the legacy OP_QUERY handshake (hello/isMaster only, as
// mongod 5.1+), keeps the per-connection state (Conn: its id, the handshake's application
// name, the Handler's authentication state), hands every command to a Handler and writes its
// reply. With WithTLS it speaks TLS only (tls.go): it tells a TLS handshake from a
// wire-protocol header by a connection's first 16 bytes, so a plain client on a TLS listener
// gets an SSLHandshakeFailed reply naming tls=true, and a TLS client on a plain listener a TLS
// handshake_failure alert, instead of a bare closed connection. A malformed message gets an
// error reply or, when the stream cannot be trusted any more, closes the connection.
//
// It does not know what commands do: every reply, error document and topology detail comes
// from the Handler (package embedded's command dispatch).
package clientconn
