package wire

import (
	"bytes"
	"encoding/binary"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
)

// Query is a parsed legacy OP_QUERY. Drivers send it only for the first handshake (hello or
// isMaster, often wrapped as {$query: {...}}) when no API version is declared.
// Query and ReturnFieldsSelector alias the parsed message; ReturnFieldsSelector is nil when
// absent.
type Query struct {
	Flags                        int32
	FullCollectionName           string
	NumberToSkip, NumberToReturn int32
	Query                        bson.Raw
	ReturnFieldsSelector         bson.Raw
}

// ParseQuery parses and validates a complete OP_QUERY (msg includes the header). Trailing bytes
// after the optional field selector are an error.
func ParseQuery(msg []byte) (Query, error) {
	if _, err := checkFrame(msg, OpQuery, "OP_QUERY"); err != nil {
		return Query{}, err
	}
	b := msg[HeaderSize:]
	if len(b) < 4 {
		return Query{}, mongoerr.New(mongoerr.ProtocolError, "OP_QUERY has no flags")
	}
	q := Query{Flags: int32(binary.LittleEndian.Uint32(b))}
	b = b[4:]
	nul := bytes.IndexByte(b, 0)
	if nul < 0 {
		return Query{}, mongoerr.New(mongoerr.ProtocolError, "OP_QUERY collection name is not NUL-terminated")
	}
	q.FullCollectionName = string(b[:nul])
	b = b[nul+1:]
	if len(b) < 8 {
		return Query{}, mongoerr.New(mongoerr.ProtocolError, "OP_QUERY is too short for numberToSkip and numberToReturn")
	}
	q.NumberToSkip = int32(binary.LittleEndian.Uint32(b))
	q.NumberToReturn = int32(binary.LittleEndian.Uint32(b[4:]))
	b = b[8:]
	doc, b, err := readDocument(b, "OP_QUERY query")
	if err != nil {
		return Query{}, err
	}
	q.Query = doc
	if len(b) > 0 {
		if doc, b, err = readDocument(b, "OP_QUERY returnFieldsSelector"); err != nil {
			return Query{}, err
		}
		q.ReturnFieldsSelector = doc
	}
	if len(b) > 0 {
		return Query{}, mongoerr.New(mongoerr.ProtocolError, "OP_QUERY has %d trailing bytes", len(b))
	}
	return q, nil
}

// Command returns the command document of a query: the value of a leading $query (or query)
// field when the query is wrapped, the query itself otherwise.
func (q Query) Command() bson.Raw {
	switch CommandName(q.Query) {
	case "$query", "query":
		if e, err := q.Query.IndexErr(0); err == nil {
			if v := e.Value(); v.Type == bson.TypeEmbeddedDocument {
				return v.Value
			}
		}
	}
	return q.Query
}

// Reply is a parsed OP_REPLY. Docs alias the parsed message.
type Reply struct {
	ResponseFlags  int32
	CursorID       int64
	StartingFrom   int32
	NumberReturned int32
	Docs           []bson.Raw
}

// AppendReply appends an OP_REPLY with cursorID 0, startingFrom 0 and the given documents.
func AppendReply(dst []byte, requestID, responseTo int32, responseFlags int32, docs ...[]byte) []byte {
	start, dst := appendHeader(dst, requestID, responseTo, OpReply)
	dst = appendInt32(dst, responseFlags)
	dst = binary.LittleEndian.AppendUint64(dst, 0)
	dst = appendInt32(dst, 0)
	dst = appendInt32(dst, int32(len(docs)))
	for _, d := range docs {
		dst = append(dst, d...)
	}
	return finishMessage(dst, start)
}

// ParseReply parses and validates a complete OP_REPLY (msg includes the header); the documents
// must fill the message exactly and match numberReturned.
func ParseReply(msg []byte) (Reply, error) {
	if _, err := checkFrame(msg, OpReply, "OP_REPLY"); err != nil {
		return Reply{}, err
	}
	b := msg[HeaderSize:]
	if len(b) < 20 {
		return Reply{}, mongoerr.New(mongoerr.ProtocolError, "OP_REPLY is too short for its fixed fields")
	}
	r := Reply{
		ResponseFlags:  int32(binary.LittleEndian.Uint32(b)),
		CursorID:       int64(binary.LittleEndian.Uint64(b[4:])),
		StartingFrom:   int32(binary.LittleEndian.Uint32(b[12:])),
		NumberReturned: int32(binary.LittleEndian.Uint32(b[16:])),
	}
	b = b[20:]
	for len(b) > 0 {
		doc, rest, err := readDocument(b, "OP_REPLY document")
		if err != nil {
			return Reply{}, err
		}
		r.Docs = append(r.Docs, doc)
		b = rest
	}
	if int64(len(r.Docs)) != int64(r.NumberReturned) {
		return Reply{}, mongoerr.New(mongoerr.ProtocolError, "OP_REPLY numberReturned %d but carries %d documents", r.NumberReturned, len(r.Docs))
	}
	return r, nil
}
