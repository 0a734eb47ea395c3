package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"sync/atomic"
	"time"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Records (log and snapshot): [uint32 payload length][uint32 CRC-32C of payload][payload].
const (
	recordHeader = 8
	// maxRecord bounds a record's payload; larger lengths are treated as corruption.
	maxRecord = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// beginRecord reserves a record header at the end of dst.
func beginRecord(dst []byte) []byte {
	return append(dst, make([]byte, recordHeader)...)
}

// finishRecord fills the header of the record that starts at the beginning of rec.
func finishRecord(rec []byte) []byte {
	payload := rec[recordHeader:]
	binary.LittleEndian.PutUint32(rec[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(rec[4:], crc32.Checksum(payload, castagnoli))
	return rec
}

// readRecord parses the record at the start of b. ok is false when b holds no complete,
// intact record (a torn or corrupt tail).
func readRecord(b []byte) (payload []byte, n int, ok bool) {
	if len(b) < recordHeader {
		return nil, 0, false
	}
	size := binary.LittleEndian.Uint32(b)
	if size > maxRecord || uint64(len(b)-recordHeader) < uint64(size) {
		return nil, 0, false
	}
	payload = b[recordHeader : recordHeader+int(size)]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, false
	}
	return payload, recordHeader + int(size), true
}

// appendEntry appends an oplog entry's BSON encoding (its form in the log, the snapshot and
// the in-memory oplog) to dst.
func appendEntry(dst []byte, ent *Entry) []byte {
	idx, dst := bsoncore.ReserveLength(dst)
	dst = bsoncore.AppendTimestampElement(dst, "ts", ent.TS.T, ent.TS.I)
	dst = bsoncore.AppendDateTimeElement(dst, "w", ent.Wall.UnixMilli())
	dst = bsoncore.AppendStringElement(dst, "op", ent.Op)
	dst = bsoncore.AppendStringElement(dst, "db", ent.DB)
	if ent.Coll != "" {
		dst = bsoncore.AppendStringElement(dst, "c", ent.Coll)
	}
	if ent.UUID.Data != nil {
		dst = bsoncore.AppendBinaryElement(dst, "uuid", ent.UUID.Subtype, ent.UUID.Data)
	}
	if ent.raw != nil {
		dst = bsoncore.AppendDocumentElement(dst, "d", ent.raw)
	} else if ent.DocKey != nil {
		dst = appendDocElement(dst, "k", ent.DocKey)
	}
	if ent.Update != nil {
		dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, "u")
		uidx, d2 := bsoncore.ReserveLength(dst)
		dst = appendDocElement(d2, "uf", ent.Update.UpdatedFields)
		aidx, d3 := bsoncore.AppendArrayElementStart(dst, "rf")
		for i, f := range ent.Update.RemovedFields {
			d3 = bsoncore.AppendStringElement(d3, fmt.Sprint(i), f)
		}
		dst, _ = bsoncore.AppendArrayEnd(d3, aidx)
		if len(ent.Update.TruncatedArrays) > 0 {
			tidx, d4 := bsoncore.AppendArrayElementStart(dst, "ta")
			for i, ta := range ent.Update.TruncatedArrays {
				d4 = bsoncore.AppendDocumentElement(d4, fmt.Sprint(i), bsoncore.NewDocumentBuilder().
					AppendString("f", ta.Field).AppendInt32("n", ta.NewSize).Build())
			}
			dst, _ = bsoncore.AppendArrayEnd(d4, tidx)
		}
		if len(ent.Update.DottedPaths) > 0 {
			dst = appendDocElement(dst, "dp", ent.Update.DottedPaths)
		}
		dst = append(dst, 0)
		dst = bsoncore.UpdateLength(dst, uidx, int32(len(dst)-int(uidx)))
	}
	if ent.Index != nil {
		dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, "ix")
		iidx, d2 := bsoncore.ReserveLength(dst)
		d2 = bsoncore.AppendStringElement(d2, "name", ent.Index.Name)
		d2 = appendDocElement(d2, "key", ent.Index.Key)
		d2 = bsoncore.AppendBooleanElement(d2, "unique", ent.Index.Unique)
		if ent.Index.TTL {
			d2 = bsoncore.AppendInt64Element(d2, "expireAfterSeconds", ent.Index.ExpireAfterSeconds)
		}
		if ent.Index.Background {
			d2 = bsoncore.AppendBooleanElement(d2, "background", true)
		}
		dst = d2
		dst = append(dst, 0)
		dst = bsoncore.UpdateLength(dst, iidx, int32(len(dst)-int(iidx)))
	}
	dst = appendCatalogFields(dst, ent)
	dst = append(dst, 0)
	return bsoncore.UpdateLength(dst, idx, int32(len(dst)-int(idx)))
}

// Offsets in an encoded entry of its first two fields, which appendEntry always writes
// first: "ts" (a timestamp, increment then seconds) and "w" (a date, unix milliseconds).
const (
	entryTSOffset   = 4 + 1 + len("ts") + 1
	entryWallOffset = entryTSOffset + 8 + 1 + len("w") + 1
)

// patchEntryTimes writes ts and wall into an entry appendEntry encoded (with any times):
// the entry is then the one appendEntry encodes with them.
func patchEntryTimes(enc []byte, ts OpTime, wall time.Time) {
	binary.LittleEndian.PutUint32(enc[entryTSOffset:], ts.I)
	binary.LittleEndian.PutUint32(enc[entryTSOffset+4:], ts.T)
	binary.LittleEndian.PutUint64(enc[entryWallOffset:], uint64(wall.UnixMilli()))
}

// appendDocElement appends a document element. Values come from stored (already encoded)
// documents or index specs, so encoding cannot fail; if it ever did, an empty document is
// written rather than a corrupt record.
func appendDocElement(dst []byte, key string, d bson.D) []byte {
	start := len(dst)
	dst = bsoncore.AppendHeader(dst, bsoncore.TypeEmbeddedDocument, key)
	out, err := bsonval.AppendDocument(dst, d)
	if err != nil {
		return bsoncore.AppendDocumentElement(dst[:start], key, []byte{5, 0, 0, 0, 0})
	}
	return out
}

// decodeEntry parses one entry in log form.
func decodeEntry(raw []byte) (Entry, error) {
	var ent Entry
	doc := bsoncore.Document(raw)
	if err := doc.Validate(); err != nil {
		return ent, fmt.Errorf("decode entry: %w", err)
	}
	elems, _ := doc.Elements()
	for _, el := range elems {
		v := el.Value()
		var ok bool
		switch el.Key() {
		case "ts":
			var t, i uint32
			t, i, ok = v.TimestampOK()
			ent.TS = OpTime{T: t, I: i}
		case "w":
			var ms int64
			ms, ok = v.DateTimeOK()
			ent.Wall = time.UnixMilli(ms)
		case "op":
			ent.Op, ok = v.StringValueOK()
		case "db":
			ent.DB, ok = v.StringValueOK()
		case "c":
			ent.Coll, ok = v.StringValueOK()
		case "uuid":
			var st byte
			var data []byte
			st, data, ok = v.BinaryOK()
			ent.UUID = bson.Binary{Subtype: st, Data: append([]byte(nil), data...)}
		case "d":
			var d bsoncore.Document
			d, ok = v.DocumentOK()
			ent.raw = bson.Raw(d)
		case "k":
			var d bsoncore.Document
			if d, ok = v.DocumentOK(); ok {
				ent.DocKey, _ = bsonval.Decode(d)
			}
		case "u":
			var d bsoncore.Document
			if d, ok = v.DocumentOK(); ok {
				ent.Update = decodeUpdateDesc(d)
			}
		case "ix":
			var d bsoncore.Document
			if d, ok = v.DocumentOK(); ok {
				ent.Index = decodeIndexSpec(d)
			}
		default:
			ok = decodeCatalogField(&ent, el.Key(), v)
		}
		if !ok {
			return ent, mongoerr.New(mongoerr.InternalError, "log entry field %q has type %s", el.Key(), v.Type)
		}
	}
	if ent.Op == "" || ent.DB == "" {
		return ent, mongoerr.New(mongoerr.InternalError, "log entry without op or db")
	}
	return ent, nil
}

func decodeUpdateDesc(raw []byte) *UpdateDesc {
	d, _ := bsonval.Decode(raw)
	u := &UpdateDesc{RemovedFields: []string{}}
	if uf, ok := bsonval.Get(d, "uf"); ok {
		u.UpdatedFields, _ = uf.(bson.D)
	}
	if rf, ok := bsonval.Get(d, "rf"); ok {
		a, _ := rf.(bson.A)
		for _, f := range a {
			if s, ok := f.(string); ok {
				u.RemovedFields = append(u.RemovedFields, s)
			}
		}
	}
	if ta, ok := bsonval.Get(d, "ta"); ok {
		a, _ := ta.(bson.A)
		for _, v := range a {
			td, _ := v.(bson.D)
			f, _ := bsonval.Get(td, "f")
			n, _ := bsonval.Get(td, "n")
			fs, _ := f.(string)
			ni, _ := n.(int32)
			u.TruncatedArrays = append(u.TruncatedArrays, TruncatedArray{Field: fs, NewSize: ni})
		}
	}
	if dp, ok := bsonval.Get(d, "dp"); ok {
		u.DottedPaths, _ = dp.(bson.D)
	}
	return u
}

func decodeIndexSpec(raw []byte) *IndexSpec {
	d, _ := bsonval.Decode(raw)
	return specFromDoc(d)
}

func specFromDoc(d bson.D) *IndexSpec {
	spec := &IndexSpec{}
	n, _ := bsonval.Get(d, "name")
	spec.Name, _ = n.(string)
	k, _ := bsonval.Get(d, "key")
	spec.Key, _ = k.(bson.D)
	u, _ := bsonval.Get(d, "unique")
	spec.Unique, _ = u.(bool)
	if x, ok := bsonval.Get(d, "expireAfterSeconds"); ok {
		spec.TTL = true
		spec.ExpireAfterSeconds, _ = x.(int64)
	}
	b, _ := bsonval.Get(d, "background")
	spec.Background, _ = b.(bool)
	return spec
}

// specDoc is an index spec in the form specFromDoc reads (snapshots).
func specDoc(s IndexSpec) bson.D {
	d := bson.D{{Key: "name", Value: s.Name}, {Key: "key", Value: s.Key}, {Key: "unique", Value: s.Unique}}
	if s.TTL {
		d = append(d, bson.E{Key: "expireAfterSeconds", Value: s.ExpireAfterSeconds})
	}
	if s.Background {
		d = append(d, bson.E{Key: "background", Value: true})
	}
	return d
}

// walFile is an open log file; it is only written by the commit leader.
type walFile struct {
	f    *os.File
	seq  uint64
	size atomic.Int64
}

func (w *walFile) write(buf []byte, sync bool) error {
	n, err := w.f.Write(buf)
	w.size.Add(int64(n))
	if err != nil {
		return err
	}
	if sync {
		return w.f.Sync()
	}
	return nil
}

func (w *walFile) close() error {
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("close log: %w", err)
	}
	return nil
}
