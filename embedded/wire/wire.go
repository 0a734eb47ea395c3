package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/gameops/rollup/embedded/mongoerr"
)

// Op codes of the messages this package knows.
const (
	OpReply      int32 = 1
	OpQuery      int32 = 2004
	OpCompressed int32 = 2012
	OpMsg        int32 = 2013
)

// OP_MSG flag bits.
const (
	FlagChecksumPresent uint32 = 1 << 0
	FlagMoreToCome      uint32 = 1 << 1
	FlagExhaustAllowed  uint32 = 1 << 16
)

// Sizes and limits, with mongod's values.
const (
	// HeaderSize is the size of the standard message header.
	HeaderSize = 16
	// DefaultMaxMessageSize is mongod's maxMessageSizeBytes.
	DefaultMaxMessageSize int32 = 48_000_000
	// MaxBSONObjectSize is mongod's maxBsonObjectSize for user documents.
	MaxBSONObjectSize = 16 * 1024 * 1024
	// MaxInternalBSONObjectSize is the largest document mongod accepts inside a message
	// (16MB plus room for command overhead).
	MaxInternalBSONObjectSize = MaxBSONObjectSize + 16*1024
	// MaxDocumentSequences is the number of kind-1 sections mongod accepts in one OP_MSG.
	MaxDocumentSequences = 2
	// MaxBSONDepth is mongod's default maxBSONDepth: documents nested deeper are invalid.
	MaxBSONDepth = 200
)

// Error codes returned by this package that package mongoerr does not name. Their names follow
// MongoDB's error_codes.yml; unnamed mongod assertion codes are used as plain numbers.
const (
	CodeInvalidBSON              int32 = 22
	CodeIllegalOpMsgFlag         int32 = 223
	CodeTooManyDocumentSequences int32 = 233
	CodeChecksumMismatch         int32 = 288
)

// Header is the standard 16-byte header of every wire message.
type Header struct {
	Length, RequestID, ResponseTo, OpCode int32
}

// ParseHeader decodes the header at the start of b. It only reports whether b is long enough;
// the length field is not checked against anything.
func ParseHeader(b []byte) (Header, bool) {
	if len(b) < HeaderSize {
		return Header{}, false
	}
	return Header{
		Length:     int32(binary.LittleEndian.Uint32(b[0:])),
		RequestID:  int32(binary.LittleEndian.Uint32(b[4:])),
		ResponseTo: int32(binary.LittleEndian.Uint32(b[8:])),
		OpCode:     int32(binary.LittleEndian.Uint32(b[12:])),
	}, true
}

// initialAlloc bounds what ReadMessage allocates for a message before its bytes arrive. A
// larger message's buffer doubles as they do, so a peer that claims a large length and then
// sends little costs about what it sent (100 connections each claiming 48 MB used to cost
// 4.8 GB of allocations), at the price of a few copies for the rare large message.
const initialAlloc = 64 << 10

// ReadMessage reads one complete message from r and returns its header and all its bytes,
// header included. A message whose length field is below 16 or above maxSize is rejected with
// a ProtocolError before anything more is read or allocated; otherwise the buffer grows with
// the bytes received, so at most about twice the bytes received (and never more than the
// message length) is allocated. A stream that ends cleanly before the first header byte
// returns an error that wraps io.EOF; one that ends inside a message wraps io.ErrUnexpectedEOF.
func ReadMessage(r io.Reader, maxSize int32) (Header, []byte, error) {
	return readMessageInto(r, nil, maxSize)
}

// maxKeptBuffer bounds the buffer a MessageReader keeps between messages: a busy ingest's bulk
// writes and batches are a few MiB; a larger message is read into a buffer of its own.
const maxKeptBuffer = 8 << 20

// MessageReader reads the messages of one stream, one after another, into one reused buffer
// (kept up to 8 MiB): a message that fits costs no allocation. A message Next returns is
// valid until the next call of Next, so a caller that keeps any of it must copy it.
type MessageReader struct {
	r       io.Reader
	maxSize int32
	buf     []byte
}

// NewMessageReader reads messages of at most maxSize bytes from r (see ReadMessage).
func NewMessageReader(r io.Reader, maxSize int32) *MessageReader {
	return &MessageReader{r: r, maxSize: maxSize}
}

// Next reads the next message as ReadMessage does, into the reader's buffer.
func (m *MessageReader) Next() (Header, []byte, error) {
	h, msg, err := readMessageInto(m.r, m.buf, m.maxSize)
	if msg != nil {
		m.buf = nil
		if cap(msg) <= maxKeptBuffer {
			m.buf = msg
		}
	}
	return h, msg, err
}

// readMessageInto is ReadMessage reading into buf's capacity (its length is ignored): a
// message that fits costs no allocation, and a larger one grows from buf as ReadMessage's
// buffer grows from its first allocation. The message returned may share buf's memory.
func readMessageInto(r io.Reader, buf []byte, maxSize int32) (Header, []byte, error) {
	hb := buf[:0]
	if cap(hb) < HeaderSize {
		hb = make([]byte, 0, HeaderSize)
	}
	hb = hb[:HeaderSize]
	if _, err := io.ReadFull(r, hb); err != nil {
		return Header{}, nil, fmt.Errorf("read message header: %w", err)
	}
	h, _ := ParseHeader(hb)
	if h.Length < HeaderSize || h.Length > maxSize {
		return h, nil, mongoerr.New(mongoerr.ProtocolError,
			"recv(): message msgLen %d is invalid. Min %d Max: %d", h.Length, HeaderSize, maxSize)
	}
	msg, err := readBody(r, buf, hb, int(h.Length))
	return h, msg, err
}

// readBody reads the rest of a message of size bytes whose header is hb (read into buf when
// it had room) into buf's capacity, growing the buffer as the bytes arrive. (A function of
// its own so that a test can see a connection waiting for a message's bytes in a goroutine
// dump.)
func readBody(r io.Reader, buf, hb []byte, size int) ([]byte, error) {
	msg := buf[:0]
	if cap(msg) < min(size, initialAlloc) {
		msg = make([]byte, 0, min(size, initialAlloc))
	}
	msg = append(msg, hb...) // hb may be msg's own first bytes: append copies as memmove does
	for len(msg) < size {
		if len(msg) == cap(msg) {
			grown := make([]byte, len(msg), min(size, 2*cap(msg)))
			copy(grown, msg)
			msg = grown
		}
		n, err := io.ReadFull(r, msg[len(msg):min(cap(msg), size)])
		msg = msg[:len(msg)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("read message body: %w", err)
		}
	}
	return msg, nil
}

// IsConnectionFatal reports whether err is one after which mongod closes the connection instead
// of replying: framing errors (ProtocolError) and the ConnectionFatalMessageParseError class
// (IllegalOpMsgFlag, TooManyDocumentSequences, ChecksumMismatch). Other parse errors from this
// package are answered with an error reply.
func IsConnectionFatal(err error) bool {
	var e *mongoerr.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case mongoerr.ProtocolError, CodeIllegalOpMsgFlag, CodeTooManyDocumentSequences, CodeChecksumMismatch:
		return true
	}
	return false
}

// checkFrame validates the header of a complete message against its bytes and its op code.
func checkFrame(msg []byte, want int32, what string) (Header, error) {
	h, ok := ParseHeader(msg)
	if !ok {
		return h, mongoerr.New(mongoerr.ProtocolError, "message of %d bytes is shorter than its header", len(msg))
	}
	if int(h.Length) != len(msg) {
		return h, mongoerr.New(mongoerr.ProtocolError, "message length field %d does not match its %d bytes", h.Length, len(msg))
	}
	switch h.OpCode {
	case want:
		return h, nil
	case OpCompressed:
		return h, mongoerr.New(mongoerr.ProtocolError, "OP_COMPRESSED is not supported: the server advertises no compressors")
	default:
		return h, mongoerr.New(mongoerr.ProtocolError, "expected %s but the message has opCode %d", what, h.OpCode)
	}
}

func appendInt32(dst []byte, v int32) []byte { return binary.LittleEndian.AppendUint32(dst, uint32(v)) }

// appendHeader appends a header whose length is patched by finishMessage.
func appendHeader(dst []byte, requestID, responseTo, opCode int32) (int, []byte) {
	start := len(dst)
	dst = appendInt32(dst, 0)
	dst = appendInt32(dst, requestID)
	dst = appendInt32(dst, responseTo)
	dst = appendInt32(dst, opCode)
	return start, dst
}

func finishMessage(dst []byte, start int) []byte {
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}
