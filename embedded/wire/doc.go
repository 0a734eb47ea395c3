// Package wire is the MongoDB wire-protocol codec of the embedded server: it frames messages
// read from a stream (ReadMessage, or a MessageReader reusing the last message's buffer),
// parses and validates OP_MSG requests exactly as mongod 7.0 does (section kinds, document
// sequences, BSON validity, the CRC-32C checksum, required flag bits), parses the legacy
// OP_QUERY handshake and OP_REPLY, and builds OP_MSG and OP_REPLY messages (AppendMsgBody
// encodes a reply in place).
//
// Parsed values alias the message bytes they came from; callers that keep them beyond the
// message's lifetime must copy them. Errors are *mongoerr.Error values carrying the code mongod
// reports for the same input; IsConnectionFatal tells which of them make mongod drop the
// connection instead of replying.
//
// It owns no networking policy: it does not decide which commands exist, does not dispatch,
// does not decompress (OP_COMPRESSED is recognised and refused because the server advertises no
// compressors), and does not listen or accept connections.
package wire
