package storage

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"testing"
)

// TestWriterYieldLetsOthersIn: a Write that yields between its mutations lets another Write
// and a Read run in between, in memory and with a data directory; the oplog holds the
// mutations in the order they were applied, Write returns its own last mutation's OpTime, and
// after a reopen every mutation (both records of the yielding Write) is there.
func TestWriterYieldLetsOthersIn(t *testing.T) {
	for _, dir := range []string{"", t.TempDir()} {
		t.Run(fmt.Sprintf("dir=%v", dir != ""), func(t *testing.T) {
			var e *Engine
			if dir == "" {
				e = openMem(t)
			} else {
				e = openDir(t, dir, Options{})
			}
			ins := func(w *Writer, id int) error {
				_, err := w.Insert("db", "c", d("_id", id))
				return err
			}
			var between []any // what a Read saw in between
			var otherTS OpTime
			ts := mustWrite(t, e, func(w *Writer) error {
				if err := ins(w, 1); err != nil {
					return err
				}
				err := w.Yield(func() {
					// Without the lock: another Write and a Read run to the end.
					otherTS = mustWrite(t, e, func(w *Writer) error { return ins(w, 2) })
					between = ids(e, "db", "c", nil)
				})
				if err != nil {
					return err
				}
				if err := w.Yield(nil); err != nil { // a yield with nothing new to log
					return err
				}
				return ins(w, 3)
			})
			if want := []any{int32(1), int32(2)}; !reflect.DeepEqual(between, want) {
				t.Errorf("a Read between the yielding Write's mutations saw %v, want %v", between, want)
			}
			if !tsLess(otherTS, ts) {
				t.Errorf("the yielding Write returned %v, not after the other Write's %v", ts, otherTS)
			}
			var order []any
			for _, ent := range e.OplogAfter(OpTime{}, 0) {
				if ent.Op == OpInsert {
					order = append(order, ent.DocKey[0].Value)
				}
			}
			if want := []any{int32(1), int32(2), int32(3)}; !reflect.DeepEqual(order, want) {
				t.Errorf("oplog inserts %v, want %v", order, want)
			}
			if dir == "" {
				return
			}
			before := dump(e)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if after := dump(openDir(t, dir, Options{})); after != before {
				t.Fatalf("state differs after reopen:\n--- before\n%s\n--- after\n%s", before, after)
			}
		})
	}
}

// TestWriterYieldAfterClose: an engine closed while a Write yields fails the Yield (with the
// lock taken back), and the mutations made before it are still durable.
func TestWriterYieldAfterClose(t *testing.T) {
	dir := t.TempDir()
	e := openDir(t, dir, Options{})
	closed := make(chan error, 1)
	_, err := e.Write(context.Background(), func(w *Writer) error {
		if _, err := w.Insert("db", "c", d("_id", 1)); err != nil {
			return err
		}
		return w.Yield(func() {
			go func() { closed <- e.Close() }()
			// Close marks the engine closed under the lock, then waits for this Write.
			for {
				e.mu.RLock()
				c := e.closed
				e.mu.RUnlock()
				if c {
					return
				}
				runtime.Gosched()
			}
		})
	})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("Write whose Yield outlived Close: %v, want ErrClosed", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if got := ids(openDir(t, dir, Options{}), "db", "c", nil); !reflect.DeepEqual(got, []any{int32(1)}) {
		t.Errorf("after reopen: %v, want [1]", got)
	}
}
