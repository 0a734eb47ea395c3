package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

const (
	logPrefix  = "log-"
	logSuffix  = ".wal"
	snapPrefix = "snap-"
	snapSuffix = ".snap"
	tmpSuffix  = ".tmp"
)

func logName(seq uint64) string  { return fmt.Sprintf("%s%016d%s", logPrefix, seq, logSuffix) }
func snapName(seq uint64) string { return fmt.Sprintf("%s%016d%s", snapPrefix, seq, snapSuffix) }

func parseSeq(name, prefix, suffix string) (uint64, bool) {
	if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	n, err := strconv.ParseUint(name[len(prefix):len(name)-len(suffix)], 10, 64)
	return n, err == nil
}

// recover loads the newest snapshot, replays the logs after it and opens the last log for
// appending.
func (e *Engine) recover() error {
	dir := e.opts.Dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			lock.release()
		}
	}()
	names, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read data directory: %w", err)
	}
	var snaps, logs []uint64
	for _, de := range names {
		n := de.Name()
		if strings.HasSuffix(n, tmpSuffix) {
			_ = os.Remove(filepath.Join(dir, n))
			continue
		}
		if s, ok := parseSeq(n, snapPrefix, snapSuffix); ok {
			snaps = append(snaps, s)
		}
		if s, ok := parseSeq(n, logPrefix, logSuffix); ok {
			logs = append(logs, s)
		}
	}
	slices.Sort(snaps)
	slices.Sort(logs)
	first := uint64(1)
	if len(snaps) > 0 {
		first = snaps[len(snaps)-1]
		if err := e.loadSnapshot(filepath.Join(dir, snapName(first))); err != nil {
			return fmt.Errorf("load snapshot %s: %w", snapName(first), err)
		}
		for _, s := range snaps[:len(snaps)-1] {
			_ = os.Remove(filepath.Join(dir, snapName(s)))
		}
	}
	var replay []uint64
	for _, s := range logs {
		if s < first {
			_ = os.Remove(filepath.Join(dir, logName(s)))
			continue
		}
		replay = append(replay, s)
	}
	for i, s := range replay {
		if s != first+uint64(i) {
			return fmt.Errorf("missing log %s (found %s)", logName(first+uint64(i)), logName(s))
		}
		if err := e.replayLog(filepath.Join(dir, logName(s)), i == len(replay)-1); err != nil {
			return err
		}
	}
	seq := first
	if len(replay) > 0 {
		seq = replay[len(replay)-1]
	}
	w, err := openLog(dir, seq, !e.opts.NoSync)
	if err != nil {
		return err
	}
	e.wal = w
	e.lock = lock
	ok = true
	return nil
}

func openLog(dir string, seq uint64, sync bool) (*walFile, error) {
	path := filepath.Join(dir, logName(seq))
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("stat log: %w", err)
	}
	if os.IsNotExist(statErr) && sync {
		if err := syncDir(dir); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	w := &walFile{f: f, seq: seq}
	w.size.Store(st.Size())
	return w, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory: %w", err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}

// replayLog applies every intact record of a log. A torn or corrupt tail of the last log is
// truncated (with a warning); in an earlier log it is an error.
func (e *Engine) replayLog(path string, last bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	off := 0
	for off < len(b) {
		payload, n, ok := readRecord(b[off:])
		if !ok {
			break
		}
		if err := e.applyRecord(payload); err != nil {
			return fmt.Errorf("replay %s at offset %d: %w", filepath.Base(path), off, err)
		}
		off += n
	}
	if off == len(b) {
		return nil
	}
	if !last {
		return fmt.Errorf("log %s is corrupt at offset %d of %d", filepath.Base(path), off, len(b))
	}
	e.logger.Warn("storage: truncating torn log tail",
		zap.String("log", filepath.Base(path)), zap.Int("offset", off), zap.Int("droppedBytes", len(b)-off))
	if err := os.Truncate(path, int64(off)); err != nil {
		return fmt.Errorf("truncate log: %w", err)
	}
	if !e.opts.NoSync {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("open log: %w", err)
		}
		err = f.Sync()
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("sync log: %w", err)
		}
	}
	return nil
}

// applyRecord applies one log record: a sequence of entries.
func (e *Engine) applyRecord(payload []byte) error {
	for len(payload) > 0 {
		if len(payload) < 5 {
			return fmt.Errorf("short entry")
		}
		n := int(binary.LittleEndian.Uint32(payload))
		if n < 5 || n > len(payload) {
			return fmt.Errorf("bad entry length %d", n)
		}
		ent, err := decodeEntry(payload[:n])
		if err != nil {
			return err
		}
		if err := e.applyEntry(ent, payload[:n]); err != nil {
			return fmt.Errorf("apply %s %s.%s: %w", ent.Op, ent.DB, ent.Coll, err)
		}
		payload = payload[n:]
	}
	return nil
}

// applyEntry re-applies a logged mutation to the state and appends it to the oplog.
func (e *Engine) applyEntry(ent Entry, enc []byte) error {
	if !tsLess(e.lastTS, ent.TS) {
		return fmt.Errorf("OpTime %v not after %v", ent.TS, e.lastTS)
	}
	st := e.st
	c := st.coll(ent.DB, ent.Coll)
	needColl := func() error {
		if c == nil {
			return fmt.Errorf("no collection")
		}
		ent.UUID = c.uuid
		return nil
	}
	switch ent.Op {
	case OpCreate:
		if c != nil {
			return fmt.Errorf("collection exists")
		}
		c = st.createColl(ent.DB, ent.Coll, ent.UUID)
		if ent.Options != nil {
			c.opts = ent.Options.New
		}
	case OpDrop:
		if err := needColl(); err != nil {
			return err
		}
		st.dropColl(ent.DB, ent.Coll)
	case OpDropDatabase:
		delete(st.dbs, ent.DB)
	case OpCreateIndexes:
		if err := needColl(); err != nil {
			return err
		}
		if ent.Index == nil {
			return fmt.Errorf("no index spec")
		}
		spec := *ent.Index
		if err := validateIndexSpec(&spec); err != nil || spec.Name != ent.Index.Name {
			return fmt.Errorf("bad index spec: %w", err)
		}
		if _, ix := c.index(spec.Name); ix != nil {
			return fmt.Errorf("index %q exists", spec.Name)
		}
		ix := newIndex(spec)
		if err := c.buildIndex(ix); err != nil {
			return err
		}
		c.setIndexes(append(c.indexes, ix))
	case OpDropIndexes:
		if err := needColl(); err != nil {
			return err
		}
		if ent.Index == nil {
			return fmt.Errorf("no index spec")
		}
		i, ix := c.index(ent.Index.Name)
		if ix == nil || i == 0 {
			return fmt.Errorf("no index %q", ent.Index.Name)
		}
		c.setIndexes(slices.Delete(slices.Clone(c.indexes), i, i+1))
	case OpRename:
		if err := needColl(); err != nil {
			return err
		}
		if ent.Rename == nil {
			return fmt.Errorf("rename without a target")
		}
		st.rename(c, ent.Rename.To)
	case OpCollMod:
		if err := needColl(); err != nil {
			return err
		}
		if ent.Index != nil {
			_, ix := c.index(ent.Index.Name)
			if ix == nil {
				return fmt.Errorf("no index %q", ent.Index.Name)
			}
			ix.spec.TTL, ix.spec.ExpireAfterSeconds = ent.Index.TTL, ent.Index.ExpireAfterSeconds
		}
		if ent.Options != nil {
			c.opts = ent.Options.New
		}
	case OpInsert, OpUpdate, OpReplace:
		if err := needColl(); err != nil {
			return err
		}
		d, dec, err := docFromRaw(bytes.Clone(ent.raw))
		if err != nil {
			return err
		}
		if ent.Op == OpInsert {
			err = c.insert(d, dec, nil)
		} else if cur := c.get(d.idKey); cur == nil {
			err = fmt.Errorf("no document to replace")
		} else {
			d.idKey = cur.idKey
			err = c.replace(cur, d, dec)
		}
		if err != nil {
			return err
		}
	case OpDelete:
		if err := needColl(); err != nil {
			return err
		}
		if len(ent.DocKey) == 0 {
			return fmt.Errorf("no document key")
		}
		cur := c.get(keyOfID(ent.DocKey[0].Value))
		if cur == nil {
			return fmt.Errorf("no document to delete")
		}
		c.delete(cur)
	default:
		return fmt.Errorf("unknown op %q", ent.Op)
	}
	e.lastTS = ent.TS
	e.oplog.append(enc, ent.TS, ent.Wall, e.now())
	return nil
}
