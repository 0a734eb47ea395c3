package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"testing/iotest"
)

// claim returns a header claiming a message of length bytes, followed by body.
func claim(length int32, body []byte) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(body))
	binary.LittleEndian.PutUint32(b, uint32(length))
	binary.LittleEndian.PutUint32(b[12:], uint32(OpMsg))
	return append(b, body...)
}

// TestReadMessageSizes reads messages around the buffer's growth steps, from a reader that
// returns short reads, and gets them back byte for byte.
func TestReadMessageSizes(t *testing.T) {
	for _, size := range []int{HeaderSize, initialAlloc - 1, initialAlloc, initialAlloc + 1, 2*initialAlloc + 7, 5 << 20, int(DefaultMaxMessageSize)} {
		body := make([]byte, size-HeaderSize)
		for i := range body {
			body[i] = byte(i * 7)
		}
		in := claim(int32(size), body)
		h, msg, err := ReadMessage(iotest.HalfReader(bytes.NewReader(in)), DefaultMaxMessageSize)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if int(h.Length) != size || !bytes.Equal(msg, in) {
			t.Fatalf("size %d: got %d bytes, header %+v", size, len(msg), h)
		}
	}
}

// TestReadMessageAllocatesWhatArrives: a message claiming 48 MB costs about what its sender
// actually sent, not the length it claims.
func TestReadMessageAllocatesWhatArrives(t *testing.T) {
	for _, sent := range []int{0, 1 << 10, 100 << 10, 1 << 20} {
		in := claim(DefaultMaxMessageSize, make([]byte, sent))
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, err := ReadMessage(bytes.NewReader(in), DefaultMaxMessageSize)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("sent %d: err = %v, want unexpected EOF", sent, err)
		}
		// Doubling: the buffers hold at most twice what arrived, plus the first allocation.
		bound := uint64(4*sent + initialAlloc + 16<<10)
		if got := after.TotalAlloc - before.TotalAlloc; got > bound {
			t.Errorf("claimed %d bytes, sent %d: allocated %d, want <= %d", DefaultMaxMessageSize, sent, got, bound)
		}
	}
}
