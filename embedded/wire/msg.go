package wire

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
)

const (
	sectionBody          byte = 0
	sectionDocSequence   byte = 1
	sectionSecurityToken byte = 2
	checksumSize              = 4
	knownFlags                = FlagChecksumPresent | FlagMoreToCome
	requiredFlagMask          = 0xffff
)

// Sequence is a kind-1 section of an OP_MSG: documents that belong to the body field named
// Identifier (for example "documents" of insert or "updates" of update).
type Sequence struct {
	Identifier string
	Docs       []bson.Raw
}

// Msg is a parsed OP_MSG. Body and the sequence documents alias the parsed message.
type Msg struct {
	Flags     uint32
	Body      bson.Raw
	Sequences []Sequence
}

// ParseMsg parses and validates a complete OP_MSG (msg includes the header) the way mongod 7.0
// does: unknown required flag bits (the low 16 other than checksumPresent and moreToCome) are
// IllegalOpMsgFlag; there must be exactly one kind-0 body section and at most
// MaxDocumentSequences kind-1 sections with distinct identifiers none of which is also a body
// field; every document must be valid BSON and fill its section exactly; and when
// FlagChecksumPresent is set the trailing CRC-32C (Castagnoli) of all preceding bytes must
// match (ChecksumMismatch). OP_COMPRESSED and other op codes are refused with a ProtocolError.
func ParseMsg(msg []byte) (Msg, error) {
	if _, err := checkFrame(msg, OpMsg, "OP_MSG"); err != nil {
		return Msg{}, err
	}
	data := msg[HeaderSize:]
	if len(data) < 4 {
		return Msg{}, mongoerr.New(mongoerr.ProtocolError, "OP_MSG of %d bytes has no flags", len(msg))
	}
	m := Msg{Flags: binary.LittleEndian.Uint32(data)}
	if m.Flags&^knownFlags&requiredFlagMask != 0 {
		return Msg{}, mongoerr.New(CodeIllegalOpMsgFlag, "Message contains illegal flags value: Ob%032b", m.Flags)
	}
	sections := data[4:]
	hasChecksum := m.Flags&FlagChecksumPresent != 0
	if hasChecksum {
		if len(data) <= 4+checksumSize {
			return Msg{}, mongoerr.New(51252, "Invalid message size for an OpMsg containing a checksum")
		}
		sections = data[4 : len(data)-checksumSize]
	}
	haveBody := false
	for len(sections) > 0 {
		kind := sections[0]
		sections = sections[1:]
		var err error
		switch kind {
		case sectionBody:
			if haveBody {
				return Msg{}, mongoerr.New(40430, "Multiple body sections in message")
			}
			haveBody = true
			m.Body, sections, err = readDocument(sections, "OP_MSG body")
		case sectionDocSequence:
			if len(m.Sequences) >= MaxDocumentSequences {
				return Msg{}, mongoerr.New(CodeTooManyDocumentSequences, "Too many document sequences in OP_MSG")
			}
			var seq Sequence
			seq, sections, err = readSequence(sections)
			if err == nil {
				for _, s := range m.Sequences {
					if s.Identifier == seq.Identifier {
						return Msg{}, mongoerr.New(40431, "Duplicate document sequence: %s", seq.Identifier)
					}
				}
				m.Sequences = append(m.Sequences, seq)
			}
		case sectionSecurityToken:
			return Msg{}, mongoerr.New(mongoerr.Unauthorized, "Unsupported Security Token provided")
		default:
			return Msg{}, mongoerr.New(40432, "Unknown section kind %d", kind)
		}
		if err != nil {
			return Msg{}, err
		}
	}
	if !haveBody {
		return Msg{}, mongoerr.New(40587, "OP_MSG messages must have a body")
	}
	for _, s := range m.Sequences {
		if pathAlongArrays(m.Body, s.Identifier) {
			return Msg{}, mongoerr.New(40433, "Duplicate field between body and document sequence %s", s.Identifier)
		}
	}
	if hasChecksum {
		n := len(msg) - checksumSize
		want := binary.LittleEndian.Uint32(msg[n:])
		if got := Checksum(msg[:n]); got != want {
			return Msg{}, mongoerr.New(CodeChecksumMismatch, "OP_MSG checksum does not match contents")
		}
	}
	return m, nil
}

// readSequence reads a kind-1 section (after its kind byte).
func readSequence(b []byte) (Sequence, []byte, error) {
	if len(b) < 4 {
		return Sequence{}, nil, mongoerr.New(mongoerr.ProtocolError, "document sequence size overruns the message")
	}
	size := int64(int32(binary.LittleEndian.Uint32(b)))
	if size < 4 || size > int64(len(b)) {
		return Sequence{}, nil, mongoerr.New(mongoerr.ProtocolError,
			"document sequence size %d is invalid with %d bytes left in the message", size, len(b))
	}
	body, rest := b[4:size], b[size:]
	nul := bytes.IndexByte(body, 0)
	if nul < 0 {
		return Sequence{}, nil, mongoerr.New(mongoerr.ProtocolError, "document sequence identifier is not NUL-terminated")
	}
	seq := Sequence{Identifier: string(body[:nul])}
	body = body[nul+1:]
	what := "document sequence " + seq.Identifier
	for len(body) > 0 {
		doc, more, err := readDocument(body, what)
		if err != nil {
			return Sequence{}, nil, err
		}
		seq.Docs = append(seq.Docs, bson.Raw(doc))
		body = more
	}
	return seq, rest, nil
}

// pathAlongArrays reports whether the dotted path exists in doc, stopping with true at the
// first array met along the path (mongod's extractElementAtPathOrArrayAlongPath).
func pathAlongArrays(doc []byte, path string) bool {
	for {
		key, rest, dotted := strings.Cut(path, ".")
		v, err := bson.Raw(doc).LookupErr(key)
		if err != nil {
			return false
		}
		if !dotted {
			return true
		}
		switch v.Type {
		case bson.TypeArray:
			return true
		case bson.TypeEmbeddedDocument:
			doc, path = v.Value, rest
		default:
			return false
		}
	}
}

// Checksum is the CRC-32C (Castagnoli) that OP_MSG uses over all bytes before the checksum.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// AppendMsg appends an OP_MSG with one kind-0 section holding body. If flags includes
// FlagChecksumPresent a correct CRC-32C is appended too (mongod never sends one; clients may).
func AppendMsg(dst []byte, requestID, responseTo int32, flags uint32, body []byte) []byte {
	return Msg{Flags: flags, Body: body}.Append(dst, requestID, responseTo)
}

// AppendMsgBody appends an OP_MSG (no flags) with one kind-0 section whose document appendBody
// appends in place: a reply encoded straight into the connection's buffer, not into a copy of
// its own first. An error from appendBody is returned with dst as it was.
func AppendMsgBody(dst []byte, requestID, responseTo int32, appendBody func(dst []byte) ([]byte, error)) ([]byte, error) {
	start, out := appendHeader(dst, requestID, responseTo, OpMsg)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = append(out, sectionBody)
	out, err := appendBody(out)
	if err != nil {
		return dst[:start], err
	}
	return finishMessage(out, start), nil
}

// Append appends m as a complete OP_MSG: the body section, then one kind-1 section per
// sequence, then the checksum when m.Flags includes FlagChecksumPresent.
func (m Msg) Append(dst []byte, requestID, responseTo int32) []byte {
	start, dst := appendHeader(dst, requestID, responseTo, OpMsg)
	dst = binary.LittleEndian.AppendUint32(dst, m.Flags)
	dst = append(dst, sectionBody)
	dst = append(dst, m.Body...)
	for _, s := range m.Sequences {
		dst = append(dst, sectionDocSequence)
		sizeAt := len(dst)
		dst = appendInt32(dst, 0)
		dst = append(dst, s.Identifier...)
		dst = append(dst, 0)
		for _, d := range s.Docs {
			dst = append(dst, d...)
		}
		binary.LittleEndian.PutUint32(dst[sizeAt:], uint32(len(dst)-sizeAt))
	}
	if m.Flags&FlagChecksumPresent != 0 {
		dst = appendInt32(dst, 0)
		dst = finishMessage(dst, start)
		n := len(dst) - checksumSize
		binary.LittleEndian.PutUint32(dst[n:], Checksum(dst[start:n]))
		return dst
	}
	return finishMessage(dst, start)
}

// MergedBody returns the command as mongod's command parsers see it: the body with each
// document sequence appended as an array field named by its identifier, in order. Without
// sequences it returns m.Body itself; otherwise a new document. The result is not size-checked
// and may exceed 16MB for large batches.
func (m Msg) MergedBody() bson.Raw {
	if len(m.Sequences) == 0 || len(m.Body) < 5 {
		return m.Body
	}
	out := make([]byte, 0, len(m.Body)+m.sequenceBytes())
	out = append(out, m.Body[:len(m.Body)-1]...)
	var key []byte
	for _, s := range m.Sequences {
		out = append(out, byte(bson.TypeArray))
		out = append(out, s.Identifier...)
		out = append(out, 0)
		at := len(out)
		out = appendInt32(out, 0)
		for i, d := range s.Docs {
			out = append(out, byte(bson.TypeEmbeddedDocument))
			key = strconv.AppendInt(key[:0], int64(i), 10)
			out = append(out, key...)
			out = append(out, 0)
			out = append(out, d...)
		}
		out = append(out, 0)
		binary.LittleEndian.PutUint32(out[at:], uint32(len(out)-at))
	}
	out = append(out, 0)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}

func (m Msg) sequenceBytes() int {
	n := 0
	for _, s := range m.Sequences {
		n += len(s.Identifier) + 6
		for _, d := range s.Docs {
			n += len(d) + 8
		}
	}
	return n
}

// CommandName returns the first key of a command document, or "" when body is empty or
// malformed. It does not validate the rest of the document.
func CommandName(body bson.Raw) string {
	if len(body) < 5 {
		return ""
	}
	n := int64(int32(binary.LittleEndian.Uint32(body)))
	if n < 5 || n > int64(len(body)) || body[4] == 0 {
		return ""
	}
	k := bytes.IndexByte(body[5:n], 0)
	if k < 0 {
		return ""
	}
	return string(body[5 : 5+k])
}
