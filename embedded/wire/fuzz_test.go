package wire

import (
	"bytes"
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
