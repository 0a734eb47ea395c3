package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/testctx"
)

// waitFor fails the test unless done is closed within bound (a deadline, not a sleep).
func waitFor(t *testing.T, done <-chan struct{}, bound time.Duration, what string) {
	t.Helper()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s did not complete within %v while a scan ran", what, bound)
	}
}

func fillSeq(t *testing.T, e *Engine, coll string, n int) {
	t.Helper()
	mustWrite(t, e, func(w *Writer) error {
		_, err := w.CreateIndex("db", coll, IndexSpec{Name: "k_1", Key: d("k", 1)})
		return err
	})
	for lo := 0; lo < n; lo += 10_000 {
		mustWrite(t, e, func(w *Writer) error {
			for i := lo; i < min(lo+10_000, n); i++ {
				if _, err := w.Insert("db", coll, d("_id", i, "k", fmt.Sprintf("%07d", i))); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// TestYieldingScanLetsWritesThrough: while a scan over 10,000 documents is half way (it
// released the lock after at most yieldAfterEntries and goes on over a clone), a Write (an
// insert, then dropping the collection being scanned) completes; the scan then returns every
// document it started with exactly once and in order, and the Reader sees the drop.
func TestYieldingScanLetsWritesThrough(t *testing.T) {
	const n = 10_000 // the write comes at n/2, several yields (yieldAfterEntries) into the scan
	e := openMem(t)
	fillSeq(t, e, "c", n)
	for _, tc := range []struct {
		name   string
		filter bson.D
		sorted bool // FindInOrder on k, descending
	}{
		{"_id scan", nil, false},
		{"index range", d("k", d("$gte", "")), false},
		{"index range descending", d("k", d("$gte", "")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			coll := "c"
			if tc.name != "_id scan" {
				coll = "c_" + fmt.Sprint(len(tc.name))
				fillSeq(t, e, coll, n)
			}
			var got []int32
			var writeErr error
			done := make(chan struct{})
			fn := func(doc *Doc) bool {
				got = append(got, doc.D()[0].Value.(int32))
				if len(got) == n/2 {
					go func() {
						defer close(done)
						_, writeErr = e.Write(context.Background(), func(w *Writer) error {
							if _, err := w.Insert("db", coll, d("_id", n+1, "k", n+1)); err != nil {
								return err
							}
							_, err := w.DropCollection("db", coll)
							return err
						})
					}()
					waitFor(t, done, 2*time.Second, "Write")
				}
				return true
			}
			exists := true
			e.ReadYielding(func(r *Reader) {
				if tc.sorted {
					if !r.FindInOrder("db", coll, tc.filter, "k", true, fn) {
						t.Error("FindInOrder: no index order")
					}
				} else {
					r.Find("db", coll, tc.filter, fn)
				}
				_, exists = r.Collection("db", coll)
			})
			if writeErr != nil {
				t.Fatalf("Write: %v", writeErr)
			}
			if exists {
				t.Error("the Reader does not see the drop after the scan")
			}
			if len(got) != n {
				t.Fatalf("scan returned %d documents, want %d", len(got), n)
			}
			for i, id := range got {
				want := int32(i)
				if tc.sorted {
					want = int32(n - 1 - i)
				}
				if id != want {
					t.Fatalf("document %d is _id %d, want %d", i, id, want)
				}
			}
		})
	}
}

// TestYieldingScanUnderWrites cross-checks yielding scans against the documents no writer
// touches: while a writer updates (moving their index keys), deletes and inserts other
// documents, every untouched document in the queried range is returned exactly once, no
// document twice, and sorted scans keep index order.
func TestYieldingScanUnderWrites(t *testing.T) {
	const n = 20_000
	rng := rand.New(rand.NewPCG(17, 4))
	e := openMem(t)
	mustWrite(t, e, func(w *Writer) error {
		for _, coll := range []string{"c", "mk"} {
			if _, err := w.CreateIndex("db", coll, IndexSpec{Name: "k_1", Key: d("k", 1)}); err != nil {
				return err
			}
			for i := range n {
				var k any = key(rng.IntN(1000))
				if coll == "mk" {
					// Multikey: each document is reached through up to three entries.
					k = bson.A{key(rng.IntN(1000)), key(rng.IntN(1000)), key(rng.IntN(1000))}
				}
				if _, err := w.Insert("db", coll, d("_id", i, "k", k, "stable", i%2 == 0)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	// stable documents (even _id) are never written after this point.
	type want struct {
		k      []string
		stable bool
	}
	initial := map[string]map[int32]want{}
	e.Read(func(r *Reader) {
		for _, coll := range []string{"c", "mk"} {
			initial[coll] = map[int32]want{}
			r.Find("db", coll, nil, func(doc *Doc) bool {
				dd := doc.D()
				var ks []string
				switch k := dd[1].Value.(type) {
				case string:
					ks = []string{k}
				case bson.A:
					for _, v := range k {
						ks = append(ks, v.(string))
					}
				}
				initial[coll][dd[0].Value.(int32)] = want{k: ks, stable: dd[2].Value.(bool)}
				return true
			})
		}
	})

	ctx, cancel := context.WithCancel(context.Background())
	var ops atomic.Int64
	// progress holds a token after each of the writer's transactions, so that a scan waiting
	// for the writer blocks instead of spinning (spinning was a third of the test's CPU).
	progress := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		wr := rand.New(rand.NewPCG(4, 17))
		next := int32(n)
		for ctx.Err() == nil {
			_, err := e.Write(ctx, func(w *Writer) error {
				for range 20 {
					coll := []string{"c", "mk"}[wr.IntN(2)]
					id := int32(wr.IntN(n/2)*2 + 1) // odd: not stable
					var k any = key(wr.IntN(1000))
					if coll == "mk" {
						k = bson.A{key(wr.IntN(1000)), key(wr.IntN(1000))}
					}
					cur, ok := w.Get("db", coll, id)
					switch op := wr.IntN(3); {
					case !ok || op == 0:
						next++
						if _, err := w.Insert("db", coll, d("_id", next, "k", k, "stable", false)); err != nil {
							return err
						}
					case op == 1:
						if _, err := w.Replace("db", coll, cur, d("_id", id, "k", k, "stable", false), nil); err != nil {
							return err
						}
					default:
						if err := w.Delete("db", coll, cur); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if err != nil && ctx.Err() == nil {
				t.Errorf("writer: %v", err)
				return
			}
			ops.Add(1)
			select {
			case progress <- struct{}{}:
			default:
			}
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()

	inRange := func(ks []string, lo, hi string) bool {
		for _, k := range ks {
			if k >= lo && k < hi {
				return true
			}
		}
		return false
	}
	// 8 rounds hold every kind of scan (both collections, _id and index range, sorted
	// ascending and descending, unsorted); 16 took 7 CPU s under -race, 8 take 4.
	// ROLLUP_TEST_SEEDS=n runs n × 8 rounds.
	for round := range 8 * testctx.Seeds(t, 1) {
		coll := []string{"c", "mk"}[round%2]
		lo := rng.IntN(300)
		hi := lo + 400 + rng.IntN(300)
		filter := d("k", d("$gte", key(lo), "$lt", key(hi)))
		if round%3 == 2 {
			filter = nil // the _id scan
		}
		sorted := coll == "c" && filter != nil && round%4 == 0
		desc := round/4%2 == 1
		seen := map[int32]int{}
		var order []string
		calls := 0
		fn := func(doc *Doc) bool {
			calls++
			dd := doc.D()
			id := dd[0].Value.(int32)
			seen[id]++
			if k, ok := dd[1].Value.(string); ok {
				order = append(order, k)
			}
			if calls > 2*yieldAfterEntries && calls%500 == 0 {
				// The scan runs without the lock now: let the writer make progress.
				target := ops.Load() + 2
				done := make(chan struct{})
				go func() {
					defer close(done)
					for ops.Load() < target {
						select {
						case <-progress:
						case <-ctx.Done():
							return
						}
					}
				}()
				waitFor(t, done, 10*time.Second, "the writer")
			}
			return true
		}
		e.ReadYielding(func(r *Reader) {
			if sorted {
				if !r.FindInOrder("db", coll, filter, "k", desc, fn) {
					t.Errorf("round %d: FindInOrder: no index order", round)
				}
				return
			}
			r.Find("db", coll, filter, fn)
		})
		for id, c := range seen {
			if c > 1 {
				t.Fatalf("round %d (%s %v): _id %d returned %d times", round, coll, filter, id, c)
			}
		}
		for id, w := range initial[coll] {
			if w.stable && (filter == nil || inRange(w.k, key(lo), key(hi))) && seen[id] != 1 {
				t.Fatalf("round %d (%s %v): stable _id %d (k %v) returned %d times", round, coll, filter, id, w.k, seen[id])
			}
		}
		if sorted {
			for i := 1; i < len(order); i++ {
				if desc && order[i] > order[i-1] || !desc && order[i] < order[i-1] {
					t.Fatalf("round %d: sorted scan out of order at %d: %s after %s", round, i, order[i], order[i-1])
				}
			}
		}
		if calls <= 2*yieldAfterEntries {
			t.Fatalf("round %d: only %d candidates: the scan never yielded", round, calls)
		}
	}
}

// key is the string index key of n, ordered as n.
func key(n int) string { return fmt.Sprintf("%04d", n) }
