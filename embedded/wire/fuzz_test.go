package wire

import (
	"bytes"
	"io"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func fuzzSeeds(f *testing.F) {
	body := mustDoc(f, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "d"}})
	doc := mustDoc(f, bson.D{{Key: "_id", Value: int32(1)}, {Key: "s", Value: "x"}})
	f.Add(AppendMsg(nil, 1, 0, 0, body))
	f.Add(AppendMsg(nil, 1, 0, FlagChecksumPresent, body))
	f.Add(Msg{Flags: FlagMoreToCome, Body: body, Sequences: []Sequence{{Identifier: "documents", Docs: []bson.Raw{doc, doc}}}}.Append(nil, 2, 1))
	f.Add(appendQuery(nil, "admin.$cmd", mustDoc(f, bson.D{{Key: "$query", Value: bson.D{{Key: "isMaster", Value: 1}}}}), doc))
	f.Add(AppendReply(nil, 1, 2, 8, doc, body))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 7, 0, 0})
}

func FuzzReadMessage(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxSize = 1 << 10
		h, msg, err := ReadMessage(bytes.NewReader(data), maxSize)
		if err != nil {
			return
		}
		if len(msg) > maxSize || cap(msg) > maxSize || int(h.Length) != len(msg) || !bytes.Equal(msg, data[:len(msg)]) {
			t.Fatalf("header %+v, %d bytes (cap %d) from %d", h, len(msg), cap(msg), len(data))
		}
	})
}

func FuzzParseMsg(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMsg(data)
		if err != nil {
			return
		}
		if err := m.Body.Validate(); err != nil {
			t.Fatalf("accepted body is invalid: %v", err)
		}
		_ = CommandName(m.Body)
		merged := m.MergedBody()
		if err := merged.Validate(); err != nil {
			t.Fatalf("merged body is invalid: %v", err)
		}
		h, _ := ParseHeader(data)
		again, err := ParseMsg(m.Append(nil, h.RequestID, h.ResponseTo))
		if err != nil {
			t.Fatalf("re-encoded message rejected: %v", err)
		}
		if again.Flags != m.Flags || !bytes.Equal(again.Body, m.Body) || len(again.Sequences) != len(m.Sequences) {
			t.Fatalf("round trip changed the message")
		}
	})
}

func FuzzParseQuery(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		q, err := ParseQuery(data)
		if err != nil {
			return
		}
		if err := q.Query.Validate(); err != nil {
			t.Fatalf("accepted query is invalid: %v", err)
		}
		if cmd := q.Command(); cmd.Validate() != nil {
			t.Fatalf("command of an accepted query is invalid")
		}
		_, _ = ParseReply(data)
	})
}

// chunkReader returns data chunk bytes at a time and records, for every Read, the capacity
// of the buffer it was given and how many bytes it had delivered before.
type chunkReader struct {
	data      []byte
	chunk     int
	delivered int
	reads     [][2]int // {cap(p), delivered}
}

func (r *chunkReader) Read(p []byte) (int, error) {
	r.reads = append(r.reads, [2]int{cap(p), r.delivered})
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.chunk)], r.data)
	r.data = r.data[n:]
	r.delivered += n
	return n, nil
}

// FuzzReadMessageGrowth: whatever length a message claims (up to mongod's 48 MB) and however
// its bytes arrive, ReadMessage's buffer is never larger than its first allocation or twice
// the bytes that had arrived, so a claim costs what is sent; a complete message reads back
// byte for byte.
func FuzzReadMessageGrowth(f *testing.F) {
	f.Add(claim(DefaultMaxMessageSize, make([]byte, 1<<10)), uint16(100))
	f.Add(claim(DefaultMaxMessageSize, make([]byte, 3*initialAlloc)), uint16(0xffff))
	f.Add(claim(3*initialAlloc+HeaderSize, make([]byte, 3*initialAlloc)), uint16(7))
	f.Add(claim(HeaderSize+5, []byte("hello")), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16) {
		r := &chunkReader{data: data, chunk: int(chunk) + 1}
		h, msg, err := ReadMessage(r, DefaultMaxMessageSize)
		for _, rd := range r.reads {
			if rd[0] > max(initialAlloc, 2*rd[1]) {
				t.Fatalf("a %d-byte buffer after %d bytes arrived (claim %d)", rd[0], rd[1], h.Length)
			}
		}
		if err == nil && (int(h.Length) != len(msg) || !bytes.Equal(msg, data[:len(msg)])) {
			t.Fatalf("header %+v, %d bytes read from %d", h, len(msg), len(data))
		}
	})
}
