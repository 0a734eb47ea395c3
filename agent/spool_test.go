package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/gameops/rollup/api/agentclient"
)

var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

// rec is the record of tick i (5-minute ticks from t0), observed obs after the tick.
func rec(i int, obs time.Duration) Record {
	tick := t0.Add(time.Duration(i) * 5 * time.Minute)
	return Record{Project: "p", Timestamp: tick, ObservedAt: tick.Add(obs), SubmissionID: fmt.Sprintf("sub-%d", i),
		Counts: []agentclient.Count{{ID: "leaf-1", Type: "process", Online: int64(i)}}}
}

func recSize(t *testing.T, r Record) int64 {
	t.Helper()
	data, err := encodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(data))
}

func ticksOf(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Tick.Format("15:04"))
	}
	return out
}

// TestSpoolBoundAndOrder: records come back oldest first whatever the order they were
// appended in; a full spool drops its oldest records (returned by Append) to make room, and a
// record larger than the whole bound is refused without dropping anything.
func TestSpoolBoundAndOrder(t *testing.T) {
	size := recSize(t, rec(0, time.Second))
	tests := []struct {
		name        string
		max         int64
		appends     []Record
		wantTicks   []string
		wantDropped []string
		wantErr     error
	}{
		{"in order", 10 * size, []Record{rec(0, time.Second), rec(1, time.Second), rec(2, time.Second)}, []string{"10:00", "10:05", "10:10"}, nil, nil},
		{"out of order", 10 * size, []Record{rec(2, time.Second), rec(0, time.Second), rec(1, time.Second)}, []string{"10:00", "10:05", "10:10"}, nil, nil},
		{"same tick twice, two observations", 10 * size, []Record{rec(0, 2*time.Second), rec(0, time.Second)}, []string{"10:00", "10:00"}, nil, nil},
		{"full: oldest dropped", 2 * size, []Record{rec(0, time.Second), rec(1, time.Second), rec(2, time.Second), rec(3, time.Second)}, []string{"10:10", "10:15"}, []string{"10:00", "10:05"}, nil},
		{"too large for the bound", size - 1, []Record{rec(0, time.Second)}, nil, nil, ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := OpenSpool(dir, tc.max, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			var dropped []Entry
			for _, r := range tc.appends {
				d, err := s.Append(r)
				dropped = append(dropped, d...)
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Append: %v, want %v", err, tc.wantErr)
				}
			}
			if got := ticksOf(s.Entries()); fmt.Sprint(got) != fmt.Sprint(tc.wantTicks) {
				t.Errorf("entries %v, want %v", got, tc.wantTicks)
			}
			if got := ticksOf(dropped); fmt.Sprint(got) != fmt.Sprint(tc.wantDropped) {
				t.Errorf("dropped %v, want %v", got, tc.wantDropped)
			}
			n, b := s.Depth()
			if n != len(tc.wantTicks) || b > tc.max || b != int64(n)*size {
				t.Errorf("depth %d records %d bytes, want %d records within %d bytes", n, b, len(tc.wantTicks), tc.max)
			}
			// Reopened, the spool holds the same records, which load back whole.
			s2, err := OpenSpool(dir, tc.max, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			if got := ticksOf(s2.Entries()); fmt.Sprint(got) != fmt.Sprint(tc.wantTicks) {
				t.Errorf("reopened: entries %v, want %v", got, tc.wantTicks)
			}
			for _, e := range s2.Entries() {
				r, err := s2.Load(e)
				if err != nil || !r.Timestamp.Equal(e.Tick) || r.Counts[0].Online != int64(r.Timestamp.Sub(t0)/(5*time.Minute)) {
					t.Errorf("Load(%s) = %+v, %v", e.Name, r, err)
				}
			}
		})
	}
}

// TestSpoolCorrupt: a torn, bit-flipped or rewritten spool file is ErrCorrupt on Load, never a
// record; leftover temporary files are removed on open and foreign files left alone.
func TestSpoolCorrupt(t *testing.T) {
	good, err := encodeRecord(rec(0, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	flip := append([]byte(nil), good...)
	flip[len(flip)-5] ^= 0x01
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"torn header", good[:10]},
		{"torn body", good[:len(good)-3]},
		{"bit flip", flip},
		{"trailing bytes", append(append([]byte(nil), good...), ' ')},
		{"bad magic", append([]byte("rollup-agent-spool 9"), good[len(spoolMagic):]...)},
		{"not a spool file", []byte(`{"project":"p"}`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			name := entryName(rec(0, time.Second))
			if err := os.WriteFile(filepath.Join(dir, name), tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := OpenSpool(dir, 1<<20, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			es := s.Entries()
			if len(es) != 1 {
				t.Fatalf("entries %v", es)
			}
			if r, err := s.Load(es[0]); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Load = %+v, %v; want ErrCorrupt", r, err)
			}
		})
	}
	t.Run("leftovers", func(t *testing.T) {
		dir := t.TempDir()
		for name, data := range map[string][]byte{spoolTmp + "x.tick": good[:5], "README": []byte("hi"), entryName(rec(1, 0)): good} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		s, err := OpenSpool(dir, 1<<20, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := ticksOf(s.Entries()); fmt.Sprint(got) != "[10:05]" {
			t.Errorf("entries %v", got)
		}
		if _, err := os.Stat(filepath.Join(dir, spoolTmp+"x.tick")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("temporary file left: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "README")); err != nil {
			t.Errorf("foreign file removed: %v", err)
		}
	})
}

// TestSpoolRemove: Remove deletes the file and its bytes from the depth; removing twice is no
// error.
func TestSpoolRemove(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenSpool(dir, 1<<20, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Append(rec(i, time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	e := s.Entries()[1]
	for range 2 {
		if err := s.Remove(e); err != nil {
			t.Fatal(err)
		}
	}
	if got := ticksOf(s.Entries()); fmt.Sprint(got) != "[10:00 10:10]" {
		t.Errorf("entries %v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, e.Name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file still there: %v", err)
	}
	if n, b := s.Depth(); n != 2 || b != 2*recSize(t, rec(0, time.Second)) {
		t.Errorf("depth %d, %d", n, b)
	}
}
