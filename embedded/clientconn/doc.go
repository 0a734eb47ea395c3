// Package clientconn is the embedded server's connection layer: it accepts TCP connections
// and, on each, reads wire-protocol messages, decodes OP_MSG commands (document sequences
// merged into the body as arrays) and the legacy OP_QUERY handshake (hello/isMaster only, as
// mongod 5.1+), keeps the per-connection state (Conn: its id, the handshake's application
// name), hands every command to a Handler and writes its reply. A malformed message gets an
// error reply or, when the stream cannot be trusted any more, closes the connection.
//
// It does not know what commands do: every reply, error document and topology detail comes
// from the Handler (package embedded's command dispatch).
package clientconn
