package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/testctx"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func openDir(t testing.TB, dir string, opts Options) *Engine {
	t.Helper()
	opts.Dir = dir
	e, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// dump renders the whole state and oplog deterministically.
func dump(e *Engine) string {
	var sb strings.Builder
	e.Read(func(r *Reader) {
		for _, db := range r.Databases() {
			fmt.Fprintf(&sb, "db %s size=%d empty=%v\n", db.Name, db.SizeOnDisk, db.Empty)
			for _, c := range r.Collections(db.Name) {
				fmt.Fprintf(&sb, " coll %s %x count=%d size=%d\n", c.Name, c.UUID.Data, c.Count, c.Size)
				for _, ix := range c.Indexes {
					fmt.Fprintf(&sb, "  index %s %s unique=%v ttl=%v/%d\n", ix.Name, bsonval.Format(ix.Key), ix.Unique, ix.TTL, ix.ExpireAfterSeconds)
				}
				r.Find(db.Name, c.Name, nil, func(d *Doc) bool {
					fmt.Fprintf(&sb, "  doc %s %x\n", bsonval.Format(d.D()), d.Raw)
					return true
				})
			}
		}
	})
	for _, ent := range e.OplogAfter(OpTime{}, 0) {
		fmt.Fprintf(&sb, "op %v %s %s.%s key=%s doc=%s uuid=%x wall=%d", ent.TS, ent.Op, ent.DB, ent.Coll,
			bsonval.Format(ent.DocKey), bsonval.Format(ent.Doc), ent.UUID.Data, ent.Wall.UnixMilli())
		if ent.Update != nil {
			fmt.Fprintf(&sb, " upd=%s rm=%v ta=%v dp=%s", bsonval.Format(ent.Update.UpdatedFields), ent.Update.RemovedFields,
				ent.Update.TruncatedArrays, bsonval.Format(ent.Update.DottedPaths))
		}
		if ent.Index != nil {
			fmt.Fprintf(&sb, " ix=%s %s %v %v/%d", ent.Index.Name, bsonval.Format(ent.Index.Key), ent.Index.Unique, ent.Index.TTL, ent.Index.ExpireAfterSeconds)
		}
		sb.WriteString("\n")
	}
	first, last := e.OplogRange()
	fmt.Fprintf(&sb, "range %v %v last %v\n", first, last, e.LastOpTime())
	return sb.String()
}

// workload makes every kind of mutation, one Write per step.
func workload(t testing.TB, e *Engine, n int) {
	t.Helper()
	mustWrite(t, e, func(w *Writer) error {
		_, err := w.CreateIndex("app", "events", IndexSpec{Name: "itt", Key: d("id", 1, "type", 1, "timestamp", 1), Unique: true})
		return err
	})
	for i := 0; i < n; i++ {
		mustWrite(t, e, func(w *Writer) error {
			doc, err := w.Insert("app", "events", d("_id", i, "id", fmt.Sprint(i%7), "type", "p", "timestamp", int64(i), "tags", bson.A{"x", i}))
			if err != nil {
				return err
			}
			if i%3 == 0 {
				doc, err = w.Replace("app", "events", doc, append(bsonval.CloneDoc(doc.D()), bson.E{Key: "n", Value: 1.5}),
					&UpdateDesc{UpdatedFields: d("n", 1.5), RemovedFields: []string{"gone"}})
				if err != nil {
					return err
				}
				// A pipeline-style update's description: an array truncated, a dotted field name.
				doc, err = w.Replace("app", "events", doc, append(bsonval.CloneDoc(doc.D()[:len(doc.D())-2]), bson.E{Key: "tags", Value: bson.A{"x"}}, bson.E{Key: "a.b", Value: 1}),
					&UpdateDesc{UpdatedFields: d("a.b", 1), RemovedFields: []string{"n"}, TruncatedArrays: []TruncatedArray{{Field: "tags", NewSize: 1}},
						DottedPaths: d("a.b", bson.A{"a.b"})})
				if err != nil {
					return err
				}
			}
			if i%5 == 0 {
				if _, err = w.Replace("app", "events", doc, d("_id", i, "id", "r", "type", "q", "timestamp", int64(i)), nil); err != nil {
					return err
				}
			}
			if i%11 == 0 {
				return w.Delete("app", "events", doc)
			}
			return nil
		})
	}
	mustWrite(t, e, func(w *Writer) error {
		if _, err := w.CreateIndex("app", "sessions", IndexSpec{Name: "at_1", Key: d("at", 1), TTL: true, ExpireAfterSeconds: 60}); err != nil {
			return err
		}
		for i := 0; i < 6; i++ {
			if _, err := w.Insert("app", "sessions", d("_id", i, "at", bson.DateTime(int64(i)*1000))); err != nil {
				return err
			}
		}
		if _, err := w.SetExpireAfterSeconds("app", "sessions", "at_1", 2); err != nil {
			return err
		}
		// At 5 s, dates before 3 s have expired: _id 0, 1 and 2, deleted two per batch.
		for {
			n, err := w.DeleteExpired("app", "sessions", "at_1", time.UnixMilli(5000), 2)
			if err != nil || n < 2 {
				return err
			}
		}
	})
	mustWrite(t, e, func(w *Writer) error {
		if _, err := w.Insert("tmp", "a", d("_id", "x")); err != nil {
			return err
		}
		if _, err := w.Insert("tmp", "b", d("_id", "y")); err != nil {
			return err
		}
		if _, err := w.CreateIndex("tmp", "b", IndexSpec{Name: "z_1", Key: d("z", 1)}); err != nil {
			return err
		}
		if _, err := w.DropCollection("tmp", "a"); err != nil {
			return err
		}
		if err := w.DropIndex("tmp", "b", "z_1"); err != nil {
			return err
		}
		if _, err := w.CreateCollection("keep", "empty"); err != nil {
			return err
		}
		return w.DropDatabase("tmp")
	})
}

func TestDurableReopen(t *testing.T) {
	dir := t.TempDir()
	e := openDir(t, dir, Options{})
	workload(t, e, 60)
	before := dump(e)
	last := e.LastOpTime()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := openDir(t, dir, Options{})
	if after := dump(e2); after != before {
		t.Fatalf("state differs after reopen:\n--- before\n%s\n--- after\n%s", before, after)
	}
	// Indexes work after recovery, including unique constraints.
	if got := ids(e2, "app", "events", d("id", "3", "type", "p", "timestamp", int64(3))); !reflect.DeepEqual(got, []any{int32(3)}) {
		t.Errorf("index lookup after reopen = %v", got)
	}
	_, err := e2.Write(context.Background(), func(w *Writer) error {
		_, err := w.Insert("app", "events", d("_id", 1000, "id", "1", "type", "p", "timestamp", int64(1)))
		return err
	})
	var dk *DupKeyError
	if !errors.As(err, &dk) {
		t.Errorf("unique index not enforced after reopen: %v", err)
	}
	ts := mustWrite(t, e2, func(w *Writer) error { _, err := w.Insert("app", "more", d("_id", 1)); return err })
	if !tsLess(last, ts) {
		t.Errorf("OpTime %v not after %v", ts, last)
	}
	// Compaction then reopen gives the same state again.
	if err := e2.Compact(); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, e2, func(w *Writer) error { _, err := w.Insert("app", "more", d("_id", 2)); return err })
	before = dump(e2)
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	logs, snaps := files(t, dir)
	if len(snaps) != 1 || len(logs) != 1 {
		t.Errorf("after compaction: logs %v snapshots %v", logs, snaps)
	}
	e3 := openDir(t, dir, Options{})
	if after := dump(e3); after != before {
		t.Fatalf("state differs after compaction + reopen:\n--- before\n%s\n--- after\n%s", before, after)
	}
}

func files(t testing.TB, dir string) (logs, snaps []string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		switch {
		case strings.HasSuffix(de.Name(), logSuffix):
			logs = append(logs, de.Name())
		case strings.HasSuffix(de.Name(), snapSuffix):
			snaps = append(snaps, de.Name())
		}
	}
	return logs, snaps
}

func TestDirLocked(t *testing.T) {
	dir := t.TempDir()
	openDir(t, dir, Options{})
	if _, err := Open(Options{Dir: dir}); err == nil {
		t.Fatal("second Open of the same directory succeeded")
	}
}

// recordOffsets returns the start offsets of the records of a log file, and its size.
func recordOffsets(t testing.TB, path string) ([]int, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int
	for off := 0; off < len(b); {
		_, n, ok := readRecord(b[off:])
		if !ok {
			t.Fatalf("corrupt record at %d", off)
		}
		offs = append(offs, off)
		off += n
	}
	return offs, len(b)
}

func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	des, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(src, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, de.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	e := openDir(t, dir, Options{NoSync: true})
	for i := 0; i < 5; i++ {
		mustWrite(t, e, func(w *Writer) error {
			_, err := w.Insert("db", "c", d("_id", i, "v", strings.Repeat("x", i)))
			return err
		})
	}
	var wantBefore string
	{
		// The state after 4 Writes: a reference engine replaying the same steps.
		ref := openMem(t)
		for i := 0; i < 4; i++ {
			mustWrite(t, ref, func(w *Writer) error {
				_, err := w.Insert("db", "c", d("_id", i, "v", strings.Repeat("x", i)))
				return err
			})
		}
		wantBefore = docsOnly(ref)
	}
	wantAll := docsOnly(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, logName(1))
	offs, size := recordOffsets(t, logPath)
	if len(offs) != 5 {
		t.Fatalf("%d records", len(offs))
	}
	lastStart := offs[4]
	check := func(t *testing.T, mutate func(path string), want string, wantOps int, wantWarn bool) {
		t.Helper()
		cp := copyDir(t, dir)
		mutate(filepath.Join(cp, logName(1)))
		core, logs := observer.New(zap.WarnLevel)
		e2, err := Open(Options{Dir: cp, NoSync: true, Logger: zap.New(core)})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer func() { _ = e2.Close() }()
		if got := docsOnly(e2); got != want {
			t.Fatalf("state:\n%s\nwant:\n%s", got, want)
		}
		if n := len(e2.OplogAfter(OpTime{}, 0)); n != wantOps {
			t.Errorf("oplog has %d entries, want %d", n, wantOps)
		}
		if n := logs.FilterMessage("storage: truncating torn log tail").Len(); (n == 1) != wantWarn {
			t.Errorf("no truncation warning: %v", logs.All())
		}
		// The engine keeps working after truncation, and the result survives a reopen.
		mustWrite(t, e2, func(w *Writer) error { _, err := w.Insert("db", "c", d("_id", 99)); return err })
		after := docsOnly(e2)
		_ = e2.Close()
		e3, err := Open(Options{Dir: cp, NoSync: true})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer func() { _ = e3.Close() }()
		if got := docsOnly(e3); got != after {
			t.Fatalf("after reopen:\n%s\nwant:\n%s", got, after)
		}
	}
	// 5 inserts + 1 implicit create.
	for cut := lastStart; cut < size; cut++ {
		t.Run(fmt.Sprintf("truncate at %d", cut), func(t *testing.T) {
			check(t, func(p string) {
				if err := os.Truncate(p, int64(cut)); err != nil {
					t.Fatal(err)
				}
			}, wantBefore, 5, cut != lastStart)
		})
	}
	for pos := lastStart; pos < size; pos += 7 {
		t.Run(fmt.Sprintf("flip byte %d", pos), func(t *testing.T) {
			check(t, func(p string) {
				b, _ := os.ReadFile(p)
				b[pos] ^= 0x5a
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}, wantBefore, 5, true)
		})
	}
	t.Run("intact", func(t *testing.T) { check(t, func(string) {}, wantAll, 6, false) })
}

func docsOnly(e *Engine) string {
	var sb strings.Builder
	e.Read(func(r *Reader) {
		r.Find("db", "c", nil, func(d *Doc) bool {
			sb.WriteString(bsonval.Format(d.D()) + "\n")
			return true
		})
	})
	return sb.String()
}

func TestAutomaticCompaction(t *testing.T) {
	dir := t.TempDir()
	e := openDir(t, dir, Options{CompactAfterBytes: 4 << 10, NoSync: true})
	for i := 0; i < 200; i++ {
		mustWrite(t, e, func(w *Writer) error {
			_, err := w.Insert("db", "c", d("_id", i, "pad", strings.Repeat("p", 100)))
			return err
		})
	}
	// Compaction runs in the background: poll for its snapshot.
	deadline := testctx.Deadline(t)
	for {
		if _, snaps := files(t, dir); len(snaps) > 0 && !e.compacting.Load() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no snapshot written")
		}
		runtimeGosched()
	}
	before := dump(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	logs, _ := files(t, dir)
	var total int64
	for _, l := range logs {
		st, _ := os.Stat(filepath.Join(dir, l))
		total += st.Size()
	}
	if total > 8<<10 {
		t.Errorf("logs not truncated: %v (%d bytes)", logs, total)
	}
	e2 := openDir(t, dir, Options{NoSync: true})
	if after := dump(e2); after != before {
		t.Fatalf("state differs:\n%s\n---\n%s", before, after)
	}
}

func TestOplogRetention(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	opts := Options{OplogMaxBytes: 2500, OplogMaxAge: time.Hour, Now: clock}
	e := openDir(t, dir, opts)
	for i := 0; i < 50; i++ {
		mustWrite(t, e, func(w *Writer) error { _, err := w.Insert("db", "c", d("_id", i)); return err })
	}
	ents := e.OplogAfter(OpTime{}, 0)
	if len(ents) < 10 || len(ents) > 25 {
		t.Fatalf("retained %d entries", len(ents))
	}
	first, last := e.OplogRange()
	if first != ents[0].TS || last != ents[len(ents)-1].TS || last != e.LastOpTime() {
		t.Errorf("range %v %v, entries %v..%v", first, last, ents[0].TS, ents[len(ents)-1].TS)
	}
	for i := 1; i < len(ents); i++ {
		if !tsLess(ents[i-1].TS, ents[i].TS) {
			t.Fatalf("oplog out of order at %d", i)
		}
	}
	if got := e.OplogAfter(ents[3].TS, 2); len(got) != 2 || got[0].TS != ents[4].TS {
		t.Errorf("OplogAfter with limit = %v", got)
	}
	// Age: entries older than an hour go when the next entry is appended.
	advance(2 * time.Hour)
	mustWrite(t, e, func(w *Writer) error { _, err := w.Insert("db", "c", d("_id", "new")); return err })
	if ents := e.OplogAfter(OpTime{}, 0); len(ents) != 1 || ents[0].DocKey[0].Value != "new" {
		t.Errorf("after aging: %d entries", len(ents))
	}
	// The retained oplog survives restart, through the log and through a snapshot.
	before := dump(e)
	_ = e.Close()
	e2 := openDir(t, dir, opts)
	if after := dump(e2); after != before {
		t.Fatalf("oplog differs after reopen:\n%s\n---\n%s", before, after)
	}
	if err := e2.Compact(); err != nil {
		t.Fatal(err)
	}
	_ = e2.Close()
	e3 := openDir(t, dir, opts)
	if after := dump(e3); after != before {
		t.Fatalf("oplog differs after compaction:\n%s\n---\n%s", before, after)
	}
}

func TestOpTimeMonotonic(t *testing.T) {
	dir := t.TempDir()
	fixed := time.Unix(2_000_000_000, 0)
	e := openDir(t, dir, Options{Now: func() time.Time { return fixed }, NoSync: true})
	var prev OpTime
	for i := 0; i < 5; i++ {
		ts := mustWrite(t, e, func(w *Writer) error { _, err := w.Insert("db", "c", d("_id", i)); return err })
		if !tsLess(prev, ts) || ts.T != 2_000_000_000 {
			t.Fatalf("ts %v after %v", ts, prev)
		}
		prev = ts
	}
	_ = e.Close()
	// The clock went backwards across the restart: OpTimes still increase.
	e2 := openDir(t, dir, Options{Now: func() time.Time { return fixed.Add(-time.Hour) }, NoSync: true})
	if e2.LastOpTime() != prev {
		t.Fatalf("LastOpTime after reopen = %v, want %v", e2.LastOpTime(), prev)
	}
	ts := mustWrite(t, e2, func(w *Writer) error { _, err := w.Insert("db", "c", d("_id", 9)); return err })
	if !tsLess(prev, ts) {
		t.Fatalf("ts %v not after %v", ts, prev)
	}
}

func TestGroupCommitConcurrent(t *testing.T) {
	dir := t.TempDir()
	e := openDir(t, dir, Options{})
	const writers, per = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*per)
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				_, err := e.Write(context.Background(), func(w *Writer) error {
					_, err := w.Insert("db", "c", d("_id", fmt.Sprintf("%d-%d", g, i), "g", g))
					return err
				})
				errs <- err
			}
		}()
		wg.Add(1)
		go func() { // readers proceed while batches sync
			defer wg.Done()
			for i := 0; i < per; i++ {
				e.Read(func(r *Reader) {
					r.Find("db", "c", d("g", g), func(*Doc) bool { return true })
				})
				_ = e.OplogAfter(OpTime{}, 10)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := count(e, "db", "c"); n != writers*per {
		t.Fatalf("count = %d", n)
	}
	syncs := e.syncs.Load()
	t.Logf("%d writes shared %d log syncs", writers*per, syncs)
	if syncs > writers*per {
		t.Errorf("%d syncs for %d writes", syncs, writers*per)
	}
	before := dump(e)
	_ = e.Close()
	e2 := openDir(t, dir, Options{})
	if after := dump(e2); after != before {
		t.Fatal("state differs after reopen")
	}
}

func TestOplogVisibleOnlyWhenDurable(t *testing.T) {
	dir := t.TempDir()
	e := openDir(t, dir, Options{NoSync: true})
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	e.beforeSync = func() {
		entered <- struct{}{}
		<-release
	}
	notify := e.OplogNotify()
	done := make(chan OpTime)
	go func() {
		ts, _ := e.Write(context.Background(), func(w *Writer) error {
			_, err := w.Insert("db", "c", d("_id", 1))
			return err
		})
		done <- ts
	}()
	<-entered
	// The write is visible to readers but not yet in the oplog.
	if count(e, "db", "c") != 1 {
		t.Error("mutation not visible to Read")
	}
	if ents := e.OplogAfter(OpTime{}, 0); len(ents) != 0 {
		t.Errorf("non-durable entries exposed: %d", len(ents))
	}
	if first, last := e.OplogRange(); !first.IsZero() || !last.IsZero() {
		t.Errorf("range %v %v before durable", first, last)
	}
	select {
	case <-notify:
		t.Error("notified before durable")
	default:
	}
	close(release)
	ts := <-done
	<-notify // closed once durable
	ents := e.OplogAfter(OpTime{}, 0)
	if len(ents) != 2 || ents[1].TS != ts || ents[0].Op != OpCreate || ents[1].Op != OpInsert {
		t.Errorf("oplog = %+v", ents)
	}
}

func TestLogWriteFailure(t *testing.T) {
	dir := t.TempDir()
	e := openDir(t, dir, Options{})
	mustWrite(t, e, func(w *Writer) error { _, err := w.Insert("db", "c", d("_id", 1)); return err })
	_ = e.wal.f.Close() // every later write to the log fails
	_, err := e.Write(context.Background(), func(w *Writer) error { _, err := w.Insert("db", "c", d("_id", 2)); return err })
	if err == nil {
		t.Fatal("write with a failing log succeeded")
	}
	ran := false
	_, err = e.Write(context.Background(), func(*Writer) error { ran = true; return nil })
	if err == nil || ran {
		t.Fatalf("engine accepted a write after a log failure: %v", err)
	}
}

// TestSteadyStateDiskUse runs a sliding window of documents — every round inserts a batch
// and deletes the oldest one, as retention does under continuous ingest — and checks that the
// data directory stops growing: compaction keeps running under the writes, deleted documents
// leave the snapshot, the retained oplog stays within its bound, and obsolete logs and
// snapshots are removed. The directory is measured once compaction is idle after each round
// of the second half and must stay within a fixed bound of its size at the end of the first.
func TestSteadyStateDiskUse(t *testing.T) {
	dir := t.TempDir()
	const (
		compactAt = 256 << 10
		oplogMax  = 256 << 10
		perRound  = 200
		window    = 5 // rounds of documents alive at once
		rounds    = 60
	)
	e := openDir(t, dir, Options{CompactAfterBytes: compactAt, OplogMaxBytes: oplogMax, NoSync: true})
	mustWrite(t, e, func(w *Writer) error {
		_, err := w.CreateIndex("db", "c", IndexSpec{Name: "r_1", Key: d("r", 1)})
		return err
	})
	size := func() int64 {
		var total int64
		des, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range des {
			if fi, err := de.Info(); err == nil {
				total += fi.Size()
			}
		}
		return total
	}
	idle := func() {
		deadline := testctx.Deadline(t)
		for e.compacting.Load() {
			if time.Now().After(deadline) {
				t.Fatal("compaction never finished")
			}
			runtimeGosched()
		}
	}
	var sizes []int64
	for r := range rounds {
		mustWrite(t, e, func(w *Writer) error {
			for i := range perRound {
				if _, err := w.Insert("db", "c", d("_id", r*perRound+i, "r", int64(r), "pad", strings.Repeat("p", 400))); err != nil {
					return err
				}
			}
			if r < window {
				return nil
			}
			var old []*Doc
			w.Find("db", "c", d("r", int64(r-window)), func(doc *Doc) bool { old = append(old, doc); return true })
			for _, doc := range old {
				if err := w.Delete("db", "c", doc); err != nil {
					return err
				}
			}
			return nil
		})
		idle()
		sizes = append(sizes, size())
	}
	if n := len(ids(e, "db", "c", nil)); n != window*perRound {
		t.Fatalf("%d documents alive, want %d", n, window*perRound)
	}
	// What must fit: the live documents and the retained oplog in the snapshot, plus a log of
	// up to the compaction threshold (and one round's writes past it).
	live := int64(window * perRound * 450)
	bound := live + oplogMax + 2*compactAt + perRound*1000
	first := sizes[rounds/2-1]
	for r := rounds / 2; r < rounds; r++ {
		if sizes[r] > bound {
			t.Errorf("round %d: data directory %d bytes, above the steady-state bound %d (sizes %v)", r, sizes[r], bound, sizes)
			break
		}
	}
	if last := sizes[rounds-1]; last > first+compactAt {
		t.Errorf("the data directory grew from %d to %d bytes over the second half", first, last)
	}
	logs, snaps := files(t, dir)
	if len(snaps) != 1 || len(logs) > 2 {
		t.Errorf("files left: logs %v snapshots %v", logs, snaps)
	}
	t.Logf("data directory, bytes after each round: %v", sizes)
}
