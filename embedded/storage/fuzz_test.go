package storage

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// seedLog returns a valid log produced by a small workload.
func seedLog(f *testing.F) []byte {
	dir := f.TempDir()
	e, err := Open(Options{Dir: dir, NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	workload(f, e, 12)
	if err := e.Close(); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, logName(1)))
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzOpenLog recovers from arbitrary log files: Open must never panic, and a recovered
// engine must accept writes and reopen to the same state.
func FuzzOpenLog(f *testing.F) {
	valid := seedLog(f)
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, logName(1)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		e, err := Open(Options{Dir: dir, NoSync: true})
		if err != nil {
			return
		}
		if _, err := e.Write(context.Background(), func(w *Writer) error {
			_, err := w.Insert("fuzz", "c", d("_id", "after"))
			return err
		}); err != nil {
			t.Fatalf("write after recovery: %v", err)
		}
		before := dump(e)
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		e2, err := Open(Options{Dir: dir, NoSync: true})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer func() { _ = e2.Close() }()
		if after := dump(e2); after != before {
			t.Fatalf("state differs after reopen:\n%s\n---\n%s", before, after)
		}
	})
}

// FuzzApplyRecord feeds arbitrary record payloads (past the checksum) to replay: it must
// return errors, never panic.
func FuzzApplyRecord(f *testing.F) {
	valid := seedLog(f)
	for off := 0; off < len(valid); {
		payload, n, ok := readRecord(valid[off:])
		if !ok {
			break
		}
		f.Add(payload)
		off += n
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		e, err := Open(Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = e.Close() }()
		e.mu.Lock()
		defer e.mu.Unlock()
		// Twice: the second pass meets existing collections, documents and indexes.
		_ = e.applyRecord(payload)
		_ = e.applyRecord(payload)
		_ = e.oplog.after(OpTime{}, OpTime{T: ^uint32(0), I: ^uint32(0)}, 0)
	})
}
