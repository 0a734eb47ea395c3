package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/gameops/rollup/api/agentclient"
)

// Record is one sampled tick as the spool keeps it: everything a resend needs to be the same
// submission (its id and observed_at, the version of its writes).
type Record struct {
	Project      string              `json:"project"`
	Timestamp    time.Time           `json:"timestamp"`
	ObservedAt   time.Time           `json:"observed_at"`
	SubmissionID string              `json:"submission_id"`
	Counts       []agentclient.Count `json:"counts"`
}

// Submission is the record as agentclient sends it.
func (r Record) Submission() agentclient.Submission {
	return agentclient.Submission{Project: r.Project, Timestamp: r.Timestamp, ObservedAt: r.ObservedAt,
		SubmissionID: r.SubmissionID, Counts: r.Counts}
}

// Entry is one file of the spool.
type Entry struct {
	// Name is the file name: TICK-OBSERVED.tick (unix seconds and unix nanoseconds, zero
	// padded, so names sort oldest first).
	Name string
	// Tick is the tick the record is for.
	Tick time.Time
	// Size is the file's size in bytes.
	Size int64
}

// ErrCorrupt marks a spool file whose header, length or checksum is wrong (a torn write or a
// damaged disk); its record is never sent.
var ErrCorrupt = errors.New("corrupt spool file")

// ErrTooLarge is Append's error for a record larger than the whole spool.
var ErrTooLarge = errors.New("record larger than the spool bound")

const (
	spoolExt   = ".tick"
	spoolTmp   = ".tmp-"
	spoolMagic = "rollup-agent-spool 1"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Spool is the on-disk queue of sampled ticks: one file per record, written to a temporary
// file, fsync'd, renamed into place and the directory fsync'd, so a record is either whole
// or absent after a crash. Its size is bounded: Append drops the oldest records to make
// room. A Spool is safe for concurrent use.
type Spool struct {
	dir      string
	maxBytes int64
	log      *zap.Logger

	mu      sync.Mutex
	entries []Entry // sorted by Name: oldest first
	bytes   int64
}

// OpenSpool opens (creating it if needed) the spool in dir, bounded to maxBytes. Leftover
// temporary files of an interrupted write are removed; other files that are not spool files
// are left alone and logged.
func OpenSpool(dir string, maxBytes int64, log *zap.Logger) (*Spool, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("spool %s: the size bound must be positive", dir)
	}
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create spool directory: %w", err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read spool directory: %w", err)
	}
	s := &Spool{dir: dir, maxBytes: maxBytes, log: log}
	for _, de := range des {
		name := de.Name()
		switch {
		case strings.HasPrefix(name, spoolTmp):
			log.Warn("removing a spool file whose write was interrupted", zap.String("file", name))
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("remove interrupted spool file: %w", err)
			}
			continue
		case !de.Type().IsRegular():
			continue
		}
		tick, ok := parseEntryName(name)
		if !ok {
			log.Warn("ignoring a file that is not a spool file", zap.String("dir", dir), zap.String("file", name))
			continue
		}
		info, err := de.Info()
		if err != nil {
			return nil, fmt.Errorf("stat spool file: %w", err)
		}
		s.entries = append(s.entries, Entry{Name: name, Tick: tick, Size: info.Size()})
		s.bytes += info.Size()
	}
	sort.Slice(s.entries, func(i, j int) bool { return s.entries[i].Name < s.entries[j].Name })
	return s, nil
}

// entryName is the file name of r: its tick and observed_at, zero padded to sort in time
// order.
func entryName(r Record) string {
	return fmt.Sprintf("%012d-%020d%s", r.Timestamp.Unix(), r.ObservedAt.UnixNano(), spoolExt)
}

// parseEntryName returns the tick of a spool file name.
func parseEntryName(name string) (time.Time, bool) {
	base, ok := strings.CutSuffix(name, spoolExt)
	if !ok {
		return time.Time{}, false
	}
	tick, obs, ok := strings.Cut(base, "-")
	if !ok || len(tick) != 12 || len(obs) != 20 {
		return time.Time{}, false
	}
	secs, err := strconv.ParseInt(tick, 10, 64)
	if err != nil || secs < 0 {
		return time.Time{}, false
	}
	if _, err := strconv.ParseUint(obs, 10, 64); err != nil {
		return time.Time{}, false
	}
	return time.Unix(secs, 0).UTC(), true
}

// encodeRecord is a spool file's content: a header line with the body's length and CRC-32C,
// then the record's JSON.
func encodeRecord(r Record) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode spool record: %w", err)
	}
	head := fmt.Sprintf("%s %08x %d\n", spoolMagic, crc32.Checksum(body, castagnoli), len(body))
	return append([]byte(head), body...), nil
}

// decodeRecord checks a spool file's header, length and checksum and decodes its record; any
// mismatch is ErrCorrupt.
func decodeRecord(data []byte) (Record, error) {
	var r Record
	head, body, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return r, fmt.Errorf("%w: no header line", ErrCorrupt)
	}
	fields := strings.Fields(string(head))
	if len(fields) != 4 || strings.Join(fields[:2], " ") != spoolMagic {
		return r, fmt.Errorf("%w: bad header %q", ErrCorrupt, truncate(string(head), 64))
	}
	sum, err1 := strconv.ParseUint(fields[2], 16, 32)
	n, err2 := strconv.Atoi(fields[3])
	switch {
	case err1 != nil || err2 != nil:
		return r, fmt.Errorf("%w: bad header %q", ErrCorrupt, truncate(string(head), 64))
	case n != len(body):
		return r, fmt.Errorf("%w: %d bytes of record, the header says %d (a torn write?)", ErrCorrupt, len(body), n)
	case crc32.Checksum(body, castagnoli) != uint32(sum):
		return r, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return r, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Append writes r durably (file and directory fsync'd) and returns the records dropped to
// stay within the bound, oldest first. A record larger than the whole bound is ErrTooLarge
// and drops nothing.
func (s *Spool) Append(r Record) ([]Entry, error) {
	data, err := encodeRecord(r)
	if err != nil {
		return nil, err
	}
	size := int64(len(data))
	if size > s.maxBytes {
		return nil, fmt.Errorf("%w: tick %s is %d bytes, the spool holds %d", ErrTooLarge, r.Timestamp.Format(time.RFC3339), size, s.maxBytes)
	}
	name := entryName(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	var dropped []Entry
	for len(s.entries) > 0 && s.bytes+size > s.maxBytes {
		old := s.entries[0]
		if err := s.removeLocked(old); err != nil {
			return dropped, err
		}
		dropped = append(dropped, old)
	}
	if err := writeDurably(s.dir, name, data); err != nil {
		return dropped, err
	}
	e := Entry{Name: name, Tick: r.Timestamp.UTC(), Size: size}
	i := sort.Search(len(s.entries), func(i int) bool { return s.entries[i].Name >= name })
	if i < len(s.entries) && s.entries[i].Name == name { // the same tick and observation again
		s.bytes -= s.entries[i].Size
		s.entries[i] = e
	} else {
		s.entries = append(s.entries, Entry{})
		copy(s.entries[i+1:], s.entries[i:])
		s.entries[i] = e
	}
	s.bytes += size
	return dropped, nil
}

// writeDurably writes data to dir/name through a temporary file: write, fsync, rename,
// fsync the directory.
func writeDurably(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, spoolTmp+name)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("write spool file: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write spool file: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync spool directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync spool directory: %w", err)
	}
	return nil
}

// Entries returns the spool's files, oldest first.
func (s *Spool) Entries() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.entries...)
}

// Depth returns how many records the spool holds and their bytes.
func (s *Spool) Depth() (records int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries), s.bytes
}

// Load reads and checks e's record; a damaged file is ErrCorrupt.
func (s *Spool) Load(e Entry) (Record, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, e.Name))
	if err != nil {
		return Record{}, fmt.Errorf("read spool file %s: %w", e.Name, err)
	}
	r, err := decodeRecord(data)
	if err != nil {
		return r, fmt.Errorf("spool file %s: %w", e.Name, err)
	}
	return r, nil
}

// Remove deletes e (sent, expired or corrupt) and fsyncs the directory; removing a record
// already gone is not an error.
func (s *Spool) Remove(e Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removeLocked(e)
}

func (s *Spool) removeLocked(e Entry) error {
	i := sort.Search(len(s.entries), func(i int) bool { return s.entries[i].Name >= e.Name })
	if i == len(s.entries) || s.entries[i].Name != e.Name {
		return nil
	}
	if err := os.Remove(filepath.Join(s.dir, e.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove spool file: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		return err
	}
	s.bytes -= s.entries[i].Size
	s.entries = append(s.entries[:i], s.entries[i+1:]...)
	return nil
}
