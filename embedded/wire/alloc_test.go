package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"sync"
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

// stallingReader returns data, then tells stalled it has nothing more and blocks until
// release is closed (a peer that sent part of a message and went quiet).
type stallingReader struct {
	data    []byte
	stalled func()
	release <-chan struct{}
}

func (r *stallingReader) Read(p []byte) (int, error) {
	if len(r.data) > 0 {
		n := copy(p, r.data)
		r.data = r.data[n:]
		return n, nil
	}
	if r.stalled != nil {
		r.stalled()
		r.stalled = nil
	}
	<-r.release
	return 0, io.EOF
}

// TestStalledClaimsHeapInUse: 100 readers each receive a header claiming a 48 MB message
// (and 1 KiB of it) and stall. While all 100 wait for the rest, the heap in use has grown by
// about one first allocation each (initialAlloc), not by the claimed lengths (100 × 48 MB),
// and nothing along the way allocated them either.
func TestStalledClaimsHeapInUse(t *testing.T) {
	const readers = 100
	in := claim(DefaultMaxMessageSize, make([]byte, 1<<10))
	release := make(chan struct{})
	var stalled, done sync.WaitGroup
	stalled.Add(readers)
	runtime.GC()
	var before, during runtime.MemStats
	runtime.ReadMemStats(&before)
	errs := make(chan error, readers)
	for range readers {
		done.Go(func() {
			_, _, err := ReadMessage(&stallingReader{data: in, stalled: stalled.Done, release: release}, DefaultMaxMessageSize)
			errs <- err
		})
	}
	stalled.Wait() // every reader holds its buffer and waits for bytes that do not come
	runtime.GC()
	runtime.ReadMemStats(&during)
	close(release)
	done.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v, want unexpected EOF", err)
		}
	}
	inUse := int64(during.HeapInuse) - int64(before.HeapInuse)
	allocated := during.TotalAlloc - before.TotalAlloc
	t.Logf("%d stalled readers claiming %d bytes each: heap in use +%d KiB, allocated %d KiB", readers, DefaultMaxMessageSize, inUse>>10, allocated>>10)
	// Per reader: its first allocation, its goroutine's and the test's small objects.
	const bound = readers * (initialAlloc + 16<<10)
	if inUse > bound || allocated > bound {
		t.Errorf("heap in use +%d KiB, allocated %d KiB; want <= %d KiB (the claims are %d MiB)",
			inUse>>10, allocated>>10, bound>>10, readers*int64(DefaultMaxMessageSize)>>20)
	}
}

// TestMessageReader: messages of sizes around the growth steps and beyond the kept buffer,
// read one after another from one stream (in short reads) into the reader's reused buffer,
// come back byte for byte; a message beyond maxKeptBuffer is not kept for the next, and one
// that fits the buffer allocates nothing.
func TestMessageReader(t *testing.T) {
	sizes := []int{HeaderSize + 10, 3 * initialAlloc, HeaderSize, initialAlloc + 1, 5 << 20, 100, maxKeptBuffer + 1, 7 + HeaderSize, 2*initialAlloc + 7}
	var stream []byte
	var want [][]byte
	for _, size := range sizes {
		body := make([]byte, size-HeaderSize)
		for i := range body {
			body[i] = byte(i*7 + size)
		}
		want = append(want, claim(int32(size), body))
		stream = append(stream, want[len(want)-1]...)
	}
	m := NewMessageReader(iotest.HalfReader(bytes.NewReader(stream)), DefaultMaxMessageSize)
	for i, w := range want {
		h, msg, err := m.Next()
		if err != nil {
			t.Fatalf("message %d (%d bytes): %v", i, len(w), err)
		}
		if int(h.Length) != len(w) || !bytes.Equal(msg, w) {
			t.Fatalf("message %d (%d bytes): got %d bytes, header %+v", i, len(w), len(msg), h)
		}
		if len(w) > maxKeptBuffer && m.buf != nil {
			t.Fatalf("a %d-byte message's buffer is kept for the next", len(w))
		}
	}
	if _, _, err := m.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last message: %v, want EOF", err)
	}
	in := claim(1000, make([]byte, 1000-HeaderSize))
	rd := bytes.NewReader(in)
	m = NewMessageReader(rd, DefaultMaxMessageSize)
	if _, _, err := m.Next(); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(20, func() {
		rd.Reset(in)
		if _, _, err := m.Next(); err != nil {
			t.Fatal(err)
		}
	}); allocs > 0 {
		t.Errorf("a message that fits the buffer: %.0f allocations, want 0", allocs)
	}
}
