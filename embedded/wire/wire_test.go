package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

func mustDoc(t testing.TB, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatalf("marshal %v: %v", d, err)
	}
	return b
}

// rawMsg builds an OP_MSG by hand from already-encoded sections, optionally with a checksum
// (correct, or corrupted when badSum).
func rawMsg(opCode int32, flags uint32, checksum, badSum bool, sections ...[]byte) []byte {
	b := make([]byte, HeaderSize)
	binary.LittleEndian.PutUint32(b[4:], 7)
	binary.LittleEndian.PutUint32(b[12:], uint32(opCode))
	b = binary.LittleEndian.AppendUint32(b, flags)
	for _, s := range sections {
		b = append(b, s...)
	}
	if checksum {
		b = append(b, 0, 0, 0, 0)
	}
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	if checksum {
		sum := Checksum(b[:len(b)-4])
		if badSum {
			sum ^= 1
		}
		binary.LittleEndian.PutUint32(b[len(b)-4:], sum)
	}
	return b
}

func bodySection(doc []byte) []byte { return append([]byte{0}, doc...) }

func seqSection(id string, docs ...[]byte) []byte {
	b := []byte{1, 0, 0, 0, 0}
	b = append(b, id...)
	b = append(b, 0)
	for _, d := range docs {
		b = append(b, d...)
	}
	binary.LittleEndian.PutUint32(b[1:], uint32(len(b)-1))
	return b
}

func wantCode(t *testing.T, err error, code int32) {
	t.Helper()
	if code == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var e *mongoerr.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a *mongoerr.Error, want code %d", err, code)
	}
	if e.Code != code {
		t.Fatalf("error code %d (%v), want %d", e.Code, err, code)
	}
}

func TestReadMessage(t *testing.T) {
	good := AppendMsg(nil, 1, 0, 0, mustDoc(t, bson.D{{Key: "ping", Value: 1}}))
	withLen := func(n uint32) []byte {
		b := bytes.Clone(good)
		binary.LittleEndian.PutUint32(b, n)
		return b
	}
	tests := []struct {
		name    string
		in      []byte
		max     int32
		code    int32
		ioErr   error
		wantLen int
	}{
		{name: "ok", in: good, max: 1000, wantLen: len(good)},
		{name: "exactly max", in: good, max: int32(len(good)), wantLen: len(good)},
		{name: "above max", in: good, max: int32(len(good)) - 1, code: mongoerr.ProtocolError},
		{name: "length below header", in: withLen(15), max: 1000, code: mongoerr.ProtocolError},
		{name: "negative length", in: withLen(0xffffffff), max: 1000, code: mongoerr.ProtocolError},
		{name: "huge length", in: withLen(0x7fffffff), max: DefaultMaxMessageSize, code: mongoerr.ProtocolError},
		{name: "empty stream", in: nil, max: 1000, ioErr: io.EOF},
		{name: "truncated header", in: good[:7], max: 1000, ioErr: io.ErrUnexpectedEOF},
		{name: "truncated body", in: good[:len(good)-1], max: 1000, ioErr: io.ErrUnexpectedEOF},
		{name: "header only message", in: withLen(16)[:16], max: 1000, wantLen: 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bytes.NewReader(tt.in)
			h, msg, err := ReadMessage(r, tt.max)
			switch {
			case tt.ioErr != nil:
				if !errors.Is(err, tt.ioErr) {
					t.Fatalf("err = %v, want %v", err, tt.ioErr)
				}
				if errors.Is(tt.ioErr, io.ErrUnexpectedEOF) && errors.Is(err, io.EOF) {
					t.Fatalf("truncation must not look like a clean EOF: %v", err)
				}
			case tt.code != 0:
				wantCode(t, err, tt.code)
				if IsConnectionFatal(err) != true {
					t.Fatalf("framing error must be connection-fatal")
				}
				if r.Len() != len(tt.in)-HeaderSize {
					t.Fatalf("read %d bytes past the rejected header", len(tt.in)-HeaderSize-r.Len())
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if len(msg) != tt.wantLen || h.Length != int32(tt.wantLen) || !bytes.Equal(msg, tt.in[:tt.wantLen]) {
					t.Fatalf("got %d bytes, header %+v", len(msg), h)
				}
			}
		})
	}
}

func TestReadMessageStream(t *testing.T) {
	var stream []byte
	for i := range int32(5) {
		stream = AppendMsg(stream, i, i+100, 0, mustDoc(t, bson.D{{Key: "n", Value: i}}))
	}
	r := bytes.NewReader(stream)
	for i := range int32(5) {
		h, msg, err := ReadMessage(r, DefaultMaxMessageSize)
		if err != nil {
			t.Fatal(err)
		}
		if h.RequestID != i || h.ResponseTo != i+100 || h.OpCode != OpMsg || int(h.Length) != len(msg) {
			t.Fatalf("message %d header %+v", i, h)
		}
	}
	if _, _, err := ReadMessage(r, DefaultMaxMessageSize); !errors.Is(err, io.EOF) {
		t.Fatalf("after last message err = %v, want EOF", err)
	}
}

func TestMsgRoundTrip(t *testing.T) {
	body := mustDoc(t, bson.D{{Key: "insert", Value: "c"}, {Key: "$db", Value: "d"}})
	d1 := mustDoc(t, bson.D{{Key: "_id", Value: 1}})
	d2 := mustDoc(t, bson.D{{Key: "_id", Value: 2}, {Key: "a", Value: bson.A{"x", bson.D{{Key: "y", Value: nil}}}}})
	tests := []Msg{
		{Body: body},
		{Flags: FlagMoreToCome, Body: body},
		{Flags: FlagExhaustAllowed, Body: body},
		{Flags: FlagChecksumPresent, Body: body},
		{Flags: FlagChecksumPresent | FlagMoreToCome | 1<<20, Body: body, Sequences: []Sequence{{Identifier: "documents", Docs: []bson.Raw{d1, d2}}}},
		{Body: body, Sequences: []Sequence{{Identifier: "documents", Docs: []bson.Raw{d1}}, {Identifier: "x.y"}}},
	}
	for i, m := range tests {
		raw := m.Append([]byte("prefix"), 42, 41)
		if string(raw[:6]) != "prefix" {
			t.Fatalf("%d: Append clobbered dst", i)
		}
		raw = raw[6:]
		h, _ := ParseHeader(raw)
		if h != (Header{Length: int32(len(raw)), RequestID: 42, ResponseTo: 41, OpCode: OpMsg}) {
			t.Fatalf("%d: header %+v", i, h)
		}
		got, err := ParseMsg(raw)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if got.Flags != m.Flags || !bytes.Equal(got.Body, m.Body) || len(got.Sequences) != len(m.Sequences) {
			t.Fatalf("%d: got %+v want %+v", i, got, m)
		}
		for j, s := range m.Sequences {
			g := got.Sequences[j]
			if g.Identifier != s.Identifier || len(g.Docs) != len(s.Docs) {
				t.Fatalf("%d: sequence %d = %+v want %+v", i, j, g, s)
			}
			for k := range s.Docs {
				if !bytes.Equal(g.Docs[k], s.Docs[k]) {
					t.Fatalf("%d: sequence %d doc %d differs", i, j, k)
				}
			}
		}
		if m.Flags&FlagChecksumPresent != 0 {
			// Flipping any byte covered by the checksum (after the length) must be detected,
			// whatever else it breaks.
			bad := bytes.Clone(raw)
			bad[len(bad)-1] ^= 0x80
			wantCode(t, func() error { _, err := ParseMsg(bad); return err }(), CodeChecksumMismatch)
		}
	}
	if a, b := AppendMsg(nil, 1, 2, FlagMoreToCome, body), (Msg{Flags: FlagMoreToCome, Body: body}).Append(nil, 1, 2); !bytes.Equal(a, b) {
		t.Fatalf("AppendMsg and Msg.Append differ")
	}
	// AppendMsgBody encodes in place what AppendMsg frames, and leaves dst as it was when the
	// body fails.
	got, err := AppendMsgBody([]byte("prefix"), 1, 2, func(dst []byte) ([]byte, error) { return append(dst, body...), nil })
	if want := AppendMsg([]byte("prefix"), 1, 2, 0, body); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("AppendMsgBody = %x, %v; want %x", got, err, want)
	}
	boom := errors.New("boom")
	got, err = AppendMsgBody([]byte("prefix"), 1, 2, func(dst []byte) ([]byte, error) { return append(dst, 1, 2, 3), boom })
	if !errors.Is(err, boom) || string(got) != "prefix" {
		t.Fatalf("AppendMsgBody with a failing body = %q, %v; want the prefix and its error", got, err)
	}
}

func TestChecksum(t *testing.T) {
	// The standard CRC-32C check value.
	if got := Checksum([]byte("123456789")); got != 0xE3069283 {
		t.Fatalf("Checksum = %#x, want 0xe3069283 (CRC-32C)", got)
	}
	body := mustDoc(t, bson.D{{Key: "ping", Value: int32(1)}, {Key: "$db", Value: "admin"}})
	good := rawMsg(OpMsg, FlagChecksumPresent, true, false, bodySection(body))
	if _, err := ParseMsg(good); err != nil {
		t.Fatalf("correct checksum rejected: %v", err)
	}
	if !bytes.Equal(good, AppendMsg(nil, 7, 0, FlagChecksumPresent, body)) {
		t.Fatalf("AppendMsg checksum message differs from hand-built one")
	}
	wantCode(t, func() error {
		_, err := ParseMsg(rawMsg(OpMsg, FlagChecksumPresent, true, true, bodySection(body)))
		return err
	}(), CodeChecksumMismatch)
	// A valid body whose value changed after checksumming.
	tampered := bytes.Clone(good)
	i := bytes.Index(tampered, []byte("ping")) + 5
	tampered[i] = 2
	_, err := ParseMsg(tampered)
	wantCode(t, err, CodeChecksumMismatch)
	if !IsConnectionFatal(err) {
		t.Fatal("ChecksumMismatch must be connection-fatal")
	}
	// Without the flag the same trailing bytes are an unknown section.
	noFlag := bytes.Clone(good)
	binary.LittleEndian.PutUint32(noFlag[HeaderSize:], 0)
	if _, err := ParseMsg(noFlag); err == nil {
		t.Fatal("trailing checksum bytes without the flag accepted")
	}
}

func TestParseMsgErrors(t *testing.T) {
	body := mustDoc(t, bson.D{{Key: "update", Value: "c"}, {Key: "$db", Value: "d"}})
	doc := mustDoc(t, bson.D{{Key: "q", Value: bson.D{}}})
	short := func(b []byte) []byte { return b[:len(b)-1] }
	lenMismatch := rawMsg(OpMsg, 0, false, false, bodySection(body))
	binary.LittleEndian.PutUint32(lenMismatch, uint32(len(lenMismatch)+1))
	deep := bson.D{{Key: "x", Value: 1}}
	for range MaxBSONDepth + 5 {
		deep = bson.D{{Key: "x", Value: deep}}
	}
	deepDoc := mustDoc(t, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: deep}})
	badNested := bytes.Clone(mustDoc(t, bson.D{{Key: "find", Value: "c"}, {Key: "f", Value: bson.D{{Key: "a", Value: int32(1)}}}}))
	badNested[bytes.Index(badNested, []byte("f\x00"))+2]++ // embedded length off by one
	unknownType := bytes.Clone(body)
	unknownType[4] = 0x20
	noNul := bytes.Clone(body)
	noNul[len(noNul)-1] = 1
	badString := bytes.Clone(body)
	badString[bytes.Index(badString, []byte("update\x00"))+7] = 0x7f
	arrBody := mustDoc(t, bson.D{{Key: "update", Value: "c"}, {Key: "a", Value: bson.A{bson.D{}}}, {Key: "s", Value: bson.D{{Key: "t", Value: 1}}}})

	tests := []struct {
		name string
		msg  []byte
		code int32
	}{
		{"ok body only", rawMsg(OpMsg, 0, false, false, bodySection(body)), 0},
		{"ok sequence before body", rawMsg(OpMsg, 0, false, false, seqSection("updates", doc), bodySection(body)), 0},
		{"ok empty sequence", rawMsg(OpMsg, 0, false, false, bodySection(body), seqSection("updates")), 0},
		{"ok optional flag bit", rawMsg(OpMsg, FlagExhaustAllowed|1<<31, false, false, bodySection(body)), 0},
		{"ok dotted identifier absent", rawMsg(OpMsg, 0, false, false, bodySection(arrBody), seqSection("s.u", doc)), 0},
		{"shorter than header", rawMsg(OpMsg, 0, false, false)[:10], mongoerr.ProtocolError},
		{"length mismatch", lenMismatch, mongoerr.ProtocolError},
		{"compressed", rawMsg(OpCompressed, 0, false, false, bodySection(body)), mongoerr.ProtocolError},
		{"query opcode", rawMsg(OpQuery, 0, false, false, bodySection(body)), mongoerr.ProtocolError},
		{"no flags", rawMsg(OpMsg, 0, false, false)[:16], mongoerr.ProtocolError},
		{"illegal flag bit 2", rawMsg(OpMsg, 1<<2, false, false, bodySection(body)), CodeIllegalOpMsgFlag},
		{"illegal flag bit 15", rawMsg(OpMsg, 1<<15, false, false, bodySection(body)), CodeIllegalOpMsgFlag},
		{"checksum flag too short", rawMsg(OpMsg, FlagChecksumPresent, false, false, []byte{0, 0, 0, 0}), 51252},
		{"no sections", rawMsg(OpMsg, 0, false, false), 40587},
		{"only a sequence", rawMsg(OpMsg, 0, false, false, seqSection("updates", doc)), 40587},
		{"two bodies", rawMsg(OpMsg, 0, false, false, bodySection(body), bodySection(body)), 40430},
		{"three sequences", rawMsg(OpMsg, 0, false, false, bodySection(body), seqSection("a"), seqSection("b"), seqSection("c")), CodeTooManyDocumentSequences},
		{"duplicate sequence", rawMsg(OpMsg, 0, false, false, bodySection(body), seqSection("a", doc), seqSection("a")), 40431},
		{"sequence duplicates body field", rawMsg(OpMsg, 0, false, false, bodySection(body), seqSection("update", doc)), 40433},
		{"dotted identifier in body", rawMsg(OpMsg, 0, false, false, bodySection(arrBody), seqSection("s.t", doc)), 40433},
		{"dotted identifier through array", rawMsg(OpMsg, 0, false, false, bodySection(arrBody), seqSection("a.0.z", doc)), 40433},
		{"unknown section kind", rawMsg(OpMsg, 0, false, false, bodySection(body), []byte{3}), 40432},
		{"security token", rawMsg(OpMsg, 0, false, false, append([]byte{2}, doc...), bodySection(body)), mongoerr.Unauthorized},
		{"body overruns message", rawMsg(OpMsg, 0, false, false, short(bodySection(body))), CodeInvalidBSON},
		{"body length below 5", rawMsg(OpMsg, 0, false, false, []byte{0, 4, 0, 0, 0}), CodeInvalidBSON},
		{"body length negative", rawMsg(OpMsg, 0, false, false, []byte{0, 0xff, 0xff, 0xff, 0xff, 0}), CodeInvalidBSON},
		{"body too few bytes for length", rawMsg(OpMsg, 0, false, false, []byte{0, 5, 0}), CodeInvalidBSON},
		{"body missing NUL", rawMsg(OpMsg, 0, false, false, bodySection(noNul)), CodeInvalidBSON},
		{"body unknown type", rawMsg(OpMsg, 0, false, false, bodySection(unknownType)), CodeInvalidBSON},
		{"body bad string length", rawMsg(OpMsg, 0, false, false, bodySection(badString)), CodeInvalidBSON},
		{"body bad nested length", rawMsg(OpMsg, 0, false, false, bodySection(badNested)), CodeInvalidBSON},
		{"body too deep", rawMsg(OpMsg, 0, false, false, bodySection(deepDoc)), CodeInvalidBSON},
		{"sequence size below 4", rawMsg(OpMsg, 0, false, false, bodySection(body), []byte{1, 3, 0, 0, 0}), mongoerr.ProtocolError},
		{"sequence size overruns", rawMsg(OpMsg, 0, false, false, bodySection(body), short(seqSection("a", doc))), mongoerr.ProtocolError},
		{"sequence size truncated", rawMsg(OpMsg, 0, false, false, bodySection(body), []byte{1, 9, 0}), mongoerr.ProtocolError},
		{"sequence identifier unterminated", rawMsg(OpMsg, 0, false, false, bodySection(body), []byte{1, 6, 0, 0, 0, 'a', 'b'}), mongoerr.ProtocolError},
		{"sequence doc overruns section", rawMsg(OpMsg, 0, false, false, bodySection(body), func() []byte {
			s := seqSection("a", doc)
			binary.LittleEndian.PutUint32(s[1:], uint32(len(s)-2))
			return append(s[:len(s)-1], 1)
		}()), CodeInvalidBSON},
		{"sequence garbage doc", rawMsg(OpMsg, 0, false, false, bodySection(body), seqSection("a", []byte{6, 0, 0, 0, 0x20, 0})), CodeInvalidBSON},
		{"checksum mismatch", rawMsg(OpMsg, FlagChecksumPresent, true, true, bodySection(body)), CodeChecksumMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMsg(tt.msg)
			wantCode(t, err, tt.code)
			if tt.code == mongoerr.ProtocolError && strings.Contains(tt.name, "compressed") && !strings.Contains(err.Error(), "OP_COMPRESSED") {
				t.Fatalf("compressed error does not say so: %v", err)
			}
			if err == nil && (len(m.Body) == 0 || CommandName(m.Body) != "update") {
				t.Fatalf("parsed body %v", m.Body)
			}
		})
	}
}

func TestIsConnectionFatal(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{io.EOF, false},
		{mongoerr.New(mongoerr.ProtocolError, "x"), true},
		{mongoerr.New(CodeIllegalOpMsgFlag, "x"), true},
		{mongoerr.New(CodeTooManyDocumentSequences, "x"), true},
		{mongoerr.New(CodeChecksumMismatch, "x"), true},
		{mongoerr.New(40430, "x"), false},
		{mongoerr.New(CodeInvalidBSON, "x"), false},
	}
	for _, tt := range tests {
		if got := IsConnectionFatal(tt.err); got != tt.want {
			t.Errorf("IsConnectionFatal(%v) = %v", tt.err, got)
		}
	}
}

func TestMergedBody(t *testing.T) {
	body := mustDoc(t, bson.D{{Key: "insert", Value: "c"}, {Key: "ordered", Value: false}})
	docs := []bson.Raw{mustDoc(t, bson.D{{Key: "_id", Value: int32(1)}}), mustDoc(t, bson.D{{Key: "_id", Value: "two"}})}
	m := Msg{Body: body, Sequences: []Sequence{{Identifier: "documents", Docs: docs}, {Identifier: "empty"}}}
	parsed, err := ParseMsg(m.Append(nil, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	got, err := bsonval.Decode(parsed.MergedBody())
	if err != nil {
		t.Fatal(err)
	}
	want := bson.D{
		{Key: "insert", Value: "c"}, {Key: "ordered", Value: false},
		{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: int32(1)}}, bson.D{{Key: "_id", Value: "two"}}}},
		{Key: "empty", Value: bson.A{}},
	}
	if bsonval.Compare(got, want) != 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("MergedBody = %v, want %v", got, want)
	}
	if err := parsed.MergedBody().Validate(); err != nil {
		t.Fatal(err)
	}
	if plain := (Msg{Body: body}); !bytes.Equal(plain.MergedBody(), body) {
		t.Fatal("MergedBody without sequences must be the body")
	}
	// Many documents: keys "0".."n-1" in order.
	many := Msg{Body: body, Sequences: []Sequence{{Identifier: "documents"}}}
	for i := range 1234 {
		many.Sequences[0].Docs = append(many.Sequences[0].Docs, mustDoc(t, bson.D{{Key: "i", Value: int32(i)}}))
	}
	arr := many.MergedBody().Lookup("documents").Array()
	vals, err := arr.Values()
	if err != nil || len(vals) != 1234 {
		t.Fatalf("merged %d docs, err %v", len(vals), err)
	}
	if e := bson.Raw(arr).Index(1000); e.Key() != "1000" || e.Value().Document().Lookup("i").Int32() != 1000 {
		t.Fatalf("element 1000 = %v", e)
	}
}

func TestCommandName(t *testing.T) {
	tests := []struct {
		in   []byte
		want string
	}{
		{mustDoc(t, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}}), "hello"},
		{mustDoc(t, bson.D{}), ""},
		{nil, ""},
		{[]byte{5, 0, 0}, ""},
		{[]byte{9, 0, 0, 0, 0x10, 'a', 'b', 'c', 'd'}, ""},      // unterminated key
		{[]byte{200, 0, 0, 0, 0x10, 'a', 0, 0, 0, 0, 0, 0}, ""}, // length overruns
		{[]byte{7, 0, 0, 0, 0x10, 'x', 0}, "x"},                 // key only, value cut: name still readable
	}
	for _, tt := range tests {
		if got := CommandName(tt.in); got != tt.want {
			t.Errorf("CommandName(%x) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func appendQuery(dst []byte, ns string, docs ...[]byte) []byte {
	start, dst := appendHeader(dst, 3, 0, OpQuery)
	dst = appendInt32(dst, 4) // secondaryOk
	dst = append(dst, ns...)
	dst = append(dst, 0)
	dst = appendInt32(dst, 0)
	dst = appendInt32(dst, -1)
	for _, d := range docs {
		dst = append(dst, d...)
	}
	return finishMessage(dst, start)
}

func TestParseQuery(t *testing.T) {
	hello := mustDoc(t, bson.D{{Key: "isMaster", Value: int32(1)}, {Key: "helloOk", Value: true}})
	wrapped := mustDoc(t, bson.D{{Key: "$query", Value: bson.D{{Key: "isMaster", Value: int32(1)}}}, {Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "primary"}}}})
	fields := mustDoc(t, bson.D{{Key: "a", Value: int32(1)}})

	q, err := ParseQuery(appendQuery(nil, "admin.$cmd", hello))
	if err != nil {
		t.Fatal(err)
	}
	if q.Flags != 4 || q.FullCollectionName != "admin.$cmd" || q.NumberToSkip != 0 || q.NumberToReturn != -1 ||
		!bytes.Equal(q.Query, hello) || q.ReturnFieldsSelector != nil || CommandName(q.Command()) != "isMaster" {
		t.Fatalf("parsed %+v", q)
	}
	q, err = ParseQuery(appendQuery(nil, "admin.$cmd", wrapped, fields))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(q.ReturnFieldsSelector, fields) || CommandName(q.Command()) != "isMaster" || CommandName(q.Query) != "$query" {
		t.Fatalf("parsed %+v", q)
	}

	good := appendQuery(nil, "admin.$cmd", hello)
	nsEnd := bytes.IndexByte(good[HeaderSize+4:], 0) + HeaderSize + 4
	tests := []struct {
		name string
		msg  []byte
		code int32
	}{
		{"wrong opcode", AppendMsg(nil, 1, 0, 0, hello), mongoerr.ProtocolError},
		{"compressed", func() []byte {
			b := bytes.Clone(good)
			binary.LittleEndian.PutUint32(b[12:], uint32(OpCompressed))
			return b
		}(), mongoerr.ProtocolError},
		{"no flags", appendQuery(nil, "")[:HeaderSize+2], mongoerr.ProtocolError},
		{"unterminated ns", func() []byte {
			b := bytes.Clone(good[:nsEnd])
			binary.LittleEndian.PutUint32(b, uint32(len(b)))
			return b
		}(), mongoerr.ProtocolError},
		{"no skip/return", func() []byte {
			b := bytes.Clone(good[:nsEnd+5])
			binary.LittleEndian.PutUint32(b, uint32(len(b)))
			return b
		}(), mongoerr.ProtocolError},
		{"no query", appendQuery(nil, "a.$cmd"), CodeInvalidBSON},
		{"bad query", appendQuery(nil, "a.$cmd", hello[:len(hello)-1]), CodeInvalidBSON},
		{"bad selector", appendQuery(nil, "a.$cmd", hello, []byte{5, 0, 0, 0, 1}), CodeInvalidBSON},
		{"trailing bytes", appendQuery(nil, "a.$cmd", hello, fields, []byte{0}), mongoerr.ProtocolError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseQuery(tt.msg)
			wantCode(t, err, tt.code)
		})
	}
}

func TestReply(t *testing.T) {
	a := mustDoc(t, bson.D{{Key: "ok", Value: 1.0}, {Key: "ismaster", Value: true}})
	b := mustDoc(t, bson.D{{Key: "x", Value: "y"}})
	raw := AppendReply(nil, 9, 3, 8, a, b)
	h, _ := ParseHeader(raw)
	if h != (Header{Length: int32(len(raw)), RequestID: 9, ResponseTo: 3, OpCode: OpReply}) {
		t.Fatalf("header %+v", h)
	}
	r, err := ParseReply(raw)
	if err != nil {
		t.Fatal(err)
	}
	if r.ResponseFlags != 8 || r.CursorID != 0 || r.StartingFrom != 0 || r.NumberReturned != 2 || len(r.Docs) != 2 ||
		!bytes.Equal(r.Docs[0], a) || !bytes.Equal(r.Docs[1], b) {
		t.Fatalf("parsed %+v", r)
	}
	tests := []struct {
		name string
		msg  []byte
	}{
		{"count mismatch", func() []byte { m := bytes.Clone(raw); m[HeaderSize+16] = 3; return m }()},
		{"short", func() []byte {
			m := bytes.Clone(raw[:HeaderSize+10])
			binary.LittleEndian.PutUint32(m, uint32(len(m)))
			return m
		}()},
		{"bad doc", func() []byte {
			m := bytes.Clone(raw[:len(raw)-1])
			binary.LittleEndian.PutUint32(m, uint32(len(m)))
			return m
		}()},
		{"wrong opcode", AppendMsg(nil, 1, 0, 0, a)},
	}
	for _, tt := range tests {
		if _, err := ParseReply(tt.msg); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
}

func randValue(r *rand.Rand, depth int) any {
	k := r.IntN(16)
	if depth > 3 && k >= 13 {
		k = 0
	}
	switch k {
	case 0:
		return int32(r.Int32())
	case 1:
		return r.Int64()
	case 2:
		return r.Float64()
	case 3:
		return strings.Repeat("s", r.IntN(5))
	case 4:
		return r.IntN(2) == 0
	case 5:
		return nil
	case 6:
		return bson.NewObjectIDFromTimestamp(bson.NewObjectID().Timestamp())
	case 7:
		return bson.DateTime(r.Int64())
	case 8:
		return bson.Binary{Subtype: byte(r.IntN(5)), Data: []byte("bin")}
	case 9:
		return bson.Regex{Pattern: "a.*", Options: "i"}
	case 10:
		return bson.Timestamp{T: r.Uint32(), I: r.Uint32()}
	case 11:
		return bson.CodeWithScope{Code: "f()", Scope: bson.D{{Key: "v", Value: int32(1)}}}
	case 12:
		return bson.MinKey{}
	case 13, 14:
		d := bson.D{}
		for i := range r.IntN(4) {
			d = append(d, bson.E{Key: string(rune('a' + i)), Value: randValue(r, depth+1)})
		}
		return d
	default:
		a := bson.A{}
		for range r.IntN(4) {
			a = append(a, randValue(r, depth+1))
		}
		return a
	}
}

// TestValidatorCrossCheck: every document the driver encodes is accepted, and every mutated
// document the validator accepts is decodable by both bsonval and the driver (the validator is
// never looser than the decoders the server uses after it).
func TestValidatorCrossCheck(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	accepted := 0
	for i := range 3000 {
		d := bson.D{}
		for j := range 1 + r.IntN(5) {
			d = append(d, bson.E{Key: string(rune('k' + j)), Value: randValue(r, 0)})
		}
		doc := mustDoc(t, d)
		if reason := validateDoc(doc, 0); reason != "" {
			t.Fatalf("%d: valid document %v rejected: %s", i, d, reason)
		}
		mut := bytes.Clone(doc)
		for range 1 + r.IntN(3) {
			mut[4+r.IntN(len(mut)-4)] = byte(r.IntN(256))
		}
		if _, _, err := readDocument(mut, "doc"); err != nil {
			continue
		}
		accepted++
		if _, err := bsonval.Decode(mut); err != nil {
			t.Fatalf("%d: validator accepted %x but bsonval.Decode fails: %v", i, mut, err)
		}
		var back bson.D
		if err := bson.Unmarshal(mut, &back); err != nil && !strings.Contains(err.Error(), "UTF-8") {
			t.Fatalf("%d: validator accepted %x but bson.Unmarshal fails: %v", i, mut, err)
		}
	}
	if accepted == 0 {
		t.Fatal("no mutated document was accepted: the cross-check checked nothing")
	}
}
