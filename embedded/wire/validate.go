package wire

import (
	"bytes"
	"encoding/binary"

	"github.com/gameops/rollup/embedded/mongoerr"
)

// readDocument takes one BSON document off the front of b, validating it completely (as mongod's
// Validated<BSONObj> does), and returns it and the rest of b.
func readDocument(b []byte, what string) ([]byte, []byte, error) {
	if len(b) < 4 {
		return nil, nil, mongoerr.New(CodeInvalidBSON, "%s: %d bytes left, too few for a BSON document", what, len(b))
	}
	n := int64(int32(binary.LittleEndian.Uint32(b)))
	if n < 5 || n > MaxInternalBSONObjectSize {
		return nil, nil, mongoerr.New(CodeInvalidBSON,
			"%s: BSONObj size: %d (0x%X) is invalid. Size must be between 0 and %d(16MB)", what, n, uint32(n), MaxInternalBSONObjectSize)
	}
	if n > int64(len(b)) {
		return nil, nil, mongoerr.New(CodeInvalidBSON, "%s: BSON document of %d bytes overruns the %d bytes left", what, n, len(b))
	}
	doc := b[:n]
	if reason := validateDoc(doc, 0); reason != "" {
		return nil, nil, mongoerr.New(CodeInvalidBSON, "%s: invalid BSON: %s", what, reason)
	}
	return doc, b[n:], nil
}

// validateDoc checks a document whose length prefix is already known to equal len(doc).
// It returns "" when the document is valid, or the reason it is not.
func validateDoc(doc []byte, depth int) string {
	if depth > MaxBSONDepth {
		return "exceeds maximum nested object depth"
	}
	if len(doc) < 5 || int(int32(binary.LittleEndian.Uint32(doc))) != len(doc) {
		return "bad document length"
	}
	if doc[len(doc)-1] != 0 {
		return "document does not end with a NUL byte"
	}
	rem := doc[4 : len(doc)-1]
	for len(rem) > 0 {
		t := rem[0]
		k := bytes.IndexByte(rem[1:], 0)
		if k < 0 {
			return "unterminated field name"
		}
		rem = rem[k+2:]
		n, reason := valueSize(t, rem, depth)
		if reason != "" {
			return reason
		}
		rem = rem[n:]
	}
	return ""
}

// valueSize returns the size of the value of type t at the front of b, validating it.
func valueSize(t byte, b []byte, depth int) (int, string) {
	fixed := -1
	switch t {
	case 0x06, 0x0A, 0x7F, 0xFF: // undefined, null, maxKey, minKey
		fixed = 0
	case 0x08: // bool: the byte must be 0 or 1
		if len(b) > 0 && b[0] > 1 {
			return 0, "invalid boolean value"
		}
		fixed = 1
	case 0x10: // int32
		fixed = 4
	case 0x01, 0x09, 0x11, 0x12: // double, date, timestamp, int64
		fixed = 8
	case 0x07: // ObjectId
		fixed = 12
	case 0x13: // decimal128
		fixed = 16
	}
	if fixed >= 0 {
		if len(b) < fixed {
			return 0, "value overruns its document"
		}
		return fixed, ""
	}
	switch t {
	case 0x02, 0x0D, 0x0E: // string, JavaScript, symbol
		return stringSize(b)
	case 0x03, 0x04: // document, array
		return docSize(b, depth)
	case 0x05: // binary
		if len(b) < 5 {
			return 0, "binary overruns its document"
		}
		n := int64(int32(binary.LittleEndian.Uint32(b)))
		if n < 0 || n+5 > int64(len(b)) {
			return 0, "bad binary length"
		}
		if b[4] == 0x02 { // old binary: an inner length of the rest
			if n < 4 || int64(int32(binary.LittleEndian.Uint32(b[5:]))) != n-4 {
				return 0, "bad old binary (subtype 2) inner length"
			}
		}
		return int(n) + 5, ""
	case 0x0B: // regex: two C strings
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return 0, "unterminated regex pattern"
		}
		j := bytes.IndexByte(b[i+1:], 0)
		if j < 0 {
			return 0, "unterminated regex options"
		}
		return i + j + 2, ""
	case 0x0C: // DBPointer: string, ObjectId
		n, reason := stringSize(b)
		if reason != "" {
			return 0, reason
		}
		if len(b)-n < 12 {
			return 0, "DBPointer overruns its document"
		}
		return n + 12, ""
	case 0x0F: // code with scope: int32 total, string, document
		if len(b) < 4 {
			return 0, "code with scope overruns its document"
		}
		total := int64(int32(binary.LittleEndian.Uint32(b)))
		if total < 14 || total > int64(len(b)) {
			return 0, "bad code with scope length"
		}
		inner := b[4:total]
		s, reason := stringSize(inner)
		if reason != "" {
			return 0, reason
		}
		d, reason := docSize(inner[s:], depth)
		if reason != "" {
			return 0, reason
		}
		if s+d != len(inner) {
			return 0, "code with scope length does not match its contents"
		}
		return int(total), ""
	}
	return 0, "unknown BSON type"
}

func stringSize(b []byte) (int, string) {
	if len(b) < 4 {
		return 0, "string overruns its document"
	}
	n := int64(int32(binary.LittleEndian.Uint32(b)))
	if n < 1 || n+4 > int64(len(b)) {
		return 0, "bad string length"
	}
	if b[3+n] != 0 {
		return 0, "string does not end with a NUL byte"
	}
	return int(n) + 4, ""
}

func docSize(b []byte, depth int) (int, string) {
	if len(b) < 4 {
		return 0, "embedded document overruns its document"
	}
	n := int64(int32(binary.LittleEndian.Uint32(b)))
	if n < 5 || n > int64(len(b)) {
		return 0, "bad embedded document length"
	}
	if reason := validateDoc(b[:n], depth+1); reason != "" {
		return 0, reason
	}
	return int(n), ""
}
