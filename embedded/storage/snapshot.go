package storage

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/google/btree"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.uber.org/zap"
)

// Snapshot record kinds (the first payload byte).
const (
	snapHeader = 'H'
	snapColl   = 'C'
	snapDocs   = 'D'
	snapOplog  = 'O'
	snapEnd    = 'E'

	snapBatch = 1 << 20
)

// snapView is a consistent image of the engine, captured under the exclusive lock and
// written outside it (documents are immutable and the trees are lazy copy-on-write clones).
type snapView struct {
	seq   uint64
	ts    OpTime
	colls []snapCollView
	oplog oplogView
}

type snapCollView struct {
	db, name string
	uuid     bson.Binary
	specs    []IndexSpec // without _id_
	opts     CollOptions
	docs     *btree.BTreeG[entry]
}

func (e *Engine) captureLocked(seq uint64) *snapView {
	v := &snapView{seq: seq, ts: e.lastTS, oplog: e.oplog.view()}
	for _, db := range sortedKeys(e.st.dbs) {
		for _, c := range e.st.sortedColls(db) {
			cv := snapCollView{db: c.db, name: c.name, uuid: c.uuid, opts: c.opts, docs: c.indexes[0].tree.Clone()}
			for _, ix := range c.indexes[1:] {
				cv.specs = append(cv.specs, ix.spec)
			}
			v.colls = append(v.colls, cv)
		}
	}
	return v
}

func sortedKeys(m map[string]*database) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// snapWriter writes framed records through a buffer.
type snapWriter struct {
	w   *bufio.Writer
	buf []byte
	err error
}

func (s *snapWriter) record(payload []byte) {
	if s.err != nil {
		return
	}
	var hdr [recordHeader]byte
	binary.LittleEndian.PutUint32(hdr[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(hdr[4:], crc32.Checksum(payload, castagnoli))
	if _, err := s.w.Write(hdr[:]); err != nil {
		s.err = err
		return
	}
	if _, err := s.w.Write(payload); err != nil {
		s.err = err
	}
}

// flushBatch writes the pending batch (kind byte + concatenated documents) if it has content.
func (s *snapWriter) flushBatch() {
	if len(s.buf) > 1 {
		s.record(s.buf)
	}
	s.buf = s.buf[:0]
}

func (v *snapView) write(dir string, sync bool) error {
	path := filepath.Join(dir, snapName(v.seq))
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create snapshot: %w", err)
	}
	defer func() {
		if f != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	sw := &snapWriter{w: bufio.NewWriterSize(f, snapBatch)}
	hdr, _ := bsonval.Encode(bson.D{
		{Key: "v", Value: int32(1)}, {Key: "ts", Value: v.ts}, {Key: "seq", Value: int64(v.seq)},
	})
	sw.record(append([]byte{snapHeader}, hdr...))
	ndocs := 0
	for _, c := range v.colls {
		specs := bson.A{}
		for _, s := range c.specs {
			specs = append(specs, specDoc(s))
		}
		meta, err := bsonval.Encode(bson.D{
			{Key: "db", Value: c.db}, {Key: "c", Value: c.name}, {Key: "uuid", Value: c.uuid}, {Key: "ix", Value: specs},
			{Key: "opts", Value: optionsDoc(c.opts)},
		})
		if err != nil {
			return fmt.Errorf("encode snapshot: %w", err)
		}
		sw.record(append([]byte{snapColl}, meta...))
		sw.buf = append(sw.buf[:0], snapDocs)
		c.docs.Ascend(func(e entry) bool {
			if len(sw.buf)+len(e.doc.Raw) > snapBatch {
				sw.flushBatch()
				sw.buf = append(sw.buf, snapDocs)
			}
			sw.buf = append(sw.buf, e.doc.Raw...)
			ndocs++
			return sw.err == nil
		})
		sw.flushBatch()
	}
	sw.buf = append(sw.buf[:0], snapOplog)
	for i := 0; i < v.oplog.len(); i++ {
		raw := v.oplog.raw(i)
		if len(sw.buf)+len(raw) > snapBatch {
			sw.flushBatch()
			sw.buf = append(sw.buf, snapOplog)
		}
		sw.buf = append(sw.buf, raw...)
	}
	sw.flushBatch()
	sw.record([]byte{snapEnd})
	if sw.err == nil {
		sw.err = sw.w.Flush()
	}
	if sw.err != nil {
		return fmt.Errorf("write snapshot: %w", sw.err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync snapshot: %w", err)
		}
	}
	if err := f.Close(); err != nil {
		f = nil
		_ = os.Remove(tmp)
		return fmt.Errorf("close snapshot: %w", err)
	}
	f = nil
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("rename snapshot: %w", err)
	}
	if sync {
		return syncDir(dir)
	}
	return nil
}

var errSnapshotTruncated = errors.New("snapshot has no end record")

// loadSnapshot loads a snapshot into the (empty) state and oplog.
func (e *Engine) loadSnapshot(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open snapshot: %w", err)
	}
	defer func() { _ = f.Close() }()
	r := bufio.NewReaderSize(f, snapBatch)
	var c *collection
	sawHeader, sawEnd := false, false
	var hdr [recordHeader]byte
	var payload []byte
	for !sawEnd {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return errSnapshotTruncated
			}
			return fmt.Errorf("read snapshot: %w", err)
		}
		size := binary.LittleEndian.Uint32(hdr[:])
		if size == 0 || size > maxRecord {
			return fmt.Errorf("bad snapshot record length %d", size)
		}
		if cap(payload) < int(size) {
			payload = make([]byte, size)
		}
		payload = payload[:size]
		if _, err := io.ReadFull(r, payload); err != nil {
			return errSnapshotTruncated
		}
		if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
			return fmt.Errorf("snapshot record checksum mismatch")
		}
		kind, body := payload[0], payload[1:]
		if !sawHeader && kind != snapHeader {
			return fmt.Errorf("snapshot has no header")
		}
		switch kind {
		case snapHeader:
			d, err := bsonval.Decode(body)
			if err != nil {
				return err
			}
			ts, _ := bsonval.Get(d, "ts")
			e.lastTS, _ = ts.(bson.Timestamp)
			sawHeader = true
		case snapColl:
			if c, err = e.loadCollMeta(body); err != nil {
				return err
			}
		case snapDocs:
			if c == nil {
				return fmt.Errorf("documents before a collection")
			}
			if err := forEachDoc(body, func(raw []byte) error {
				d, dec, err := docFromRaw(bytes.Clone(raw))
				if err != nil {
					return err
				}
				return c.insert(d, dec, nil)
			}); err != nil {
				return err
			}
		case snapOplog:
			if err := forEachDoc(body, func(raw []byte) error {
				ts, wall, err := entryTimes(raw)
				if err != nil {
					return err
				}
				e.oplog.append(raw, ts, wall, e.now())
				return nil
			}); err != nil {
				return err
			}
		case snapEnd:
			sawEnd = true
		default:
			return fmt.Errorf("unknown snapshot record kind %q", kind)
		}
	}
	return nil
}

func (e *Engine) loadCollMeta(body []byte) (*collection, error) {
	d, err := bsonval.Decode(body)
	if err != nil {
		return nil, err
	}
	get := func(k string) any { v, _ := bsonval.Get(d, k); return v }
	db, _ := get("db").(string)
	name, _ := get("c").(string)
	uuid, _ := get("uuid").(bson.Binary)
	if db == "" || name == "" || e.st.coll(db, name) != nil {
		return nil, fmt.Errorf("bad snapshot collection %q.%q", db, name)
	}
	c := e.st.createColl(db, name, uuid)
	if opts, ok := get("opts").(bson.D); ok {
		c.opts = optionsFromDoc(opts)
	}
	specs, _ := get("ix").(bson.A)
	for _, s := range specs {
		sd, _ := s.(bson.D)
		spec := specFromDoc(sd)
		if err := validateIndexSpec(spec); err != nil {
			return nil, fmt.Errorf("bad snapshot index: %w", err)
		}
		c.setIndexes(append(c.indexes, newIndex(*spec)))
	}
	return c, nil
}

// forEachDoc calls fn for each BSON document of a concatenation.
func forEachDoc(b []byte, fn func(raw []byte) error) error {
	for len(b) > 0 {
		n, _, ok := bsoncore.ReadLength(b)
		if !ok || n < 5 || int(n) > len(b) {
			return fmt.Errorf("bad document length")
		}
		if err := fn(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// maybeCompact starts a background compaction when the log has grown past the threshold.
func (e *Engine) maybeCompact() {
	e.cmu.Lock()
	defer e.cmu.Unlock()
	if e.closing || e.wal == nil || e.wal.size.Load() < e.opts.CompactAfterBytes || !e.compacting.CompareAndSwap(false, true) {
		return
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		defer e.compacting.Store(false)
		// Writes made while the snapshot was written may already call for another one.
		for e.needCompaction() {
			if err := e.compactNow(); err != nil {
				if !errors.Is(err, ErrClosed) {
					e.logger.Error("storage: compaction failed", zap.Error(err))
				}
				return
			}
		}
	}()
}

func (e *Engine) needCompaction() bool {
	e.cmu.Lock()
	defer e.cmu.Unlock()
	return !e.closing && e.wal != nil && e.wal.size.Load() >= e.opts.CompactAfterBytes
}

// Compact writes a snapshot of the current state, starts a new log and deletes the logs and
// snapshots the new snapshot makes obsolete. It runs automatically when the log exceeds
// Options.CompactAfterBytes; it is a no-op in memory.
func (e *Engine) Compact() error {
	if e.opts.Dir == "" {
		return nil
	}
	return e.compactNow()
}

func (e *Engine) compactNow() error {
	start := e.now()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	// Everything logged so far goes to the old log; new writes go to the new one.
	if err := e.waitDurable(e.lastTS); err != nil {
		e.mu.Unlock()
		return err
	}
	e.cmu.Lock()
	old := e.wal
	e.cmu.Unlock()
	nw, err := openLog(e.opts.Dir, old.seq+1, !e.opts.NoSync)
	if err != nil {
		e.mu.Unlock()
		return err
	}
	e.cmu.Lock()
	e.wal = nw
	e.cmu.Unlock()
	view := e.captureLocked(nw.seq)
	e.mu.Unlock()

	if err := old.close(); err != nil {
		e.logger.Warn("storage: closing old log", zap.Error(err))
	}
	if err := view.write(e.opts.Dir, !e.opts.NoSync); err != nil {
		return err
	}
	// The snapshot is durable: older logs and snapshots are obsolete.
	removeObsolete(e.opts.Dir, nw.seq)
	e.logger.Info("storage: compacted", zap.Uint64("log", nw.seq), zap.Duration("took", time.Since(start)))
	return nil
}

// removeObsolete deletes the logs and snapshots older than seq.
func removeObsolete(dir string, seq uint64) {
	names, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range names {
		n := de.Name()
		if s, ok := parseSeq(n, logPrefix, logSuffix); ok && s < seq {
			_ = os.Remove(filepath.Join(dir, n))
		}
		if s, ok := parseSeq(n, snapPrefix, snapSuffix); ok && s < seq {
			_ = os.Remove(filepath.Join(dir, n))
		}
	}
}
